"""Embedding lookup: rows of a table gathered by integer index (exact), and its gradient.

The backward is the sparse gradient made dense: every row's gradient is the sum of the output
gradients of the positions that looked it up, accumulated in float64 (``np.add.at``'s additions,
in index order) and rounded *once* to fp32 (nearest-even), the format the engine labels it
with -- repeated indices never round partial sums to fp32. (Our rule. An fp32 running sum would
lose them: a row that receives 2^24 and then 1000 ones would get 2^24, although the sum,
2^24 + 1000, is an fp32 number. Float64 holds the sum of up to 2^29 fp32 terms of one binade
exactly.) Rows nobody looked up get exact zeros.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nn.engine import kernels as _kernels
from nn.engine import rounding
from nn.engine.autograd import Context, Function
from nn.engine.formats import at_least_fp32
from nn.engine.tensor import Tensor


class EmbeddingLookup(Function):
    """table (V, D), indices (...) -> (..., D)."""

    @staticmethod
    def output_format(*fmts: Any, **params: Any) -> Any:
        return fmts[0]

    @staticmethod
    def forward(ctx: Context, table: np.ndarray, indices: Any = None) -> np.ndarray:
        ctx.saved["indices"] = indices
        return table[indices]

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        (table,) = ctx.inputs
        g = grad.data.astype(np.float64, copy=False)  # exact: fp32 values are float64 values
        full = np.zeros(table.shape, dtype=np.float64)
        scatter_add(full, ctx.saved["indices"].reshape(-1), g.reshape(-1, table.shape[1]))
        fmt = at_least_fp32(grad.fmt)
        # the one rounding: float64 -> fp32 is IEEE nearest-even (fmt None: float64, no rounding)
        return Tensor._make(full if fmt is None else full.astype(np.float32), fmt)


def scatter_add(full: np.ndarray, idx: np.ndarray, g: np.ndarray) -> None:
    """``np.add.at(full, idx, g)`` for a 2-D ``full`` and rows ``g``: row ``idx[i]`` += ``g[i]``
    for i in order. With nn's kernels on, a numba loop doing the same additions in the same
    order (bit for bit np.add.at, about 20x faster); else np.add.at itself."""
    if rounding.KERNELS_ENABLED and g.dtype == full.dtype and len(idx) == len(g):
        _kernels.scatter_add_rows(full, idx, np.ascontiguousarray(g))
    else:
        np.add.at(full, idx, g)


def integer_indices(x: Any, size: int, what: str = "indices") -> np.ndarray:
    """``x`` (ints, or floats holding integers as Keras accepts) as an int64 array in
    [0, size), else an error naming ``what``, the offending value as given and what is
    allowed. The range is checked in ``x``'s own dtype, before the cast: a uint64 id of 2^63
    or a float id of 1e20 is reported as itself, not as the int64 it would wrap to."""
    arr = np.asarray(x.data if isinstance(x, Tensor) else x)
    allowed = f"whole numbers in [0, {size})"
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{what} must be integers ({allowed}), got an array of dtype "
                        f"{arr.dtype}")
    if arr.dtype.kind == "f":
        whole = np.isfinite(arr) & (np.floor(arr) == arr)
        if not np.all(whole):
            bad = arr[~whole].reshape(-1)[0]
            raise ValueError(f"{what} must be {allowed}, got {bad.item()!r}")
    if arr.size:
        outside = (arr < 0) | (arr >= size)  # compared in arr's dtype: nothing has wrapped yet
        if np.any(outside):
            bad = arr[outside].reshape(-1)[0]
            raise ValueError(f"{what} must be {allowed}, got {bad.item()!r}")
    return arr.astype(np.int64)


def embedding(table: Tensor, indices: Any) -> Tensor:
    """Rows of ``table`` (V, D) at ``indices`` (any shape of ints in [0, V))."""
    if table.ndim != 2:
        raise ValueError(f"embedding: table must have shape (rows, dim), got {table.shape}")
    return EmbeddingLookup.apply(table, indices=integer_indices(indices, table.shape[0]))
