"""Keras-style layers under dtype policies: Layer, Dense, Activation, ReLU, Flatten, Dropout,
Sequential.

Every layer has a policy (``dtype=``: a Policy or policy name; default: the global policy when
the layer is created). Calling a layer casts its input to the policy's compute format (a Cast
op, so the gradient is cast back), creates the weights on the first call from the input's
shape, and reads each variable (stored in the variable format, e.g. fp32 master weights under
"mixed_float16") through a Cast into the compute format.

>>> with nn.policy_scope("mixed_float16"):
...     model = Sequential([Dense(64, activation="relu"), Dense(10),
...                         Activation("softmax", dtype="float32")])
>>> model(np.ones((2, 8), np.float32)).fmt.name   # the last layer computes in fp32
'float32'
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from nn import functions as F
from nn import sites
from nn.autograd import name_scope
from nn.model import Model
from nn.policy import Policy, as_policy, format_name
from nn.tensor import Tensor, Variable

# --- randomness and initializers ------------------------------------------------------------------

_RNG = [np.random.default_rng()]


def set_random_seed(seed: int | None) -> None:
    """Seed the generator that weight initializers and unseeded Dropout layers draw from."""
    _RNG[0] = np.random.default_rng(seed)


def _fans(shape: tuple[int, ...]) -> tuple[int, int]:
    if len(shape) < 2:
        return shape[0] if shape else 1, shape[0] if shape else 1
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


def _glorot_uniform(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    limit = math.sqrt(6.0 / sum(_fans(shape)))
    return rng.uniform(-limit, limit, shape)


def _glorot_normal(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    return rng.normal(0.0, math.sqrt(2.0 / sum(_fans(shape))), shape)


def _he_uniform(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    limit = math.sqrt(6.0 / _fans(shape)[0])
    return rng.uniform(-limit, limit, shape)


def _he_normal(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    return rng.normal(0.0, math.sqrt(2.0 / _fans(shape)[0]), shape)


INITIALIZERS: dict[str, Callable[[tuple[int, ...], np.random.Generator], np.ndarray]] = {
    "glorot_uniform": _glorot_uniform,
    "glorot_normal": _glorot_normal,
    "he_uniform": _he_uniform,
    "he_normal": _he_normal,
    "zeros": lambda shape, rng: np.zeros(shape),
    "ones": lambda shape, rng: np.ones(shape),
}


def get_initializer(init: str | Callable) -> Callable:
    """An initializer ``(shape, rng) -> array`` from a name in INITIALIZERS or a callable."""
    if callable(init):
        return init
    if isinstance(init, str) and init in INITIALIZERS:
        return INITIALIZERS[init]
    raise ValueError(f"unknown initializer {init!r}; known: {', '.join(sorted(INITIALIZERS))}")


# --- activations ----------------------------------------------------------------------------------

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu,
    "leaky_relu": F.leaky_relu,
    "sigmoid": F.sigmoid,
    "tanh": F.tanh,
    "gelu": F.gelu,
    "softmax": F.softmax,
    "log_softmax": F.log_softmax,
}


def get_activation(activation: str | Callable | None) -> Callable[[Tensor], Tensor] | None:
    """The activation function for a name ("linear"/None means none) or a callable."""
    if activation is None or activation == "linear":
        return None
    if callable(activation):
        return activation
    if isinstance(activation, str) and activation in ACTIVATIONS:
        return ACTIVATIONS[activation]
    raise ValueError(
        f"unknown activation {activation!r}; known: linear, {', '.join(sorted(ACTIVATIONS))}"
    )


# --- Layer ----------------------------------------------------------------------------------------

_NAME_COUNTS: dict[str, int] = {}


def _unique_name(base: str) -> str:
    n = _NAME_COUNTS.get(base, 0)
    _NAME_COUNTS[base] = n + 1
    return base if n == 0 else f"{base}_{n}"


class Layer:
    """Base layer: a name, a dtype policy, weights made on the first call, ``trainable_variables``.

    Subclasses implement ``build(input_shape)`` (create weights with ``add_weight``) and
    ``call(x, training)`` on a Tensor already in the compute format; ``check_input`` may reject
    shapes with a ValueError that names the layer and both shapes.
    """

    def __init__(
        self, name: str | None = None, dtype: Policy | str | None = None, trainable: bool = True
    ) -> None:
        base = re.sub(r"(?<!^)(?=[A-Z])", "_", type(self).__name__).lower()
        self.name = name if name is not None else _unique_name(base)
        self.policy = as_policy(dtype)
        self.trainable = trainable
        self.built = False
        self._weights: list[Variable] = []

    # --- formats ----------------------------------------------------------------------------------
    @property
    def dtype_policy(self) -> Policy:
        return self.policy

    @property
    def compute_format(self) -> Any:
        return self.policy.compute_format

    @property
    def variable_format(self) -> Any:
        return self.policy.variable_format

    # --- weights ----------------------------------------------------------------------------------
    def add_weight(
        self, name: str, shape: tuple[int, ...], initializer: str | Callable = "zeros",
        trainable: bool = True, rng: np.random.Generator | None = None,
    ) -> Variable:
        """A Variable in the variable format, initialised (in float64, then rounded once)."""
        values = np.asarray(get_initializer(initializer)(tuple(shape), rng or _RNG[0]), float)
        var = Variable(values, fmt=self.variable_format, name=f"{self.name}/{name}",
                       trainable=trainable and self.trainable)
        self._weights.append(var)
        return var

    @property
    def weights(self) -> list[Variable]:
        return list(self._weights)

    @property
    def variables(self) -> list[Variable]:
        return self.weights

    @property
    def trainable_variables(self) -> list[Variable]:
        return [v for v in self.weights if v.trainable] if self.trainable else []

    @property
    def non_trainable_variables(self) -> list[Variable]:
        trainable = {id(v) for v in self.trainable_variables}
        return [v for v in self.weights if id(v) not in trainable]

    def get_weights(self) -> list[np.ndarray]:
        return [v.numpy() for v in self.weights]

    def set_weights(self, weights: Iterable[Any]) -> None:
        weights = list(weights)
        if len(weights) != len(self.weights):
            raise ValueError(f"layer '{self.name}' has {len(self.weights)} weights, "
                             f"got {len(weights)} arrays")
        for var, value in zip(self.weights, weights, strict=True):
            var.assign(value)

    def read(self, var: Variable) -> Tensor:
        """``var`` in the compute format (a Cast; the variable itself if the formats agree)."""
        t = F.cast(var, self.compute_format)
        if t is not var:
            t.grad_site = sites.weight_grad(var.name) if var.name else None
        return t

    # --- calling ----------------------------------------------------------------------------------
    def build(self, input_shape: tuple[int, ...]) -> None:
        """Create the weights for inputs of ``input_shape`` (batch first)."""

    def check_input(self, x: Tensor) -> None:
        """Raise a ValueError naming the layer and both shapes if ``x`` does not fit."""

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        raise NotImplementedError

    def _as_input(self, x: Any) -> Tensor:
        if not isinstance(x, Tensor):
            arr = np.asarray(x)
            if arr.dtype.kind != "f":
                raise TypeError(
                    f"layer '{self.name}' expects floating-point input, got an array of dtype "
                    f"{arr.dtype}; convert it first, e.g. x.astype('float32')"
                )
            x = Tensor(arr)
        return F.cast(x, self.compute_format)

    def __call__(self, x: Any, training: bool = False) -> Tensor:
        """Cast ``x`` to the compute format, build on the first call, run ``call``."""
        x = self._as_input(x)
        if not self.built:
            if x.ndim < 1:
                raise ValueError(f"layer '{self.name}' needs batched input, got a scalar")
            self.build(x.shape)
            self.built = True
        self.check_input(x)
        with name_scope(self.name):
            y = self.call(x, training=training)
        if y is not x:
            y.grad_site = sites.activation_grad(self.name)
        return y

    # --- configuration (for checkpoints) ------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        """The constructor arguments as plain JSON-able values (Keras style)."""
        return {"name": self.name, "dtype": self.policy.name}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Layer:
        return cls(**config)

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} '{self.name}' policy={self.policy.name} "
                f"compute={format_name(self.compute_format)}>")


class Dense(Layer):
    """y = activation(x @ kernel + bias) on the last axis.

    Numerics: x, kernel and bias in the compute format; the products and the bias summed in
    fp32; one rounding to the compute format (relu fused into the same pass); any other
    activation is a separate op rounding again.
    """

    def __init__(
        self, units: int, activation: str | Callable | None = None, use_bias: bool = True,
        kernel_initializer: str | Callable = "glorot_uniform",
        bias_initializer: str | Callable = "zeros", dtype: Policy | str | None = None,
        name: str | None = None, seed: int | None = None,
    ) -> None:
        super().__init__(name=name, dtype=dtype)
        if isinstance(units, bool) or not isinstance(units, (int, np.integer)) or units < 1:
            raise ValueError(f"Dense units must be a positive integer, got {units!r}")
        self.units = int(units)
        self.activation_name = activation
        self.activation = get_activation(activation)
        self.use_bias = use_bias
        self.kernel_initializer = get_initializer(kernel_initializer)
        self.bias_initializer = get_initializer(bias_initializer)
        self.seed = seed
        self._rng = np.random.default_rng(seed) if seed is not None else None
        self.kernel: Variable | None = None
        self.bias: Variable | None = None

    def build(self, input_shape: tuple[int, ...]) -> None:
        if len(input_shape) < 2:
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
        lead = x.shape[:-1]
        x2 = x if x.ndim == 2 else F.reshape(x, (-1, self.input_dim))
        fused = "relu" if self.activation is F.relu else None
        b = self.read(self.bias) if self.bias is not None else None
        y = F.linear(x2, self.read(self.kernel), b, activation=fused)
        if self.activation is not None and fused is None:
            y = self.activation(y)
        return y if x.ndim == 2 else F.reshape(y, (*lead, self.units))

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "units": self.units,
                "activation": _config_name(self.activation_name), "use_bias": self.use_bias,
                "seed": self.seed}


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
        return {**super().get_config(), "activation": _config_name(self.activation_name)}


class ReLU(Layer):
    """max(x, 0), or leaky with ``negative_slope``: x if x > 0 else negative_slope * x."""

    def __init__(self, negative_slope: float = 0.0, dtype: Policy | str | None = None,
                 name: str | None = None) -> None:
        super().__init__(name=name, dtype=dtype)
        if negative_slope < 0:
            raise ValueError(f"negative_slope must be >= 0, got {negative_slope}")
        self.negative_slope = float(negative_slope)

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        if self.negative_slope == 0:
            return F.relu(x)
        return F.leaky_relu(x, self.negative_slope)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "negative_slope": self.negative_slope}


class Flatten(Layer):
    """(batch, d1, d2, ...) -> (batch, d1 * d2 * ...)."""

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        if x.ndim < 2:
            raise ValueError(f"layer '{self.name}' expects batched input of at least 2 "
                             f"dimensions, got shape {x.shape}")
        return F.reshape(x, (x.shape[0], -1))


class Dropout(Layer):
    """During training, zero inputs with probability ``rate`` and scale the rest by 1/(1-rate)."""

    def __init__(self, rate: float, seed: int | None = None, dtype: Policy | str | None = None,
                 name: str | None = None) -> None:
        super().__init__(name=name, dtype=dtype)
        if not 0 <= rate < 1:
            raise ValueError(f"Dropout rate must be in [0, 1), got {rate}")
        self.rate = float(rate)
        self.seed = seed
        self._rng = np.random.default_rng(seed) if seed is not None else None

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        return F.dropout(x, self.rate, rng=self._rng or _RNG[0], training=training)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}


class Sequential(Layer, Model):
    """Layers applied in order. Each layer casts to its own compute format; no cast here.

    A ``Model``: ``compile``, ``fit``, ``evaluate``, ``predict``, ``summary``, ``save``.
    """

    def __init__(self, layers: Iterable[Layer] | None = None, name: str | None = None) -> None:
        super().__init__(name=name)
        self.layers: list[Layer] = []
        for layer in layers or []:
            self.add(layer)

    def add(self, layer: Layer) -> None:
        if not isinstance(layer, Layer):
            raise TypeError(f"Sequential takes Layer instances, got {layer!r}")
        self.layers.append(layer)

    @property
    def weights(self) -> list[Variable]:
        seen: dict[int, Variable] = {}
        for layer in self.layers:
            for v in layer.weights:
                seen.setdefault(id(v), v)
        return list(seen.values())

    @property
    def trainable_variables(self) -> list[Variable]:
        seen: dict[int, Variable] = {}
        for layer in self.layers:
            for v in layer.trainable_variables:
                seen.setdefault(id(v), v)
        return list(seen.values()) if self.trainable else []

    def _as_input(self, x: Any) -> Tensor:
        if isinstance(x, Tensor):
            return x
        arr = np.asarray(x)
        if arr.dtype.kind != "f":
            first = self.layers[0].name if self.layers else self.name
            raise TypeError(
                f"layer '{first}' expects floating-point input, got an array of dtype "
                f"{arr.dtype}; convert it first, e.g. x.astype('float32')"
            )
        return Tensor(arr)

    def __call__(self, x: Any, training: bool = False) -> Tensor:
        if not self.layers:
            raise ValueError(f"Sequential model '{self.name}' has no layers")
        x = self._as_input(x)
        for layer in self.layers:
            x = layer(x, training=training)
        self.built = True
        return x

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "layers": [serialize(layer) for layer in self.layers]}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Sequential:
        return cls([deserialize(c) for c in config["layers"]], name=config.get("name"))


def _config_name(activation: Any) -> str | None:
    if activation is None or isinstance(activation, str):
        return activation
    raise ValueError(f"cannot serialize the custom activation {activation!r}; use a name from "
                     f"{', '.join(sorted(ACTIVATIONS))}")


def serialize(layer: Layer) -> dict[str, Any]:
    """``{"class_name": ..., "config": ...}`` for a layer (weights are saved separately)."""
    return {"class_name": type(layer).__name__, "config": layer.get_config()}


def deserialize(config: dict[str, Any]) -> Layer:
    """A new, unbuilt layer from ``serialize``'s output."""
    classes = {c.__name__: c for c in (Dense, Activation, ReLU, Flatten, Dropout, Sequential)}
    name = config.get("class_name") if isinstance(config, dict) else None
    if name not in classes:
        raise ValueError(f"unknown layer class {name!r}; known: {', '.join(sorted(classes))}")
    return classes[name].from_config(dict(config.get("config", {})))
