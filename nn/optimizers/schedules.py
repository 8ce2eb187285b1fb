"""Keras 3's learning-rate schedules (keras/src/optimizers/schedules): a callable of the
optimizer's step, passed as ``learning_rate=``.

An optimizer holding a schedule reads ``schedule(iterations)`` at every update, ``iterations``
counting the updates applied before this one (0 for the first), as Keras 3's
``_get_current_learning_rate`` does; ``optimizer.learning_rate`` shows that value. Values are
computed in float32, as Keras computes them from a Python float.

- ``ExponentialDecay(initial_learning_rate, decay_steps, decay_rate, staircase=False)``:
  ``lr * decay_rate ** (step / decay_steps)`` (the exponent floored with ``staircase``);
- ``PiecewiseConstantDecay(boundaries, values)``: ``values[0]`` while ``step <= boundaries[0]``,
  ``values[i]`` for ``boundaries[i-1] < step <= boundaries[i]``, ``values[-1]`` after;
- ``CosineDecay(initial_learning_rate, decay_steps, alpha=0.0, warmup_target=None,
  warmup_steps=0)``: linear warmup from ``initial_learning_rate`` to ``warmup_target``, then
  ``lr * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) / decay_steps)) + alpha)``.

>>> s = ExponentialDecay(0.1, decay_steps=10, decay_rate=0.5)
>>> float(s(0)), float(s(10)), float(s(20))
(0.10000000149011612, 0.05000000074505806, 0.02500000037252903)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from nn.engine.checks import number
from nn.engine.registry import Registry


def _steps(cls: str, name: str, value: Any, minimum: int = 1) -> Any:
    if (isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating))
            or not math.isfinite(float(value)) or float(value) < minimum):
        raise ValueError(f"{cls}: {name} must be a number >= {minimum}, got {value!r}")
    return value  # (Keras keeps what it was given)


class LearningRateSchedule:
    """Keras 3's base: ``schedule(step)`` -> the learning rate; ``get_config``/``from_config``.
    A subclass implements ``__call__`` and ``get_config``."""

    def __call__(self, step: int) -> np.float32:
        raise NotImplementedError(f"{type(self).__name__} must override __call__(self, step)")

    def get_config(self) -> dict[str, Any]:
        raise NotImplementedError(f"{type(self).__name__} must override get_config(self)")

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> LearningRateSchedule:
        return cls(**config)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


class ExponentialDecay(LearningRateSchedule):
    """``initial_learning_rate * decay_rate ** (step / decay_steps)`` in float32 (module
    docstring)."""

    def __init__(self, initial_learning_rate: float, decay_steps: float, decay_rate: float,
                 staircase: bool = False, name: str = "ExponentialDecay") -> None:
        self.initial_learning_rate = number("ExponentialDecay: initial_learning_rate",
                                            initial_learning_rate, lo=0.0, hi=math.inf)
        self.decay_steps = _steps("ExponentialDecay", "decay_steps", decay_steps)
        self.decay_rate = number("ExponentialDecay: decay_rate", decay_rate, lo=0.0, hi=math.inf)
        if not isinstance(staircase, (bool, np.bool_)):
            raise TypeError(f"ExponentialDecay: staircase must be True or False, got "
                            f"{staircase!r}")
        self.staircase = bool(staircase)
        self.name = name

    def __call__(self, step: int) -> np.float32:
        f32 = np.float32
        p = f32(step) / f32(self.decay_steps)
        if self.staircase:
            p = np.floor(p)
        return f32(f32(self.initial_learning_rate) * np.power(f32(self.decay_rate), p))

    def get_config(self) -> dict[str, Any]:
        return {"initial_learning_rate": self.initial_learning_rate,
                "decay_steps": self.decay_steps, "decay_rate": self.decay_rate,
                "staircase": self.staircase, "name": self.name}


class PiecewiseConstantDecay(LearningRateSchedule):
    """One value per interval of steps, the intervals closed on the right (module docstring)."""

    def __init__(self, boundaries: Sequence[float], values: Sequence[float],
                 name: str = "PiecewiseConstant") -> None:
        boundaries, values = list(boundaries), list(values)
        if len(values) != len(boundaries) + 1 or not boundaries:
            raise ValueError(f"PiecewiseConstantDecay: values must have one more element than "
                             f"boundaries (at least one), got {len(boundaries)} boundaries and "
                             f"{len(values)} values")
        if any(b >= c for b, c in zip(boundaries, boundaries[1:], strict=False)):
            raise ValueError(f"PiecewiseConstantDecay: boundaries must increase strictly, got "
                             f"{boundaries}")
        self.boundaries = boundaries
        self.values = [number(f"PiecewiseConstantDecay: values[{i}]", v, lo=0.0, hi=math.inf)
                       for i, v in enumerate(values)]
        self.name = name

    def __call__(self, step: int) -> np.float32:
        i = int(np.searchsorted(np.asarray(self.boundaries, float), float(step), side="left"))
        return np.float32(self.values[i])

    def get_config(self) -> dict[str, Any]:
        return {"boundaries": self.boundaries, "values": self.values, "name": self.name}


class CosineDecay(LearningRateSchedule):
    """Optional linear warmup, then cosine decay to ``alpha`` times the peak (module
    docstring); float32 arithmetic."""

    def __init__(self, initial_learning_rate: float, decay_steps: float, alpha: float = 0.0,
                 name: str = "CosineDecay", warmup_target: float | None = None,
                 warmup_steps: float = 0) -> None:
        self.initial_learning_rate = number("CosineDecay: initial_learning_rate",
                                            initial_learning_rate, lo=0.0, hi=math.inf)
        self.decay_steps = _steps("CosineDecay", "decay_steps", decay_steps)
        self.alpha = number("CosineDecay: alpha", alpha, lo=0.0, hi=1.0)
        self.warmup_target = (None if warmup_target is None else
                              number("CosineDecay: warmup_target", warmup_target, lo=0.0,
                                     hi=math.inf))
        self.warmup_steps = _steps("CosineDecay", "warmup_steps", warmup_steps, minimum=0)
        self.name = name

    def _decay(self, step: np.float32, peak: np.float32) -> np.float32:
        f32 = np.float32
        fraction = step / f32(self.decay_steps)
        cosine = f32(0.5) * (f32(1.0) + np.cos(f32(math.pi) * fraction))
        return f32(peak * ((f32(1) - f32(self.alpha)) * cosine + f32(self.alpha)))

    def __call__(self, step: int) -> np.float32:
        f32 = np.float32
        s, lr0 = f32(step), f32(self.initial_learning_rate)
        if self.warmup_target is None:
            return self._decay(min(s, f32(self.decay_steps)), lr0)
        warm, target = f32(self.warmup_steps), f32(self.warmup_target)
        s = min(s, f32(self.decay_steps) + warm)
        if s < warm:
            return f32((target - lr0) * (s / warm) + lr0)
        return self._decay(f32(s - warm), target)

    def get_config(self) -> dict[str, Any]:
        return {"initial_learning_rate": self.initial_learning_rate,
                "decay_steps": self.decay_steps, "alpha": self.alpha, "name": self.name,
                "warmup_target": self.warmup_target, "warmup_steps": self.warmup_steps}


SCHEDULES = Registry("learning-rate schedule")  # Keras's {"class_name", "config"} layout
for _cls in (ExponentialDecay, PiecewiseConstantDecay, CosineDecay):
    SCHEDULES.register(_cls)
del _cls
serialize = SCHEDULES.serialize
deserialize = SCHEDULES.deserialize
