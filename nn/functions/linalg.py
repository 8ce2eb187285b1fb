"""matmul and the fused dense op ``linear``: compute-format inputs, fp32 accumulation, one rounding.

float32 BLAS on values of the compute format is the fp32-accumulating matrix unit (products
of fp16/bf16 values are exact in fp32); the result is rounded once to the output format. In
``linear`` the bias is added to the fp32 accumulator before that one rounding, and a relu
activation rides in the same numba pass (``relu(round(v)) == round(relu(v))``).

Under an fp8 or block recipe (``nn.fp8_autocast`` or a recipe policy such as "mxfp8" or
"mixed_tf32") both become ``nn.fp8.ops``'s quantized matmul, after the ``nn.autocast`` cast.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fpsim import FP32, Format
from nn.engine import kernels as _kernels
from nn.engine import rounding
from nn.engine.autograd import Context, Function, grad_site
from nn.engine.formats import carrier_dtype
from nn.engine.rounding import kernel_params, round_array
from nn.engine.tensor import Tensor
from nn.fp8.ops import linear as fp8_linear
from nn.fp8.ops import matmul as fp8_matmul
from nn.fp8.scope import active_run
from nn.functions._common import autocast_inputs, finish, widen
from nn.functions.activations import relu_grad
from nn.functions.reductions import sum as reduce_sum
from nn.functions.shape import transpose

_NO_BIAS = np.zeros(1, dtype=np.float32)


def _swap_last(t: Tensor) -> Tensor:
    axes = tuple(range(t.ndim - 2)) + (t.ndim - 1, t.ndim - 2)
    return transpose(t, axes)


class MatMul(Function):
    """a @ b for tensors of >= 2 dimensions (leading dimensions broadcast).

    ``out_fmt``/``site`` let a backward produce a gradient directly in the format (and at the
    monitor site) of the tensor it belongs to: the same single rounding the engine would do,
    without a second pass over a fresh array.
    """

    differentiable_backward = True

    @staticmethod
    def output_format(*fmts: Format | None, **params: Any) -> Format | None:
        out_fmt = params.get("out_fmt", "promote")
        return Function.output_format(*fmts) if isinstance(out_fmt, str) else out_fmt

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, b: np.ndarray, out_fmt: Any = "promote",
                site: str | None = None) -> np.ndarray:
        with np.errstate(invalid="ignore", over="ignore"):  # inf * 0 is NaN, as in IEEE
            z = np.matmul(a, b)
        if site is None:
            return finish(ctx, z)
        inplace = z if z.dtype == carrier_dtype(ctx.fmt) else None
        return round_array(z, ctx.fmt, site=site, out=inplace)

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        a, b = ctx.inputs
        g = widen(grad)  # fp32 accumulation; the engine rounds each result to its input's format
        need_a, need_b = ctx.needs_input_grad
        # MatMul.apply, not ``@``: a backward never goes through the autocast hook
        return (MatMul.apply(g, _swap_last(widen(b))) if need_a else None,
                MatMul.apply(_swap_last(widen(a)), g) if need_b else None)


class Linear(Function):
    """relu?(x @ w + b) for x (N, in), w (in, out), b (out,): one rounding of the fp32 sum."""

    differentiable_backward = True

    @staticmethod
    def forward(
        ctx: Context, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None,
        relu: bool = False,
    ) -> np.ndarray:
        ctx.saved["relu"] = relu
        with np.errstate(invalid="ignore", over="ignore"):
            z = np.matmul(x, w)
        if z.dtype == np.float32 and z.ndim == 2 and z.size > 0:
            # float32 needs no rounding: the kernel then only fuses bias + relu
            exact = ctx.fmt is FP32 or ctx.fmt == FP32
            p = None if exact else kernel_params(ctx.fmt)
            if (exact and rounding.KERNELS_ENABLED) or p is not None:
                bias = b if b is not None else _NO_BIAS
                _kernels.bias_act_round(z, bias, b is not None, relu, not exact, p)
                return z
        if b is not None:
            z += b
        z = finish(ctx, z)
        return np.maximum(z, 0, out=z) if relu else z

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, ...]:
        x, w = ctx.inputs[:2]
        gz = relu_grad(grad, ctx.output()) if ctx.saved["relu"] else grad
        need = ctx.needs_input_grad
        # compute-format operands, fp32 accumulation, one rounding into x's / w's format
        grads: tuple[Tensor | None, ...] = (
            MatMul.apply(gz, w.T, out_fmt=x.fmt, site=grad_site(x, ctx, 0, Linear))
            if need[0] else None,
            MatMul.apply(x.T, gz, out_fmt=w.fmt, site=grad_site(w, ctx, 1, Linear))
            if need[1] else None,
        )
        if len(ctx.inputs) == 3:
            grads += (reduce_sum(gz, axis=0) if need[2] else None,)
        return grads


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """a @ b: compute-format inputs, fp32 accumulation, one rounding to the output format.

    Inside ``nn.autocast`` both inputs are cast to the autocast format first; under an fp8
    recipe they are then quantized by it (``nn.fp8.ops``)."""
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(
            f"matmul needs tensors of at least 2 dimensions, got shapes {a.shape} and {b.shape}"
        )
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(
            f"matmul: shapes {a.shape} and {b.shape} are not aligned "
            f"({a.shape[-1]} (last dimension of a) != {b.shape[-2]} (second-to-last of b))"
        )
    run = active_run()
    if run is not None:
        return fp8_matmul(run, *autocast_inputs("matmul", a, b))
    return MatMul.apply(*autocast_inputs("matmul", a, b))


def linear(x: Tensor, w: Tensor, b: Tensor | None = None, activation: Any = None) -> Tensor:
    """The dense layer's op: ``relu?(x @ w + b)`` with a single rounding of the fp32 sum.

    ``activation`` is None or "relu" (fused); anything else is applied by the caller.
    Inside ``nn.autocast`` x, w and b are cast to the autocast format first; under an fp8
    recipe x and w are then quantized by it (``nn.fp8.ops``; the bias is added in fp32).
    """
    if activation not in (None, "relu"):
        raise ValueError(f"linear fuses only activation=None or 'relu', got {activation!r}")
    if x.ndim != 2 or w.ndim != 2 or x.shape[1] != w.shape[0]:
        raise ValueError(f"linear: input of shape {x.shape} does not fit a kernel of shape "
                         f"{w.shape} (expected (batch, {w.shape[0] if w.ndim else '?'}))")
    if b is not None and b.shape != (w.shape[1],):
        raise ValueError(f"linear: bias of shape {b.shape}, expected ({w.shape[1]},)")
    inputs = autocast_inputs("linear", *((x, w) if b is None else (x, w, b)))
    run = active_run()
    if run is not None:
        return fp8_linear(run, inputs[0], inputs[1], inputs[2] if b is not None else None,
                          activation)
    return Linear.apply(*inputs, relu=activation == "relu")
