"""Keras 3's float8 training of ``Dense``, step for step and rounding for rounding
(keras/src/quantizers/quantizers.py and ``Dense._float8_call`` in
keras/src/layers/core/dense.py, Keras 3.x).

Each of the three tensors of the matmul (inputs, kernel, the output's gradient) has a float32
``scale`` (1 at first) and a float32 ``amax_history`` of ``amax_history_length`` values (zeros
at first), variables of the layer. With C the layer's compute format:

- ``quantize_and_dequantize(x, scale, fp8, C)``: ``q = C(x / C(scale))``, clipped to
  +-fp8.max, cast to fp8 (nearest-even), then ``C(C(q) * C(scale))``: three roundings to C
  and one to fp8 (each a single rounding of the exact result);
- forward: the inputs and the kernel (read in C) each go through it with E4M3 (e4m3fn),
  ``y = C(x_qdq @ kernel_qdq)`` (fp32 accumulation), the bias added in a second op (under a
  float32 compute dtype Keras first rounds the bias to bfloat16: its bias-add fusion);
- backward: the output's gradient goes through it with E5M2; the gradients of the inputs and
  kernel are the matmul's own (the quantizers pass gradients straight through);
- the new scales and histories are the *gradients* of those variables (Keras's
  ``overwrite_with_gradient``; the optimizer stores them instead of stepping), so they change
  when the optimizer applies a step, and only then (a step skipped by the loss-scale optimizer
  keeps them). Inputs and kernel produce them only when called with ``training=True``;
- ``compute_float8_scale(amax, scale, fp8.max)``: ``1 / (fp8.max / amax)`` in float32 (two
  roundings), where ``amax = max(history)`` *before* this step's value joins it; an amax that
  is 0 or not finite gives ``1 / (1 / scale)`` (also two float32 roundings);
- ``compute_float8_amax_history(x, history)``: ``roll(history, -1)``, then element 0 set to
  ``max(|x|)`` (so the history holds the last ``amax_history_length`` values).

>>> import numpy as np
>>> float(compute_float8_scale(np.float32(3.0), np.float32(1.0), 448.0))
0.0066964286379516125
>>> compute_float8_amax_history(np.float32([-5.0, 2.0]), np.float32([1.0, 2.0, 3.0]))
array([5., 3., 1.], dtype=float32)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fpsim import E4M3FN, E5M2, FP32, Format
from nn.engine.autograd import Context, Function
from nn.engine.rounding import round_array
from nn.engine.tensor import Tensor, Variable

_FORWARD_FORMAT = E4M3FN  # "float8_e4m3fn": inputs and kernel (theirs)
_BACKWARD_FORMAT = E5M2  # "float8_e5m2": the output's gradient (theirs)
ROLES = ("inputs", "kernel", "outputs_grad")  # Keras's variable prefixes, in its order


def _to(values: np.ndarray, fmt: Format | None) -> np.ndarray:
    """``values`` (float32 or float64, exact or not) rounded once to ``fmt``, carried in float32
    (float64 for fmt None)."""
    if fmt is None:
        return np.asarray(values, np.float64)
    return round_array(np.asarray(values, np.float64), fmt)


def quantize_and_dequantize(x: np.ndarray, scale: np.ndarray, fp8: Format,
                            compute: Format | None) -> np.ndarray:
    """Keras 3's ``quantize_and_dequantize(inputs, scale, quantized_dtype, compute_dtype)``
    on values of ``compute``: the module docstring's four roundings. A quotient or product of
    two float32 values taken in float64 and rounded once to C is the correctly rounded result
    (53 >= 2 * 24 + 2), which is what a division or multiplication in C gives."""
    scale_c = _to(np.asarray(scale, np.float32), compute).astype(np.float64)
    limit = np.float64(_to(np.float64(fp8.max), compute))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = _to(np.asarray(x, np.float64) / scale_c, compute).astype(np.float64)
        q = np.clip(q, -limit, limit)
        q = _to(q, fp8).astype(np.float64)  # C(fp8 value) is exact: C holds every fp8 value
        return _to(q * scale_c, compute)


def compute_float8_scale(amax: np.ndarray, scale: np.ndarray, dtype_max: float,
                         margin: int = 0) -> np.float32:
    """Keras 3's ``compute_float8_scale``, in float32 (the module docstring's rule)."""
    amax, scale = np.float32(amax), np.float32(scale)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inverse = np.float32(1) / scale
        sf = (np.float32(dtype_max) / amax) / np.float32(2.0**margin)
        if not (amax > 0 and np.isfinite(amax)):
            sf = inverse
        return np.float32(np.float32(1) / sf)


def compute_float8_amax_history(x: np.ndarray, history: np.ndarray) -> np.ndarray:
    """Keras 3's ``compute_float8_amax_history``: roll by -1, element 0 = float32(max|x|)."""
    new = np.roll(np.asarray(history, np.float32), -1)
    new[0] = np.float32(np.max(np.abs(x))) if np.size(x) else np.float32(0)
    return new


