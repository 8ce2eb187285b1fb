"""Progress of an experiment as it trains: one bar per variant (tqdm: steps done, rate and
time left), shown when the experiment function was called with ``progress=True``.

An experiment function wraps its body in ``showing(progress)``; the training functions
(``nn.experiments.lm.train_lm``, ``nn.experiments.cnn.train_cnn``) open a ``variant_bar``
per run, which ticks once per training step. The bar counts training steps only: the
held-out evaluation after the last step is not in its estimate. ``showing(False)`` leaves a
bar that an enclosing call switched on (an experiment that calls another keeps its bars).

Example::

    from nn.experiments import fp32_statistics
    result = fp32_statistics(progress=True)   # a bar per variant while it trains
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar

import numpy as np

_SHOWN: ContextVar[bool] = ContextVar("nn_experiment_progress", default=False)


@contextlib.contextmanager
def showing(progress: bool) -> Iterator[None]:
    """Show a bar per variant trained inside this block when ``progress`` is True."""
    if not isinstance(progress, (bool, np.bool_)):
        raise TypeError(f"progress must be True or False, got {progress!r}")
    if not progress:
        yield
        return
    token = _SHOWN.set(True)
    try:
        yield
    finally:
        _SHOWN.reset(token)


def shown() -> bool:
    """Whether bars are on here (inside ``showing(True)``)."""
    return _SHOWN.get()


@contextlib.contextmanager
def variant_bar(label: str, steps: int, unit: str = "step") -> Iterator[Callable[[], None]]:
    """A bar for the run ``label`` of ``steps`` steps; yields the function that ticks it once
    (a no-op when bars are off)."""
    if not shown():
        yield lambda: None
        return
    from tqdm.auto import tqdm

    with tqdm(total=steps, desc=label, unit=unit, leave=True) as bar:
        yield lambda: bar.update(1)


class TickingBatches:
    """A re-iterable dataset of ``(x, y)`` batches for ``Model.fit``: the rows of ``x`` and
    ``y`` in order, ``batch_size`` at a time (the batches ``fit(x, y, batch_size,
    shuffle=False)`` makes), calling ``tick`` as each batch is handed out after the first and
    once at the end (so each call follows a finished step)."""

    def __init__(self, x: np.ndarray, y: np.ndarray, batch_size: int,
                 tick: Callable[[], Any]) -> None:
        self.x, self.y, self.batch_size, self.tick = x, y, batch_size, tick

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for i in range(0, len(self.x), self.batch_size):
            if i:
                self.tick()
            yield self.x[i:i + self.batch_size], self.y[i:i + self.batch_size]
        self.tick()


P = ParamSpec("P")
R = TypeVar("R")


def option(fn: Callable[P, R]) -> Callable[P, R]:
    """Give an experiment function its ``progress`` keyword (declared in its signature as
    ``*, progress: bool = False``): the call runs inside ``showing(progress)``."""

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with showing(kwargs.get("progress", False)):  # type: ignore[arg-type]
            return fn(*args, **kwargs)

    return run
