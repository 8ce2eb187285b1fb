"""Elementwise arithmetic: add, sub, mul, div, neg, pow, exp, log, sqrt, erf, clip.

Each forward computes in the carrier (float32: correctly rounded for + - * / sqrt of values of
any format with at most 11 significant bits, since 24 >= 2*11 + 2) and rounds once to the
output format. Backwards are tensor ops, so their products round like any other op.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from nn.engine import kernels as _kernels
from nn.engine.autograd import Context, Function
from nn.engine.tensor import Tensor
from nn.functions._common import autocast_inputs, constant, finish


class Add(Function):
    """a + b (broadcasting); the engine sums each gradient back to its input's shape."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return finish(ctx, np.add(a, b))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor, Tensor]:
        return grad, grad


class Sub(Function):
    """a - b."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return finish(ctx, np.subtract(a, b))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor, Tensor]:
        return grad, -grad


class Mul(Function):
    """a * b."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return finish(ctx, np.multiply(a, b))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.inputs
        return grad * b, grad * a


class Div(Function):
    """a / b; d/db = -(grad / b) * (a / b), reusing the rounded quotient."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return finish(ctx, np.divide(a, b))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor, Tensor]:
        _, b = ctx.inputs
        grad_a = grad / b
        return grad_a, -(grad_a * ctx.output())


class Neg(Function):
    """-a (exact)."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray) -> np.ndarray:
        return np.negative(a)

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return -grad


class Pow(Function):
    """a ** p for a real number p; d/da = p * a ** (p - 1)."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, exponent: float = 1.0) -> np.ndarray:
        ctx.saved["exponent"] = exponent
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return finish(ctx, np.power(a, a.dtype.type(exponent)))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        (a,) = ctx.inputs
        p = ctx.saved["exponent"]
        return grad * (pow(a, p - 1.0) * p)


class Exp(Function):
    """exp(a); d/da = exp(a), the rounded output."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return finish(ctx, np.exp(a))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return grad * ctx.output()


class Log(Function):
    """log(a); d/da = 1 / a."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return finish(ctx, np.log(a))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return grad / ctx.inputs[0]


class Sqrt(Function):
    """sqrt(a); d/da = 1 / (2 sqrt(a))."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return finish(ctx, np.sqrt(a))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return grad / (ctx.output() * 2.0)


class Erf(Function):
    """erf(a) (numba kernel over math.erf); d/da = 2/sqrt(pi) * exp(-a^2)."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray) -> np.ndarray:
        out = np.empty_like(a, order="C")
        _kernels.erf(np.ascontiguousarray(a).reshape(-1), out.reshape(-1))
        return finish(ctx, out)

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        (a,) = ctx.inputs
        return grad * ((-(a * a)).exp() * (2.0 / math.sqrt(math.pi)))


class Clip(Function):
    """clip(a, lo, hi), rounded; the gradient passes where lo <= a <= hi."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, lo: float = -np.inf, hi: float = np.inf) -> np.ndarray:
        ctx.saved.update(lo=lo, hi=hi)
        return finish(ctx, np.clip(a, lo, hi))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        lo, hi = ctx.saved["lo"], ctx.saved["hi"]
        a = ctx.inputs[0].data
        return grad * constant((a >= lo) & (a <= hi), grad)


def add(a: Tensor, b: Tensor) -> Tensor:
    return Add.apply(a, b)


def sub(a: Tensor, b: Tensor) -> Tensor:
    return Sub.apply(a, b)


def mul(a: Tensor, b: Tensor) -> Tensor:
    return Mul.apply(a, b)


def div(a: Tensor, b: Tensor) -> Tensor:
    return Div.apply(a, b)


def neg(a: Tensor) -> Tensor:
    return Neg.apply(a)


def pow(a: Tensor, exponent: Any) -> Tensor:  # noqa: A001 (the op's name)
    """a ** exponent, for a real-number exponent (in FP32 inside ``nn.autocast``)."""
    if not isinstance(exponent, numbers.Real) or isinstance(exponent, (bool, np.bool_)):
        raise TypeError(
            f"pow: exponent must be a real number (int or float), got {exponent!r} "
            f"of type {type(exponent).__name__}"
        )
    return Pow.apply(*autocast_inputs("pow", a), exponent=float(exponent))


def exp(a: Tensor) -> Tensor:
    """e ** a, rounded to a's format (computed and returned in FP32 inside ``nn.autocast``)."""
    return Exp.apply(*autocast_inputs("exp", a))


def log(a: Tensor) -> Tensor:
    """ln a, rounded to a's format (computed and returned in FP32 inside ``nn.autocast``)."""
    return Log.apply(*autocast_inputs("log", a))


def sqrt(a: Tensor) -> Tensor:
    return Sqrt.apply(a)


def erf(a: Tensor) -> Tensor:
    return Erf.apply(a)


def clip(a: Tensor, lo: float, hi: float) -> Tensor:
    """a clipped to [lo, hi] (rounded to a's format); lo <= hi."""
    if not lo <= hi:
        raise ValueError(f"clip: lo must be <= hi, got lo={lo!r}, hi={hi!r}")
    return Clip.apply(a, lo=lo, hi=hi)
