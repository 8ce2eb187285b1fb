"""Counting numerics events (overflow, underflow, subnormal results, NaN created, inexact).

``with fpsim.monitor() as m:`` makes every rounding inside the block count its events per named
site; the counting happens inside the rounding kernel, in the same pass. When no monitor is
active the plain kernel runs and nothing is counted.
"""

from __future__ import annotations

from fpsim.formats import Format

EVENTS = ("inexact", "overflow", "underflow", "subnormal", "nan_created")

_ACTIVE: list[Monitor] = []


def is_active() -> bool:
    """True while at least one monitor is counting."""
    return bool(_ACTIVE)


def record(site: str, fmt: Format, n: int, counts: tuple[int, ...]) -> None:
    """Add one rounding's element count and event counts to every active monitor."""
    for m in _ACTIVE:
        m.add(site, fmt, n, counts)


class Monitor:
    """Per-site counters of elements rounded and of each event in ``EVENTS``."""

    def __init__(self) -> None:
        self.counts: dict[str, dict[str, int]] = {}
        self.formats: dict[str, str] = {}

    def add(self, site: str, fmt: Format, n: int, counts: tuple[int, ...]) -> None:
        row = self.counts.setdefault(site, {"elements": 0, **dict.fromkeys(EVENTS, 0)})
        row["elements"] += int(n)
        for name, value in zip(EVENTS, counts, strict=True):
            row[name] += int(value)
        self.formats[site] = fmt.name

    def start(self) -> Monitor:
        _ACTIVE.append(self)
        return self

    def stop(self) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def monitor() -> Monitor:
    """A new Monitor; use it as ``with fpsim.monitor() as m:`` or call ``start()``/``stop()``."""
    return Monitor()
