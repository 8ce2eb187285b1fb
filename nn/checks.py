"""Argument checks shared across nn: one rule each, one message each.

>>> count("epochs", 3, minimum=1)
3
"""

from __future__ import annotations

import numpy as np


def count(name: str, value: object, *, minimum: int = 0) -> int:
    """``value`` as an int if it is an integer (not a bool) of at least ``minimum``, else a
    ValueError naming ``name``, the value and what is allowed."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= minimum:
        return int(value)
    raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
