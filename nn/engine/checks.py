"""Argument checks shared across nn: one rule each, one message each.

>>> count("epochs", 3, minimum=1)
3
"""

from __future__ import annotations

import math

import numpy as np


def count(name: str, value: object, *, minimum: int = 0) -> int:
    """``value`` as an int if it is an integer (not a bool) of at least ``minimum``, else a
    ValueError naming ``name``, the value and what is allowed."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= minimum:
        return int(value)
    raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def number(name: str, value: object, *, lo: float = -math.inf, hi: float = math.inf,
           lo_open: bool = False, hi_open: bool = False) -> float:
    """``value`` as a float if it is a finite real number (not a bool) in the interval, else a
    ValueError naming ``name``, the value and the allowed interval."""
    if (isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
            and math.isfinite(v := float(value))):
        if (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi):
            return v
    interval = f"{'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
    raise ValueError(f"{name} must be a finite number in {interval}, got {value!r}")


def seed(name: str, value: object) -> int | None:
    """None or a non-negative integer (not a bool), else a ValueError naming ``name``."""
    if value is None or (isinstance(value, (int, np.integer)) and not isinstance(value, bool)
                         and value >= 0):
        return None if value is None else int(value)
    raise ValueError(f"{name} must be None or an integer >= 0, got {value!r}")


def positive_float32(name: str, value: object) -> np.float32:
    """``value`` as a float32 if it is a real number (not a bool) that is finite and > 0 in
    float32, else a ValueError naming ``name``."""
    if (isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool)
            and math.isfinite(float(value))):
        with np.errstate(over="ignore"):
            value32 = np.float32(value)
        if np.isfinite(value32) and value32 > 0:
            return value32
    raise ValueError(f"{name} must be a positive number that is finite and non-zero in "
                     f"float32, got {value!r}")


def factor(name: str, value: object, *, above_one: bool) -> float:
    """A growth factor (``above_one``: a finite number > 1) or a backoff factor (a number in
    (0, 1)), else a ValueError naming ``name``."""
    if (isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool)
            and math.isfinite(v := float(value)) and (v > 1 if above_one else 0 < v < 1)):
        return v
    allowed = "a finite number > 1" if above_one else "a number in (0, 1)"
    raise ValueError(f"{name} must be {allowed}, got {value!r}")


FLOAT32_TINY = float(np.finfo(np.float32).tiny)  # 2**-126
FLOAT32_MAX = float(np.finfo(np.float32).max)


def loss_scale(name: str, value: object, *, alternatives: str = "",
               written: object = None) -> float:
    """A fixed loss scale: a number from 2**-126 to float32's max (a normal float32, so the
    scale and its float32 reciprocal are both finite and non-zero), else a ValueError naming
    ``name`` (the argument the caller wrote: ``loss_scale``, ``initial_scale``,
    ``--loss-scale``). The one rule of ``fit(loss_scale=)``, ``LossScaleOptimizer`` and the
    command line; ``alternatives`` names the other values the caller accepts (``"'dynamic',
    'none' or "``) and ``written`` what the user typed, when ``value`` was parsed from it."""
    if (isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool)
            and math.isfinite(v := float(value)) and FLOAT32_TINY <= v <= FLOAT32_MAX):
        return v
    shown = value if written is None else written
    raise ValueError(f"{name} must be {alternatives}a number from 2^-126 to {FLOAT32_MAX:.7g} "
                     f"(a normal float32: the scale and its reciprocal are float32), got "
                     f"{shown!r}")


def device(name: str, value: object) -> str:
    """"cpu" (the PyTorch face's only device: fpsim emulates every format on the CPU), else a
    ValueError naming ``name`` and the value."""
    if isinstance(value, str) and value.strip().lower() in ("cpu", "cpu:0"):
        return "cpu"
    raise ValueError(f"{name}={value!r} is not available: fpsim emulates every format on the "
                     f"CPU, so the only device is 'cpu' (e.g. nn.autocast('cpu', "
                     f"dtype='float16'), nn.GradScaler('cpu'))")
