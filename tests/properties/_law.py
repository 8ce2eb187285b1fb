"""Failure messages for the property tests: which law broke, and the example in plain numbers."""

from __future__ import annotations

from typing import Any

import numpy as np


def plain(value: Any) -> str:
    """A value as plain numbers: floats with repr (and the exact hex for non-integers)."""
    if isinstance(value, np.ndarray):
        if value.size > 12:
            return f"array of {value.size} values, first 12: {plain(value.ravel()[:12])}"
        return "[" + ", ".join(plain(v) for v in value.ravel().tolist()) + "]"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(plain(v) for v in value) + "]"
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if v.is_integer() or not np.isfinite(v):
            return repr(v)
        return f"{v!r} ({v.hex()})"
    if hasattr(value, "name") and hasattr(value, "mantissa_bits"):  # a Format
        return value.name
    return repr(value)


def broke(law: str, **example: Any) -> str:
    """``law broke: key=value, ...`` for an assertion message."""
    return f"law broke: {law}\n  " + "\n  ".join(f"{k} = {plain(v)}" for k, v in example.items())