def _state(values: Any) -> Tensor:
    return Tensor._make(np.asarray(values, np.float32), FP32)


class QuantizeDequantizeInputs(Function):
    """Keras's ``quantized_dequantize_inputs``: the forward quantizer of the inputs or the
    kernel. Its gradient: the incoming one unchanged for ``x``; for the scale and history the
    new values (``training`` True), else None."""

    @staticmethod
    def output_format(*fmts: Format | None, **params: Any) -> Format | None:
        return fmts[0]  # x's compute format (the scale and history are float32 state)

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, scale: np.ndarray, history: np.ndarray,
                training: bool = False) -> np.ndarray:
        if training:
            ctx.saved["scale"] = compute_float8_scale(np.max(history), scale,
                                                      _FORWARD_FORMAT.max)
            ctx.saved["history"] = compute_float8_amax_history(x, history)
        out = quantize_and_dequantize(x, scale, _FORWARD_FORMAT, ctx.fmt)
        return out.astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, ...]:
        if "scale" not in ctx.saved:
            return grad, None, None
        return grad, _state(ctx.saved["scale"]), _state(ctx.saved["history"])


class QuantizeDequantizeOutputsGrad(Function):
    """Keras's ``quantized_dequantize_outputs``: the identity forward; backward, the incoming
    gradient through ``quantize_and_dequantize`` with E5M2, and the new scale and history
    (from the unquantized gradient) as the gradients of those variables."""

    @staticmethod
    def output_format(*fmts: Format | None, **params: Any) -> Format | None:
        return fmts[0]

    @staticmethod
    def forward(ctx: Context, y: np.ndarray, scale: np.ndarray, history: np.ndarray
                ) -> np.ndarray:
        return y.copy()

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, ...]:
        scale, history = (t.data for t in ctx.inputs[1:])
        g = grad.data
        new_scale = compute_float8_scale(np.max(history), scale, _BACKWARD_FORMAT.max)
        qdq = quantize_and_dequantize(g, scale, _BACKWARD_FORMAT, grad.fmt).astype(g.dtype)
        new_history = compute_float8_amax_history(g, history)
        return Tensor._make(qdq, grad.fmt), _state(new_scale), _state(new_history)


def float8_variables(layer: Any, history_length: int) -> dict[str, Variable]:
    """The six float32 variables of Keras's ``_float8_build`` for ``layer``, in Keras's order
    (``inputs_scale``, ``inputs_amax_history``, ``kernel_scale``, ...): trainable, and marked
    ``overwrite_with_gradient`` (the optimizer stores their gradient as their new value)."""
    made: dict[str, Variable] = {}
    for role in ROLES:
        for key, init in ((f"{role}_scale", np.ones(())),
                          (f"{role}_amax_history", np.zeros(history_length))):
            var = Variable(init, fmt=FP32, name=f"{layer.name}/{key}")
            var.overwrite_with_gradient = True  # type: ignore[attr-defined]
            made[key] = var
    return made


__all__ = ["QuantizeDequantizeInputs", "QuantizeDequantizeOutputsGrad", "ROLES",
           "compute_float8_amax_history", "compute_float8_scale", "float8_variables",
           "quantize_and_dequantize"]
