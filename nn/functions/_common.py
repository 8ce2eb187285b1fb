"""Helpers shared by the ops: the output-rounding rule, the fp32 widening of a tensor, and the
autocast hook ``autocast_inputs`` (an op's inputs as ``nn.precision.autocast.CAST_POLICY`` says)."""

from __future__ import annotations

import numpy as np

from nn.engine.autograd import Context
from nn.engine.formats import at_least_fp32
from nn.engine.rounding import round_array
from nn.engine.tensor import Tensor
from nn.functions.cast import Cast, cast
from nn.precision.autocast import FP32, INPUT, LOWER, active_format, cast_policy


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


def autocast_inputs(op: str, *tensors: Tensor) -> tuple[Tensor, ...]:
    """``tensors`` as op ``op`` takes them: inside ``nn.autocast``, cast to the autocast format
    (``LOWER``: a Cast op, so each gradient is cast back to its tensor's own format) or widened
    to FP32 (``FP32``, exact) as ``nn.precision.autocast.CAST_POLICY`` lists the op; else as
    they are."""
    fmt = active_format()
    if fmt is None:
        return tensors
    rule = cast_policy(op)
    if rule == LOWER:
        return tuple(cast(t, fmt) for t in tensors)
    if rule == FP32:
        return tuple(widen(t) for t in tensors)
    return tensors


def autocast_lower(*tensors: Tensor) -> tuple[Tensor, ...]:
    """``autocast_inputs`` for an op autocast runs low (a matmul-like op of one's own)."""
    fmt = active_format()
    return tensors if fmt is None else tuple(cast(t, fmt) for t in tensors)


def autocast_fp32(t: Tensor) -> Tensor:
    """``autocast_inputs`` for an op autocast runs in fp32 (an op of one's own)."""
    return t if active_format() is None else widen(t)


def autocast_output(op: str, a: Tensor, out: Tensor) -> Tensor:
    """``out`` (op ``op`` of ``a``) rounded once to ``a``'s format where autocast's table says
    ``INPUT`` (a reduction inside ``autocast("cpu")``); else ``out``."""
    if active_format() is None or cast_policy(op) != INPUT:
        return out
    return cast(out, a.fmt)
