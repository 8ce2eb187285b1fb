"""Helpers shared by the ops: the output-rounding rule, the fp32 widening of a tensor, and the
two autocast hooks (``autocast_lower`` for matmul-like ops, ``autocast_fp32`` for the ops
autocast runs in fp32; see ``nn.autocast``)."""

from __future__ import annotations

import numpy as np

from nn.autocast import active_format
from nn.autograd import Context
from nn.functions.cast import Cast, cast
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


def autocast_lower(*tensors: Tensor) -> tuple[Tensor, ...]:
    """Inside ``nn.autocast``: each tensor cast to the autocast format (a Cast op, so its
    gradient is cast back to the tensor's own format); outside: the tensors as they are.

    Every op autocast runs in the lower-precision format calls this on its inputs first
    (``matmul``, ``linear``; a convolution or attention op written as its own Function too).
    """
    fmt = active_format()
    if fmt is None:
        return tensors
    return tuple(cast(t, fmt) for t in tensors)


def autocast_fp32(t: Tensor) -> Tensor:
    """Inside ``nn.autocast``: ``t`` widened to FP32 (exact); outside: ``t``. The ops autocast
    keeps in fp32 (softmax, log_softmax, exp, log, pow, norms) call this on their input."""
    return t if active_format() is None else widen(t)
