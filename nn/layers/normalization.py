"""Normalization layers: ``BatchNormalization``, ``LayerNormalization`` (Keras face) and
``LayerNorm`` (PyTorch face).

Precision: the statistics and the normalization run in the layer's *variable* format -- FP32
under "float32" and every mixed policy (Keras's rule: normalization is computed in fp32 under
mixed precision), FP16 under the pure "float16" policy or a per-layer ``dtype="float16"``, so
the overflow of fp16 statistics can be shown (nn.functions.norm); the output is rounded once
more, to the compute format. ``statistics_dtype="float16"`` (LayerNormalization and
BatchNormalization; the rule is ``nn.layers.statistics``) puts only the statistics and the
normalization in that format and keeps the layer's variables (gamma, beta, the moving
statistics) in the policy's variable format; BatchNormalization's moving statistics are
then updated from the fp16 batch statistics (an infinite batch variance makes the moving
variance infinite, as it would in a framework whose statistics overflowed).
Keras 3's BatchNormalization always opts out to fp32; nn keeps
the fp16 path for the pure fp16 policy on purpose, to demonstrate the failure.

BatchNormalization follows Keras 3's source: training normalizes with the batch mean and the
*biased* batch variance and updates ``moving = moving * momentum + batch * (1 - momentum)``
(computed in float64, rounded once to the variable format); inference (``training=False``)
uses the moving statistics. Weights: ``[gamma, beta, moving_mean, moving_variance]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nn import functions as F
from nn.engine import checks, sites
from nn.engine.autograd import no_grad
from nn.engine.tensor import Tensor, Variable
from nn.functions.norm import layer_norm, moments, normalize
from nn.layers.base import Layer, register
from nn.layers.initializers import get_initializer
from nn.layers.statistics import StatisticsFormat
from nn.precision.policy import Policy


def _flag(layer: str, name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{layer}: {name} must be True or False, got {value!r}")
    return bool(value)


class _Normalization(StatisticsFormat, Layer):
    """Shared parts: ``epsilon``, ``center``/``scale`` and reading weights in the stats format."""

    def __init__(self, epsilon: float, center: bool, scale: bool,
                 beta_initializer: Any, gamma_initializer: Any,
                 dtype: Policy | str | None, name: str | None) -> None:
        super().__init__(name=name, dtype=dtype)
        cls = type(self).__name__
        self.epsilon = checks.number(f"{cls}: epsilon", epsilon, lo=0.0, lo_open=True)
        self.center = _flag(cls, "center", center)
        self.scale = _flag(cls, "scale", scale)
        self.beta_initializer = get_initializer(beta_initializer)
        self.gamma_initializer = get_initializer(gamma_initializer)
        self.gamma: Variable | None = None
        self.beta: Variable | None = None

    def read_stats(self, var: Variable | None) -> Tensor | None:
        """``var`` in the statistics format, its gradient tagged like ``Layer.read``'s."""
        if var is None:
            return None
        t = F.cast(var, self.stats_format)
        if t is not var:
            t.grad_site = sites.weight_grad(var.name) if var.name else None
        return t

    # the weights' names (Keras's; the PyTorch face's LayerNorm names them torch's way)
    SCALE_NAME, CENTER_NAME = "gamma", "beta"

    def add_scale_center(self, shape: tuple[int, ...]) -> None:
        if self.scale:
            self.gamma = self.add_weight(self.SCALE_NAME, shape, self.gamma_initializer)
        if self.center:
            self.beta = self.add_weight(self.CENTER_NAME, shape, self.beta_initializer)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "epsilon": self.epsilon, "center": self.center,
                "scale": self.scale, **self.statistics_config()}


