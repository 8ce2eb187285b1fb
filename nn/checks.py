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


def device(name: str, value: object) -> str:
    """"cpu" (the PyTorch face's only device: fpsim emulates every format on the CPU), else a
    ValueError naming ``name`` and the value."""
    if isinstance(value, str) and value.strip().lower() in ("cpu", "cpu:0"):
        return "cpu"
    raise ValueError(f"{name}={value!r} is not available: fpsim emulates every format on the "
                     f"CPU, so the only device is 'cpu' (e.g. nn.autocast('cpu', "
                     f"dtype='float16'), nn.GradScaler('cpu'))")
