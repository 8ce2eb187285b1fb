"""The core layers: Dense, Linear (PyTorch's), Activation, ReLU, Flatten, Dropout.

Every constructor argument is validated; an error names the layer class, the argument, the value
and what is allowed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from nn import functions as F
from nn.engine import checks
from nn.engine.random import spawn_generator
from nn.engine.tensor import Tensor, Variable
from nn.functions.accumulate import accumulated_linear, accumulator_format, accumulator_name
from nn.layers.base import Layer, register
from nn.layers.initializers import activation_name, get_activation, get_initializer
from nn.precision.policy import Policy


@register
class Dense(Layer):
    """y = activation(x @ kernel + bias) on the last axis.

    Numerics: x, kernel and bias in the compute format; the products and the bias summed in
    fp32; one rounding to the compute format (relu fused into the same pass); any other
    activation is a separate op rounding again. ``accumulator="float16"`` (any format name; not
    a Keras argument) adds the products in that format instead, left to right, forward and
    backward (``nn.functions.accumulate.accumulated_linear``), to show what a narrow
    accumulator does; None (the default) or "float32" is the fp32 path. An accumulator model
    of ``fpsim.accumulators`` or a preset name (``"hopper_fp8_promote128"``) adds them as that
    model of hardware does.
    """

    def __init__(
        self, units: int, activation: str | Callable | None = None, use_bias: bool = True,
        kernel_initializer: str | Callable = "glorot_uniform",
        bias_initializer: str | Callable = "zeros", dtype: Policy | str | None = None,
        name: str | None = None, seed: int | None = None, accumulator: str | None = None,
    ) -> None:
        super().__init__(name=name, dtype=dtype)
        self.accumulator = accumulator_format(accumulator, "Dense: accumulator")
        if isinstance(units, bool) or not isinstance(units, (int, np.integer)) or units < 1:
            raise ValueError(f"Dense units must be a positive integer, got {units!r}")
        if not isinstance(use_bias, (bool, np.bool_)):
            raise TypeError(f"Dense: use_bias must be True or False, got {use_bias!r}")
        self.units = int(units)
        self.activation_name = activation
        self.activation = get_activation(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = get_initializer(kernel_initializer)
        self.bias_initializer = get_initializer(bias_initializer)
        self.seed = checks.seed("Dense: seed", seed)
        self._rng = np.random.default_rng(seed) if seed is not None else None
        self.kernel: Variable | None = None
        self.bias: Variable | None = None

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        if len(input_shape) < 2 or input_shape[-1] is None:
            raise ValueError(f"layer '{self.name}' expects input of shape (batch, features), "
                             f"got shape {input_shape}")
        self.input_dim = int(input_shape[-1])
        self.kernel = self.add_weight("kernel", (self.input_dim, self.units),
                                      self.kernel_initializer, rng=self._rng)
        if self.use_bias:
            self.bias = self.add_weight("bias", (self.units,), self.bias_initializer, rng=self._rng)

    def check_input(self, x: Tensor) -> None:
        if x.ndim < 2 or x.shape[-1] != self.input_dim:
            raise ValueError(
                f"layer '{self.name}' expects input of shape (batch, {self.input_dim}), got "
                f"shape {x.shape}"
            )

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        assert self.kernel is not None  # built by __call__
        lead = x.shape[:-1]
        x2 = x if x.ndim == 2 else F.reshape(x, (-1, self.input_dim))
        fused = "relu" if self.activation is F.relu else None
        b = self.read(self.bias) if self.bias is not None else None
        if self.accumulator is None:
            y = F.linear(x2, self.read(self.kernel), b, activation=fused)
        else:
            y = accumulated_linear(x2, self.read(self.kernel), b, self.accumulator, fused)
        if self.activation is not None and fused is None:
            y = self.activation(y)
        return y if x.ndim == 2 else F.reshape(y, (*lead, self.units))

    def get_config(self) -> dict[str, Any]:
        config = {**super().get_config(), "units": self.units,
                  "activation": activation_name(self.activation_name), "use_bias": self.use_bias,
                  "seed": self.seed}
        if self.accumulator is not None:  # only when set: Keras's Dense has no such argument
            config["accumulator"] = accumulator_name(self.accumulator, "Dense: accumulator")
        return config


def _uniform_fan_in(fan_in: int) -> Callable[[tuple[int, ...], np.random.Generator], np.ndarray]:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's Linear init (kaiming_uniform with a=sqrt(5)
    for the weight, the same bound for the bias)."""
    bound = 1.0 / math.sqrt(fan_in)
    return lambda shape, rng: rng.uniform(-bound, bound, shape)


