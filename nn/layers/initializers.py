"""Where layers get their numbers: weight initializers and activations, found by name; the
random generator they draw from is ``nn.engine.random``'s (``set_random_seed`` is re-exported
here for ``nn.layers.set_random_seed``)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from nn import functions as F
from nn.engine.random import (  # noqa: F401 (re-exported)
    global_generator,
    global_seed,
    restoring,
    set_random_seed,
    spawn_generator,
)
from nn.engine.registry import ACTIVATIONS
from nn.engine.tensor import Tensor

Initializer = Callable[[tuple[int, ...], np.random.Generator], np.ndarray]

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


INITIALIZERS: dict[str, Initializer] = {
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


for _name, _fn in (("relu", F.relu), ("leaky_relu", F.leaky_relu), ("sigmoid", F.sigmoid),
                   ("tanh", F.tanh), ("gelu", F.gelu), ("softmax", F.softmax),
                   ("log_softmax", F.log_softmax)):
    ACTIVATIONS.register(_fn, name=_name)


def get_activation(activation: str | Callable | None) -> Callable[[Tensor], Tensor] | None:
    """The activation function for a registered name ("linear"/None means none) or a callable."""
    if activation is None or activation == "linear":
        return None
    if callable(activation):
        return activation
    if isinstance(activation, str) and activation in ACTIVATIONS.classes():
        fn: Callable[[Tensor], Tensor] = ACTIVATIONS.get(activation)
        return fn
    raise ValueError(
        f"unknown activation {activation!r}; known: linear, {', '.join(ACTIVATIONS.names())}"
    )


def activation_name(activation: str | Callable | None) -> str | None:
    """The name a layer's config stores for ``activation`` (registered functions by name)."""
    if activation is None or isinstance(activation, str):
        return activation
    for name, fn in ACTIVATIONS.classes().items():
        if fn is activation:
            return name
    raise ValueError(f"cannot serialize the custom activation {activation!r}; use a name from "
                     f"{', '.join(ACTIVATIONS.names())} or register it with "
                     "nn.engine.registry.ACTIVATIONS.register(fn, name=...)")
