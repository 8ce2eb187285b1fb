"""Activations: relu, leaky_relu, sigmoid, tanh, gelu, softmax, log_softmax, and dropout.

Elementwise activations compute in the carrier and round once to the input's format.
softmax and log_softmax run in fp32 (max-shifted, the sums in fp32), forward and backward, and
round their output once to the input's format -- so a softmax left inside an fp16 layer gives
fp16 probabilities, while ``Activation("softmax", dtype="float32")`` gives fp32 ones.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from fpsim import Format
from nn.engine import kernels as _kernels
from nn.engine import rounding
from nn.engine.autograd import Context, Function, is_grad_enabled
from nn.engine.formats import at_least_fp32
from nn.engine.tensor import Tensor
from nn.functions._common import autocast_inputs, constant, finish, widen
from nn.functions.elementwise import erf


class ReLU(Function):
    """max(a, 0) (exact); backward is the fused ``relu_grad``."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray) -> np.ndarray:
        return np.maximum(a, 0)

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return relu_grad(grad, ctx.output())


class ReLUGrad(Function):
    """g where y > 0 else 0 (exact: a selection) -- relu's backward, one numba pass."""

    differentiable_backward = True

    @staticmethod
    def output_format(*fmts: Format | None, **params: Any) -> Format | None:
        return fmts[0]

    @staticmethod
    def forward(ctx: Context, g: np.ndarray, y: np.ndarray) -> np.ndarray:
        if rounding.KERNELS_ENABLED and g.shape == y.shape and g.dtype == y.dtype:
            g, y = np.ascontiguousarray(g), np.ascontiguousarray(y)
            out = np.empty(g.shape, g.dtype)
            _kernels.relu_grad(g.reshape(-1), y.reshape(-1), out.reshape(-1))
            return out
        return np.where(y > 0, g, 0).astype(g.dtype, copy=False)

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor, None]:
        return relu_grad(grad, ctx.inputs[1]), None


class LeakyReLU(Function):
    """a if a > 0 else alpha * a (rounded); d/da = 1 or alpha (alpha rounded to the format)."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, alpha: float = 0.01) -> np.ndarray:
        ctx.saved["alpha"] = alpha
        return finish(ctx, np.where(a > 0, a, a * a.dtype.type(alpha)))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        a = ctx.inputs[0].data
        return grad * constant(np.where(a > 0, 1.0, ctx.saved["alpha"]), grad)


class Sigmoid(Function):
    """1 / (1 + exp(-a)), evaluated without overflow; d/da = s (1 - s)."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray) -> np.ndarray:
        e = np.exp(-np.abs(a))
        out = np.where(a >= 0, 1 / (1 + e), e / (1 + e)).astype(a.dtype, copy=False)
        return finish(ctx, out)

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        s = ctx.output()
        return grad * (s * (1.0 - s))


