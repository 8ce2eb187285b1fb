"""Where layers get their numbers: the random generator, weight initializers and activations.

``set_random_seed`` seeds the generator that initializers draw from and that unseeded Dropout
layers spawn their own generators from. Initializers and activations are found by name.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Iterator

import numpy as np

from nn import functions as F
from nn.registry import ACTIVATIONS
from nn.tensor import Tensor

Initializer = Callable[[tuple[int, ...], np.random.Generator], np.ndarray]

_RNG = [np.random.default_rng()]
# while a checkpoint is being restored, layers build from this throwaway generator instead
_RESTORING: contextvars.ContextVar[bool] = contextvars.ContextVar("nn_restoring", default=False)


def set_random_seed(seed: int | None) -> None:
    """Seed the generator that weight initializers and unseeded Dropout layers draw from."""
    _RNG[0] = np.random.default_rng(seed)


def global_seed() -> int:
    """The seed the global generator was made from (``set_random_seed``'s, or the entropy numpy
    drew for it); drawing nothing, so it stays the same until the next ``set_random_seed``."""
    bits = _RNG[0].bit_generator
    seed_seq = getattr(bits, "seed_seq", None) or getattr(bits, "_seed_seq")  # noqa: B009
    return int(seed_seq.entropy)


def global_generator() -> np.random.Generator:
    """The generator initializers draw from (a throwaway one while a checkpoint loads)."""
    return np.random.default_rng(0) if _RESTORING.get() else _RNG[0]


def spawn_generator() -> np.random.Generator:
    """A new independent generator derived from the global one without drawing from it (so
    weight initialization is unchanged); a throwaway one while a checkpoint loads."""
    if _RESTORING.get():
        return np.random.default_rng(0)
    bits = _RNG[0].bit_generator
    # numpy >= 1.25 names it seed_seq, older versions _seed_seq
    seed_seq = getattr(bits, "seed_seq", None) or getattr(bits, "_seed_seq")  # noqa: B009
    return np.random.default_rng(seed_seq.spawn(1)[0])


@contextlib.contextmanager
def restoring() -> Iterator[None]:
    """Inside: building layers draws nothing from the global generator (their values are about
    to be overwritten from a checkpoint)."""
    token = _RESTORING.set(True)
    try:
        yield
    finally:
        _RESTORING.reset(token)


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
                     "nn.registry.ACTIVATIONS.register(fn, name=...)")
