"""Helpers shared by the ops: the output-rounding rule and the fp32 widening of a tensor."""

from __future__ import annotations

import numpy as np

from nn.autograd import Context
from nn.functions.cast import Cast
from nn.policy import at_least_fp32
from nn.rounding import round_array
from nn.tensor import Tensor


def finish(ctx: Context, out: np.ndarray) -> np.ndarray:
    """``out`` (a fresh array from the op's arithmetic) rounded in place to ``ctx.fmt``, at the
    op's output site."""
    out = np.asarray(out)  # numpy returns scalars for 0-d operands
    inplace = out if out.dtype == (np.float64 if ctx.fmt is None else np.float32) else None
    return round_array(out, ctx.fmt, site=ctx.output_site(), out=inplace)


def widen(t: Tensor) -> Tensor:
    """``t`` in FP32 (or float64): exact, shares the data; for work that runs in fp32."""
    fmt = at_least_fp32(t.fmt)
    if fmt is t.fmt or fmt == t.fmt:
        return t
    return Cast.apply(t, fmt=fmt)


def constant(values: np.ndarray, like: Tensor) -> Tensor:
    """A tensor without history holding ``values`` rounded to ``like``'s format."""
    dtype = like.data.dtype
    data = np.asarray(values, dtype=dtype)
    return Tensor._make(round_array(data, like.fmt), like.fmt)
