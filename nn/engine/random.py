"""The global random generator: ``set_random_seed`` seeds it; weight initializers draw from it
and unseeded Dropout layers and shuffling datasets spawn their own generators from it.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import numpy as np

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
