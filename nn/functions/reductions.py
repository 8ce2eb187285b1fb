"""Reductions: sum, mean, max. They run in fp32 and return FP32 (float64 under "float64").

Summing fp16 values in fp32 is what hardware does (fp32 accumulators); the backward broadcasts
the fp32 gradient, and the engine rounds it to the input's format.
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from fpsim import Format
from nn.engine.autograd import Context, Function
from nn.engine.formats import at_least_fp32
from nn.engine.rounding import last_axis_sum
from nn.engine.tensor import Tensor
from nn.functions._common import autocast_inputs, autocast_output, constant
from nn.functions.shape import BroadcastTo

Axis = int | tuple[int, ...] | None


def _normalize(axis: Axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for ax in axes:
        if not -ndim <= ax < builtins.max(ndim, 1):
            raise ValueError(f"axis {ax} is out of range for a tensor with {ndim} dimensions")
        out.append(int(ax) % builtins.max(ndim, 1))
    return tuple(sorted(set(out)))


def _kept_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


class _Reduction(Function):
    @staticmethod
    def output_format(*fmts: Format | None, **params: Any) -> Format | None:
        return at_least_fp32(fmts[0])


class Sum(_Reduction):
    """sum over ``axes`` in fp32; backward broadcasts the gradient."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, axes: tuple[int, ...] = (), keepdims: bool = False
                ) -> np.ndarray:
        ctx.saved["kept"] = _kept_shape(a.shape, axes)
        fast = last_axis_sum(a, axes, keepdims)
        if fast is not None:
            return fast
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN, as in IEEE
            return np.asarray(a.sum(axis=axes, keepdims=keepdims))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return BroadcastTo.apply(grad, shape=ctx.inputs[0].shape, kept=ctx.saved["kept"])


class Mean(_Reduction):
    """mean over ``axes`` in fp32; backward broadcasts grad / n."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, axes: tuple[int, ...] = (), keepdims: bool = False
                ) -> np.ndarray:
        ctx.saved["kept"] = _kept_shape(a.shape, axes)
        ctx.saved["count"] = int(np.prod([a.shape[i] for i in axes])) if axes else 1
        fast = last_axis_sum(a, axes, keepdims) if a.size else None
        if fast is not None:  # np.mean's own division: by an intp count, in place, unsafe cast
            return np.true_divide(fast, np.intp(a.shape[-1]), out=fast, casting="unsafe")
        if not a.size:
            return np.asarray(np.nan, dtype=a.dtype)
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN, as in IEEE
            return np.asarray(np.mean(a, axis=axes, keepdims=keepdims))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        kept, count = ctx.saved["kept"], ctx.saved["count"]
        return BroadcastTo.apply(grad / float(count), shape=ctx.inputs[0].shape, kept=kept)


class Max(_Reduction):
    """max over ``axes``; the gradient is shared equally by the tied maxima."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, axes: tuple[int, ...] = (), keepdims: bool = False
                ) -> np.ndarray:
        ctx.saved["kept"] = _kept_shape(a.shape, axes)
        return np.asarray(np.max(a, axis=axes, keepdims=keepdims)).astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        a = ctx.inputs[0]
        kept = ctx.saved["kept"]
        hit = a.data == ctx.out.reshape(kept)
        count = hit.sum(axis=tuple(i for i, n in enumerate(kept) if n == 1), keepdims=True)
        g = BroadcastTo.apply(grad, shape=a.shape, kept=kept)
        return (g * constant(hit, g)) / constant(count, g)


def _reduce(cls: type[_Reduction], a: Tensor, axis: Axis, keepdims: bool) -> Tensor:
    if a.size == 0 and cls is Max:
        raise ValueError("max of an empty tensor")
    return cls.apply(a, axes=_normalize(axis, a.ndim), keepdims=bool(keepdims))


def sum(a: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Sum in fp32 (FP32 result; float64 under "float64"; in a's format inside
    ``autocast("cpu")``, as PyTorch's CPU autocast)."""
    (a,) = autocast_inputs("sum", a)
    return autocast_output("sum", a, _reduce(Sum, a, axis, keepdims))


def mean(a: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """Mean in fp32 (FP32 result; in a's format inside ``autocast``, as PyTorch's)."""
    (a,) = autocast_inputs("mean", a)
    return autocast_output("mean", a, _reduce(Mean, a, axis, keepdims))


def max(a: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Maximum (exact), returned in FP32 like the other reductions (in a's format inside
    ``autocast``)."""
    (a,) = autocast_inputs("max", a)
    return autocast_output("max", a, _reduce(Max, a, axis, keepdims))