@register
class Linear(Layer):
    """PyTorch's ``nn.Linear``: y = x @ weight.T + bias, weights made at construction.

    ``weight`` has shape (out_features, in_features), ``bias`` (out_features,), both drawn from
    U(-1/sqrt(in_features), 1/sqrt(in_features)) as PyTorch initializes them (from ``seed``'s
    generator, or the global one: ``nn.set_random_seed``). Input: (*, in_features).

    Numerics as ``Dense``: x, weight and bias in the compute format of the layer's policy
    (``dtype=``; inside ``nn.autocast``, the autocast format), products and bias summed in
    fp32, one rounding to the output format.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 dtype: Policy | str | None = None, name: str | None = None,
                 seed: int | None = None) -> None:
        super().__init__(name=name, dtype=dtype)
        for arg, value in (("in_features", in_features), ("out_features", out_features)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"Linear: {arg} must be a positive integer, got {value!r}")
        if not isinstance(bias, (bool, np.bool_)):
            raise TypeError(f"Linear: bias must be True or False, got {bias!r}")
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.seed = checks.seed("Linear: seed", seed)
        rng = np.random.default_rng(seed) if seed is not None else None
        init = _uniform_fan_in(self.in_features)
        self.weight: Variable = self.add_weight("weight", (self.out_features, self.in_features),
                                                init, rng=rng)
        self.bias: Variable | None = (self.add_weight("bias", (self.out_features,), init, rng=rng)
                                      if bias else None)
        self._build_once((None, self.in_features))

    def check_input(self, x: Tensor) -> None:
        if x.ndim < 1 or x.shape[-1] != self.in_features:
            raise ValueError(f"layer '{self.name}' (Linear) expects input of shape "
                             f"(*, in_features={self.in_features}), got shape {x.shape}")

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        lead = x.shape[:-1]
        x2 = x if x.ndim == 2 else F.reshape(x, (-1, self.in_features))
        b = self.read(self.bias) if self.bias is not None else None
        y = F.linear(x2, F.transpose(self.read(self.weight), None), b)
        return y if x.ndim == 2 else F.reshape(y, (*lead, self.out_features))

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "in_features": self.in_features,
                "out_features": self.out_features, "bias": self.bias is not None,
                "seed": self.seed}



@register
class Activation(Layer):
    """An activation as a layer: ``Activation("softmax", dtype="float32")`` computes in fp32."""

    def __init__(self, activation: str | Callable, dtype: Policy | str | None = None,
                 name: str | None = None) -> None:
        super().__init__(name=name, dtype=dtype)
        if activation is None:
            raise ValueError("Activation needs an activation name or callable, got None")
        self.activation_name = activation
        self.activation = get_activation(activation)

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        return x if self.activation is None else self.activation(x)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "activation": activation_name(self.activation_name)}


@register
class ReLU(Layer):
    """max(x, 0), or leaky with ``negative_slope``: x if x > 0 else negative_slope * x.

    ``negative_slope`` must be a finite number >= 0 (NaN, inf and negative values raise).
    """

    def __init__(self, negative_slope: float = 0.0, dtype: Policy | str | None = None,
                 name: str | None = None) -> None:
        super().__init__(name=name, dtype=dtype)
        self.negative_slope = checks.number("ReLU: negative_slope", negative_slope, lo=0.0)

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        if self.negative_slope == 0:
            return F.relu(x)
        return F.leaky_relu(x, self.negative_slope)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "negative_slope": self.negative_slope}


@register
class Flatten(Layer):
    """(batch, d1, d2, ...) -> (batch, d1 * d2 * ...)."""

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        if x.ndim < 2:
            raise ValueError(f"layer '{self.name}' expects batched input of at least 2 "
                             f"dimensions, got shape {x.shape}")
        return F.reshape(x, (x.shape[0], -1))


@register
class Dropout(Layer):
    """During training, zero inputs with probability ``rate`` and scale the rest by 1/(1-rate).

    Masks come from the layer's own generator: ``seed``'s, or (``seed=None``) one spawned from
    the global generator (``nn.set_random_seed``) when the layer is made, without drawing from
    it. Its state is checkpointed (``state()``), so a resumed run draws the same masks.
    """

    def __init__(self, rate: float, seed: int | None = None, dtype: Policy | str | None = None,
                 name: str | None = None) -> None:
        super().__init__(name=name, dtype=dtype)
        self.rate = checks.number("Dropout: rate", rate, lo=0.0, hi=1.0, hi_open=True)
        self.seed = checks.seed("Dropout: seed", seed)
        self._rng = np.random.default_rng(seed) if seed is not None else spawn_generator()

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        return F.dropout(x, self.rate, rng=self._rng, training=training)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}

    def state(self) -> dict[str, Any] | None:
        return {"rng": self._rng.bit_generator.state}

    def set_state(self, state: dict[str, Any]) -> None:
        rng = state.get("rng") if isinstance(state, dict) else None
        expected = type(self._rng.bit_generator).__name__
        if not isinstance(rng, dict) or rng.get("bit_generator") != expected:
            raise ValueError(f"layer '{self.name}': state['rng'] must be a {expected} "
                             f"bit_generator state, got {rng!r:.80}")
        self._rng.bit_generator.state = rng