@register
class BatchNormalization(_Normalization):
    """Normalize each channel (the last axis) with batch statistics while training and moving
    statistics at inference (Keras 3 semantics; see the module docstring)."""

    def __init__(self, axis: int = -1, momentum: float = 0.99, epsilon: float = 1e-3,
                 center: bool = True, scale: bool = True,
                 beta_initializer: Any = "zeros", gamma_initializer: Any = "ones",
                 moving_mean_initializer: Any = "zeros",
                 moving_variance_initializer: Any = "ones",
                 dtype: Policy | str | None = None, name: str | None = None,
                 statistics_dtype: str | None = None) -> None:
        super().__init__(epsilon, center, scale, beta_initializer, gamma_initializer, dtype,
                         name)
        self.set_statistics_dtype(statistics_dtype)
        if axis != -1:
            raise ValueError(f"BatchNormalization: axis={axis!r} is not supported; nn normalizes "
                             "the channels-last axis, axis=-1")
        self.momentum = checks.number("BatchNormalization: momentum", momentum, lo=0.0, hi=1.0)
        self.moving_mean_initializer = get_initializer(moving_mean_initializer)
        self.moving_variance_initializer = get_initializer(moving_variance_initializer)
        self.moving_mean: Variable | None = None
        self.moving_variance: Variable | None = None

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        if len(input_shape) < 2 or input_shape[-1] is None:
            raise ValueError(f"layer '{self.name}' expects input of shape (batch, ..., channels), "
                             f"got shape {input_shape}")
        self.channels = int(input_shape[-1])
        shape = (self.channels,)
        self.add_scale_center(shape)
        self.moving_mean = self.add_weight("moving_mean", shape, self.moving_mean_initializer,
                                           trainable=False)
        self.moving_variance = self.add_weight("moving_variance", shape,
                                               self.moving_variance_initializer, trainable=False)

    def check_input(self, x: Tensor) -> None:
        if x.ndim < 2 or x.shape[-1] != self.channels:
            raise ValueError(f"layer '{self.name}' expects input of shape (batch, ..., "
                             f"{self.channels}), got shape {x.shape}")

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        assert self.moving_mean is not None and self.moving_variance is not None
        fmt = self.stats_format
        if training:
            mu, var = moments(x, tuple(range(x.ndim - 1)), fmt)
            self._update_moving(mu.data.reshape(-1), var.data.reshape(-1))
        else:
            mu, var = F.cast(self.moving_mean, fmt), F.cast(self.moving_variance, fmt)
        y = normalize(x, mu, var, self.read_stats(self.gamma), self.read_stats(self.beta),
                      self.epsilon, fmt)
        return F.cast(y, self.compute_format)

    def _update_moving(self, mean: np.ndarray, var: np.ndarray) -> None:
        assert self.moving_mean is not None and self.moving_variance is not None
        m = self.momentum
        with no_grad():
            for moving, batch in ((self.moving_mean, mean), (self.moving_variance, var)):
                moving.assign(moving.data.astype(np.float64) * m
                              + batch.astype(np.float64) * (1.0 - m))

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "axis": -1, "momentum": self.momentum}


def _trailing_axes(layer: str, axis: Any) -> tuple[int, ...]:
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    if not axes or not all(isinstance(a, (int, np.integer)) and not isinstance(a, bool)
                           for a in axes):
        raise ValueError(f"{layer}: axis must be an int or a tuple of ints, got {axis!r}")
    neg = sorted(int(a) for a in axes)
    if any(a >= 0 for a in neg) or neg != list(range(-len(neg), 0)):
        raise ValueError(f"{layer}: axis={axis!r} is not supported; nn normalizes trailing axes "
                         "given as negative numbers, e.g. axis=-1 or axis=(-2, -1)")
    return tuple(neg)