class Tanh(Function):
    """tanh(a); d/da = 1 - tanh(a)^2."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray) -> np.ndarray:
        return finish(ctx, np.tanh(a))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        t = ctx.output()
        return grad * (1.0 - t * t)


class GELU(Function):
    """a * Phi(a) with the exact normal CDF Phi(a) = (1 + erf(a / sqrt 2)) / 2.

    d/da = Phi(a) + a * phi(a), phi(a) = exp(-a^2 / 2) / sqrt(2 pi).
    """

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray) -> np.ndarray:
        # a * (erf(a / sqrt 2) + 1) * 0.5, each step in place in one buffer
        y = np.multiply(a, a.dtype.type(1 / math.sqrt(2)), out=np.empty(a.shape, a.dtype))
        flat = y.reshape(-1)
        _kernels.erf(flat, flat)
        np.add(y, 1, out=y)
        np.multiply(a, y, out=y)
        return finish(ctx, np.multiply(y, a.dtype.type(0.5), out=y))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        a = ctx.inputs[0]
        cdf = (erf(a * (1 / math.sqrt(2))) + 1.0) * 0.5
        pdf = (a * a * -0.5).exp() * (1 / math.sqrt(2 * math.pi))
        return grad * (cdf + a * pdf)


def _rows(*arrays: np.ndarray, axis: int) -> tuple[np.ndarray, ...] | None:
    """The float32 ``arrays`` (one shape) flattened C-contiguous, for the softmax kernels along
    the last axis (rows of ``shape[-1]`` elements): when nn's kernels are on and ``axis`` is the
    last one; else None."""
    a = arrays[0]
    if not (rounding.KERNELS_ENABLED and a.ndim and axis % a.ndim == a.ndim - 1 and a.size
            and all(x.dtype == np.float32 and x.shape == a.shape for x in arrays)):
        return None
    return tuple(np.ascontiguousarray(x).reshape(-1) for x in arrays)


def _logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    """m + log(sum(exp(x - m))) along ``axis``, m the max where finite, else 0; along the last
    axis of float32 data the shift and the sum are kernels (see Softmax), bit for bit."""
    rows = _rows(x, axis=axis)
    if rows is not None:
        n, m = x.shape[-1], np.empty((*x.shape[:-1], 1), np.float32)
        e, s = np.empty(x.shape, np.float32), np.empty_like(m)
        _kernels.shift_by_row_max(rows[0], e.reshape(-1), n, m.reshape(-1), True)
        np.exp(e, out=e)
        if _kernels.row_sums(e.reshape(-1), n, s.reshape(-1)):
            return m + np.log(s)
    return _logsumexp_array(x, axis)


def _logsumexp_array(x: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    return m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def softmax_array(a: np.ndarray, axis: int) -> np.ndarray:
    """exp(a - max) / sum along ``axis`` (numpy; the definition the kernel path must equal)."""
    e = np.exp(a - np.max(a, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def softmax_grad_composed(s: Tensor, g: Tensor, axis: int) -> Tensor:
    """s * (g - sum(g * s)) along ``axis`` in fp32, as nn ops (the definition the kernel path
    must equal)."""
    s, g = widen(s), widen(g)
    return s * (g - (g * s).sum(axis=axis, keepdims=True))


class Softmax(Function):
    """exp(a - max) / sum, in fp32; backward s * (g - sum(g * s)) in fp32.

    Along the last axis of float32 data (the attention's softmax) both directions run as numba
    kernels (nn._kernels: exact max and differences, numpy's exp, numpy's pairwise row sums),
    bit for bit the numpy composition, which every other case -- and any row where a NaN
    arises, whose payload could differ -- takes. Every step is fp32 (a float32 result
    "rounded" to FP32 is itself and counts nothing), so monitor counts are the same.
    """

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, axis: int = -1) -> np.ndarray:
        ctx.saved["axis"] = axis
        rows = _rows(a, axis=axis)
        if rows is not None:
            e = np.empty(a.shape, np.float32)
            flat, n = e.reshape(-1), a.shape[-1]
            maxima = np.empty(a.size // n, np.float32)
            if _kernels.shift_by_row_max(rows[0], flat, n, maxima, False):
                np.exp(e, out=e)
                if _kernels.divide_by_row_sum(flat, n):
                    return finish(ctx, e)
        return finish(ctx, softmax_array(a, axis))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        axis = ctx.saved["axis"]
        rows = None if ctx.fmt is None or grad.fmt is None else _rows(ctx.out, grad.data, axis=axis)
        if rows is not None and not is_grad_enabled():  # (a recorded backward takes the ops)
            out = np.empty(ctx.out.shape, np.float32)
            if _kernels.softmax_grad(rows[0], rows[1], out.reshape(-1), ctx.out.shape[-1]):
                return Tensor._make(out, at_least_fp32(ctx.fmt))
        return softmax_grad_composed(ctx.output(), grad, axis)


class LogSoftmax(Function):
    """a - logsumexp(a), in fp32; backward g - exp(out) * sum(g) in fp32."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, axis: int = -1) -> np.ndarray:
        ctx.saved["axis"] = axis
        return finish(ctx, a - _logsumexp(a, axis))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        out, g = widen(ctx.output()), widen(grad)
        return g - out.exp() * g.sum(axis=ctx.saved["axis"], keepdims=True)


class Dropout(Function):
    """a * mask * scale, one rounding; the backward is the same op on the gradient."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, mask: Any = None, scale: float = 1.0) -> np.ndarray:
        ctx.saved.update(mask=mask, scale=scale)
        return finish(ctx, a * (mask * a.dtype.type(scale)))

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return Dropout.apply(grad, **ctx.saved)


def relu(a: Tensor) -> Tensor:
    return ReLU.apply(a)


def relu_grad(g: Tensor, y: Tensor) -> Tensor:
    """g masked by y > 0 (relu's backward as a tensor op)."""
    return ReLUGrad.apply(g, y)


def leaky_relu(a: Tensor, alpha: float = 0.01) -> Tensor:
    """a where a > 0, else alpha * a; ``alpha`` is a finite real number."""
    if not isinstance(alpha, numbers.Real) or not math.isfinite(alpha):
        raise ValueError(f"leaky_relu: alpha must be a finite real number, got {alpha!r}")
    return LeakyReLU.apply(a, alpha=float(alpha))


def sigmoid(a: Tensor) -> Tensor:
    return Sigmoid.apply(a)


def tanh(a: Tensor) -> Tensor:
    return Tanh.apply(a)


def gelu(a: Tensor) -> Tensor:
    return GELU.apply(a)


def _check_axis(a: Tensor, axis: int) -> int:
    if not -a.ndim <= axis < a.ndim:
        raise ValueError(f"axis {axis} is out of range for a tensor of shape {a.shape}")
    return axis


def softmax(a: Tensor, axis: int = -1) -> Tensor:
    """Softmax along ``axis``, computed in fp32, rounded once to a's format (FP32 inside
    ``nn.autocast``)."""
    return Softmax.apply(*autocast_inputs("softmax", a), axis=_check_axis(a, axis))


def log_softmax(a: Tensor, axis: int = -1) -> Tensor:
    """Log-softmax along ``axis``, computed in fp32, rounded once to a's format (FP32 inside
    ``nn.autocast``)."""
    return LogSoftmax.apply(*autocast_inputs("log_softmax", a), axis=_check_axis(a, axis))


def dropout(
    a: Tensor, rate: float, rng: np.random.Generator | None = None, training: bool = True
) -> Tensor:
    """Zero each element with probability ``rate`` and scale the rest by 1 / (1 - rate).

    Identity when not training or rate == 0.
    """
    if not 0 <= rate < 1:
        raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
    if not training or rate == 0:
        return a
    rng = np.random.default_rng() if rng is None else rng
    mask = (rng.random(a.shape) >= rate).astype(a.data.dtype)
    return Dropout.apply(a, mask=mask, scale=1.0 / (1.0 - rate))
