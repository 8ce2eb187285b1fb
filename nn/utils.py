"""PyTorch's ``torch.nn.utils`` gradient helpers: ``clip_grad_norm_`` and ``clip_grad_value_``.

They act in place on the ``.grad`` of the parameters given (``model.parameters()``), after
``backward`` and, in the AMP recipe, after ``scaler.unscale_(opt)`` so the norm is the true one:

>>> scaler.scale(loss).backward()                                    # doctest: +SKIP
>>> scaler.unscale_(opt)                                             # doctest: +SKIP
>>> total = nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)  # doctest: +SKIP
>>> scaler.step(opt); scaler.update()                                # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from nn.engine.checks import number
from nn.engine.rounding import round_array
from nn.engine.tensor import Tensor


def _grads(parameters: Any) -> list[Tensor]:
    """The ``.grad`` tensors of ``parameters`` (one tensor or an iterable), skipping None."""
    params: Iterable[Any] = [parameters] if isinstance(parameters, Tensor) else parameters
    try:
        items = list(params)
    except TypeError:
        raise TypeError(f"parameters must be a tensor or an iterable of tensors (e.g. "
                        f"model.parameters()), got {type(parameters).__name__}") from None
    for p in items:
        if not isinstance(p, Tensor):
            raise TypeError(f"parameters must hold nn tensors (e.g. model.parameters()), got an "
                            f"element of type {type(p).__name__}")
    return [p.grad for p in items if p.grad is not None]


def _scale_in_place(g: Tensor, factor: np.float32) -> None:
    """g *= factor in the carrier (fp32), rounded once to g's format."""
    with np.errstate(invalid="ignore", over="ignore"):  # inf * 0 is NaN, as in PyTorch
        np.multiply(g.data, factor, out=g.data, casting="unsafe")
    round_array(g.data, g.fmt, out=g.data)


def clip_grad_norm_(parameters: Any, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Scale the gradients in place so that their total norm is at most ``max_norm``; returns
    the total norm of the gradients *before* clipping, as an FP32 scalar tensor (PyTorch).

    - total norm = the ``norm_type``-norm of the per-parameter ``norm_type``-norms (the norm
      of all gradient entries as one vector); ``norm_type`` may be ``inf`` (largest absolute
      entry). Computed in float64 from the fp32 gradients, then rounded to fp32.
    - the gradients are multiplied by ``min(1, max_norm / (total + 1e-6))``, that coefficient
      computed in fp32 as PyTorch does; each product is rounded once to the gradient's format.
    - a non-finite total norm raises RuntimeError with ``error_if_nonfinite=True``; otherwise
      (the default) the coefficient is 0 or NaN and the gradients become 0/NaN, as in
      PyTorch -- ``GradScaler.step`` skips that step anyway, having seen the inf/NaN in
      ``unscale_``.
    - no gradients at all: returns 0.0 and changes nothing. ``foreach`` is accepted and ignored.
    """
    max_norm = number("clip_grad_norm_: max_norm", max_norm, lo=0.0)
    if not isinstance(norm_type, (int, float, np.integer, np.floating)) or isinstance(
            norm_type, bool) or math.isnan(norm_type) or norm_type <= 0:
        raise ValueError(f"clip_grad_norm_: norm_type must be a number > 0 or inf, got "
                         f"{norm_type!r}")
    p = float(norm_type)
    grads = _grads(parameters)
    if not grads:
        return Tensor(0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        if math.isinf(p):
            total = max(float(np.max(np.abs(g.data), initial=0.0)) for g in grads)
        else:
            norms = [np.sum(np.abs(g.data.astype(np.float64)) ** p) ** (1.0 / p) for g in grads]
            total = float(np.sum(np.asarray(norms) ** p) ** (1.0 / p))
    total32 = np.float32(total)
    if error_if_nonfinite and not np.isfinite(total32):
        raise RuntimeError(f"The total norm of order {p} for gradients from `parameters` is "
                           "non-finite, so it cannot be clipped. To disable this error and "
                           "scale the gradients by the non-finite norm anyway, set "
                           "`error_if_nonfinite=False`")
    with np.errstate(invalid="ignore", divide="ignore"):
        coef = np.float32(max_norm) / (total32 + np.float32(1e-6))
    coef = np.float32(min(coef, np.float32(1.0))) if not np.isnan(coef) else coef
    for g in grads:
        _scale_in_place(g, coef)
    return Tensor(total32)


def clip_grad_value_(parameters: Any, clip_value: float, foreach: bool | None = None) -> None:
    """Clip every gradient entry to [-clip_value, clip_value] in place (then rounded to the
    gradient's format, as the bound need not be one of its values)."""
    clip_value = number("clip_grad_value_: clip_value", clip_value, lo=0.0)
    for g in _grads(parameters):
        np.clip(g.data, -clip_value, clip_value, out=g.data)
        round_array(g.data, g.fmt, out=g.data)  # clip_value itself may lie between fp16 values