@register
class LayerNormalization(_Normalization):
    """Normalize each sample over ``axis`` (default the last) with its own mean and biased
    variance, then scale by ``gamma`` and shift by ``beta`` (shaped like those axes)."""

    def __init__(self, axis: int | Sequence[int] = -1, epsilon: float = 1e-3,
                 center: bool = True, scale: bool = True,
                 beta_initializer: Any = "zeros", gamma_initializer: Any = "ones",
                 dtype: Policy | str | None = None, name: str | None = None,
                 statistics_dtype: str | None = None) -> None:
        super().__init__(epsilon, center, scale, beta_initializer, gamma_initializer, dtype,
                         name)
        self.axis = _trailing_axes(type(self).__name__, axis)
        self.set_statistics_dtype(statistics_dtype)

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        k = len(self.axis)
        if len(input_shape) <= k or any(d is None for d in input_shape[-k:]):
            raise ValueError(f"layer '{self.name}' normalizes axes {self.axis} and needs input "
                             f"with a batch axis before them, got shape {input_shape}")
        self.normalized_shape = tuple(int(d) for d in input_shape[-k:])  # type: ignore[arg-type]
        self.add_scale_center(self.normalized_shape)

    def check_input(self, x: Tensor) -> None:
        k = len(self.axis)
        if x.ndim <= k or x.shape[-k:] != self.normalized_shape:
            raise ValueError(f"layer '{self.name}' expects input of shape (batch, ..., "
                             f"{', '.join(map(str, self.normalized_shape))}), got shape {x.shape}")

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        y = layer_norm(x, self.read_stats(self.gamma), self.read_stats(self.beta),
                       tuple(range(x.ndim - len(self.axis), x.ndim)), self.epsilon,
                       self.stats_format)
        return F.cast(y, self.compute_format)

    def get_config(self) -> dict[str, Any]:
        axis: Any = self.axis[0] if len(self.axis) == 1 else list(self.axis)
        return {**super().get_config(), "axis": axis}


@register
class LayerNorm(LayerNormalization):
    """PyTorch face: ``LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True)`` over the
    trailing ``normalized_shape`` axes; a thin wrapper over LayerNormalization. As torch's, its
    weights exist at construction and are named ``weight`` and ``bias`` (None without
    ``elementwise_affine``), so a torch ``state_dict`` loads as it is."""

    SCALE_NAME, CENTER_NAME = "weight", "bias"

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5,
                 elementwise_affine: bool = True, dtype: Policy | str | None = None,
                 name: str | None = None) -> None:
        shape = ((normalized_shape,) if isinstance(normalized_shape, (int, np.integer))
                 else tuple(normalized_shape))
        dims = [checks.count("LayerNorm: normalized_shape", d, minimum=1) for d in shape]
        if not dims:
            raise ValueError("LayerNorm: normalized_shape must not be empty")
        affine = _flag("LayerNorm", "elementwise_affine", elementwise_affine)
        super().__init__(axis=tuple(range(-len(dims), 0)), epsilon=eps, center=affine,
                         scale=affine, dtype=dtype, name=name)
        self.expected_shape = tuple(dims)
        self._build_once((None, *dims))

    @property
    def weight(self) -> Variable | None:
        """torch's name of the scale (LayerNormalization's ``gamma``)."""
        return self.gamma

    @property
    def bias(self) -> Variable | None:
        """torch's name of the shift (LayerNormalization's ``beta``)."""
        return self.beta

    def check_input(self, x: Tensor) -> None:
        k = len(self.expected_shape)  # (torch's "*" may be empty: no batch axis needed)
        if x.ndim < k or x.shape[-k:] != self.expected_shape:
            raise ValueError(f"layer '{self.name}' (LayerNorm) was made for normalized_shape "
                             f"{self.expected_shape}: expected input of shape (*, "
                             f"{', '.join(map(str, self.expected_shape))}), got {x.shape}")

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        super().build(input_shape)
        if self.normalized_shape != self.expected_shape:
            raise ValueError(f"layer '{self.name}' was made for normalized_shape "
                             f"{self.expected_shape}, got input of shape {input_shape}")

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.policy.name,
                "normalized_shape": list(self.expected_shape), "eps": self.epsilon,
                "elementwise_affine": self.center}
