"""Normalization as compositions of nn's ops, in a chosen statistics format.

``moments`` and ``normalize`` cast their input to ``stats_fmt`` and do every step there: the
mean and the biased variance (each reduction summed in fp32, then rounded to ``stats_fmt``),
the centred values and their squares, ``(var + epsilon) ** -0.5``, the scale and shift. Under a
mixed policy the layers pass FP32 (as Keras computes normalization statistics in fp32); under
the pure "float16" policy they pass FP16, where a squared deviation above 256 overflows to inf
-- the failure that the fp32 rule avoids. Gradients follow from the ops (each rounded to the
format of the tensor it belongs to), so no hand-written backward is needed.
"""

from __future__ import annotations

from fpsim import Format
from nn.engine.tensor import Tensor
from nn.functions._common import autocast_inputs
from nn.functions.cast import cast
from nn.functions.reductions import mean

Axes = tuple[int, ...]


def moments(x: Tensor, axes: Axes, stats_fmt: Format | None) -> tuple[Tensor, Tensor]:
    """(mean, biased variance) of ``x`` over ``axes``, keepdims, in ``stats_fmt``."""
    xs = cast(x, stats_fmt)
    mu = cast(mean(xs, axis=axes, keepdims=True), stats_fmt)
    d = xs - mu
    return mu, cast(mean(d * d, axis=axes, keepdims=True), stats_fmt)


def normalize(x: Tensor, mu: Tensor, var: Tensor, gamma: Tensor | None, beta: Tensor | None,
              epsilon: float, stats_fmt: Format | None) -> Tensor:
    """``(x - mu) * (var + epsilon) ** -0.5 * gamma + beta``, every op in ``stats_fmt``."""
    xs = cast(x, stats_fmt)
    y = (xs - cast(mu, stats_fmt)) * (cast(var, stats_fmt) + epsilon) ** -0.5
    if gamma is not None:
        y = y * cast(gamma, stats_fmt)
    if beta is not None:
        y = y + cast(beta, stats_fmt)
    return y


def layer_norm(x: Tensor, gamma: Tensor | None, beta: Tensor | None, axes: Axes,
               epsilon: float, stats_fmt: Format | None) -> Tensor:
    """Normalize over ``axes`` with the statistics of each sample (LayerNormalization); in
    fp32 inside ``autocast("cuda")`` (PyTorch's CUDA list)."""
    (x,) = autocast_inputs("layer_norm", x)
    mu, var = moments(x, axes, stats_fmt)
    return normalize(x, mu, var, gamma, beta, epsilon, stats_fmt)
