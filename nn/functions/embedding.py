"""Embedding lookup: rows of a table gathered by integer index (exact), and its gradient.

The backward is the sparse gradient made dense: every row's gradient is the sum of the output
gradients of the positions that looked it up, accumulated in fp32 (``np.add.at``'s additions,
in index order) and handed to the engine labelled FP32, so it is rounded *once* to the table's
format -- repeated indices never round partial sums. Rows nobody looked up get exact zeros.
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
        g = grad.data
        full = np.zeros(table.shape, dtype=np.float64 if g.dtype == np.float64 else np.float32)
        scatter_add(full, ctx.saved["indices"].reshape(-1), g.reshape(-1, table.shape[1]))
        return Tensor._make(full, at_least_fp32(grad.fmt))


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
    [0, size), else a ValueError naming ``what``, the offending value and the range."""
    arr = np.asarray(x.data if isinstance(x, Tensor) else x)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{what} must be integers, got an array of dtype {arr.dtype}")
    if arr.dtype.kind == "f":
        whole = np.isfinite(arr) & (np.floor(arr) == arr)
        if not np.all(whole):
            bad = arr[~whole].reshape(-1)[0]
            raise ValueError(f"{what} must hold whole numbers, got {bad!r}")
    idx = arr.astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        bad = idx[(idx < 0) | (idx >= size)].reshape(-1)[0]
        raise ValueError(f"{what} must lie in [0, {size}), got {int(bad)}")
    return idx


def embedding(table: Tensor, indices: Any) -> Tensor:
    """Rows of ``table`` (V, D) at ``indices`` (any shape of ints in [0, V))."""
    if table.ndim != 2:
        raise ValueError(f"embedding: table must have shape (rows, dim), got {table.shape}")
    return EmbeddingLookup.apply(table, indices=integer_indices(indices, table.shape[0]))
