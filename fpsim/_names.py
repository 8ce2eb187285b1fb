"""Unknown-name messages: the known names and the closest matches ("did you mean ...?").

One home for how fpsim answers a misspelt name (format names in ``fpsim.catalog``, rounding
modes in ``fpsim.rounding``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def suggest(name: object, known: Iterable[str], n: int = 3) -> str:
    """"did you mean 'a' or 'b'?" for the names closest to ``name``, or "" when none is close.

    >>> suggest("fp8_e4m4", ["fp8_e4m3", "fp8_e5m2", "float16"])
    "did you mean 'fp8_e4m3' or 'fp8_e5m2'?"
    """
    if not isinstance(name, str):
        return ""
    key = name.strip().lower().replace("-", "_")
    close = difflib.get_close_matches(key, list(known), n=n, cutoff=0.6)
    return f"did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def unknown_name(kind: str, name: object, known: Iterable[str], label: str = "known names"
                 ) -> str:
    """The message for an unknown name: every known name, then the closest ones.

    >>> unknown_name("rounding mode", "nearest", ["nearest_even", "up"], "known modes")
    "unknown rounding mode 'nearest'; known modes: nearest_even, up; did you mean 'nearest_even'?"
    """
    names = list(known)
    hint = suggest(name, names)
    return f"unknown {kind} {name!r}; {label}: {', '.join(names)}" + (f"; {hint}" if hint else "")
