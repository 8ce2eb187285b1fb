"""Counting numerics events (overflow, underflow, subnormal results, NaN created, inexact).

``with fpsim.monitor() as m:`` makes every rounding inside the block count, per named site, the
elements rounded and these events (all counted inside the rounding kernel, in the same pass):

- ``inexact``: a finite input whose rounded value differs from it;
- ``overflow``: a finite input whose rounded magnitude exceeded max (it became inf, NaN or
  a clamped +-max; a value just above max that rounds down to max is only inexact);
- ``underflow``: a non-zero finite input that became zero;
- ``subnormal``: a non-zero result below the format's smallest normal;
- ``nan_created``: a non-NaN input (finite or inf) that became NaN.

A site is the name of the operation that rounded: ``fpsim.round(..., site="name")`` (default
``"round"``), and EmulatedArray operations use the numpy ufunc name (``"add"``, ``"multiply"``,
``"power"``, ``"matmul"``, ``"sum"``, ``"cast"`` for operands converted to a format, ``"array"``
for ``fpsim.array``). When no monitor is active the plain kernel runs and nothing is counted.

Sums and products that round their accumulator (``fpsim.sum/dot/matmul`` with ``accumulate=``
a format or an accumulator model, EmulatedArray ``sum`` and ``@``) also record, in
``Monitor.sums`` per site (``"sum"``, ``"matmul"``), what the accumulation did: ``sums`` (the
outputs), ``additions`` (terms added into an accumulator) and ``swamped`` (terms lost whole:
an addition whose rounded result equals one operand while the other is non-zero, or a term an
aligned-group model truncated to zero). A product in BLAS order (``order="blas"``, which
``"auto"`` picks for exact float32 products into fp32) is not counted there.
Monitors nest: every active monitor counts every event. The set of active monitors belongs to
the thread (a ``contextvars.ContextVar``): a rounding in another thread, or another asyncio
task, is not counted by this thread's monitors, unless it runs inside ``counting_in`` with
them (fpsim.torch's backward passes do, with the monitors of their forward pass).

>>> with fpsim.monitor() as m:
...     _ = fpsim.round(np.float32([1e-9, 1e5, 0.1]), "fp16", site="demo")
>>> m.counts["demo"]["underflow"], m.counts["demo"]["overflow"]
(1, 1)
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from fpsim.formats import Format

EVENTS = ("inexact", "overflow", "underflow", "subnormal", "nan_created")

# The monitors counting in this thread / context, innermost last. An immutable tuple, so a
# context that copied it (a new thread, an asyncio task) never sees this one's later changes.
_ACTIVE: contextvars.ContextVar[tuple[Monitor, ...]] = contextvars.ContextVar(
    "fpsim_active_monitors", default=()
)


def is_active() -> bool:
    """True while at least one monitor is counting in this thread (context)."""
    return bool(_ACTIVE.get())


def active_monitors() -> tuple[Monitor, ...]:
    """The monitors counting in this thread (context) now, for ``counting_in`` elsewhere."""
    return _ACTIVE.get()


@contextlib.contextmanager
def counting_in(monitors: tuple[Monitor, ...]) -> Iterator[None]:
    """Count the roundings inside the block in ``monitors`` (from ``active_monitors``), in
    whatever thread it runs: fpsim.torch's backward passes, which torch runs on a thread of
    its own for CUDA tensors, count in the monitors their forward pass counted in."""
    token = _ACTIVE.set(monitors)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


BLOCK_EVENTS = ("blocks", "elements", "saturated", "flushed", "clipped_blocks")


def record_blocks(site: str, fmt_name: str, counts: tuple[int, ...]) -> None:
    """Add one block quantization's counts (``BLOCK_EVENTS``, fpsim.mx) to every active
    monitor."""
    for m in _ACTIVE.get():
        m.add_blocks(site, fmt_name, counts)


SUM_EVENTS = ("sums", "additions", "swamped")


def record_sums(site: str, accumulator: str, counts: tuple[int, ...]) -> None:
    """Add one accumulation's counts (``SUM_EVENTS``, fpsim.accumulate) to every active
    monitor; ``accumulator`` names the format or model."""
    for m in _ACTIVE.get():
        m.add_sums(site, accumulator, counts)


def record(site: str, fmt: Format, n: int, counts: tuple[int, ...]) -> None:
    """Add one rounding's element count and event counts to every monitor active here."""
    for m in _ACTIVE.get():
        m.add(site, fmt, n, counts)


class Monitor:
    """Per-site counters of elements rounded and of each event in ``EVENTS``.

    ``counts`` is a plain dict ``{site: {"elements": n, "inexact": k, "overflow": k, ...}}``;
    ``formats`` maps each site to the name of the format it rounded to (the last one seen).
    Use it as a context manager or call ``start()`` / ``stop()``; ``reset()`` clears the counts.
    """

    def __init__(self) -> None:
        self.counts: dict[str, dict[str, int]] = {}
        self.formats: dict[str, str] = {}
        self.blocks: dict[str, dict[str, int]] = {}  # fpsim.mx: {site: BLOCK_EVENTS counts}
        self.sums: dict[str, dict[str, int]] = {}  # accumulations: {site: SUM_EVENTS counts}
        self.accumulators: dict[str, str] = {}  # the accumulator each sums site used (last)

    def add(self, site: str, fmt: Format, n: int, counts: tuple[int, ...]) -> None:
        row = self.counts.setdefault(site, {"elements": 0, **dict.fromkeys(EVENTS, 0)})
        row["elements"] += int(n)
        for name, value in zip(EVENTS, counts, strict=True):
            row[name] += int(value)
        self.formats[site] = fmt.name

    def add_blocks(self, site: str, fmt_name: str, counts: tuple[int, ...]) -> None:
        """Block quantization counts (fpsim.mx): blocks, elements, elements saturated and
        flushed to zero, blocks whose scale clipped the maximum."""
        row = self.blocks.setdefault(site, dict.fromkeys(BLOCK_EVENTS, 0))
        for name, value in zip(BLOCK_EVENTS, counts, strict=True):
            row[name] += int(value)
        self.formats[site] = fmt_name

    def add_sums(self, site: str, accumulator: str, counts: tuple[int, ...]) -> None:
        """Accumulation counts (fpsim.accumulate): outputs, additions, swamped terms."""
        row = self.sums.setdefault(site, dict.fromkeys(SUM_EVENTS, 0))
        for name, value in zip(SUM_EVENTS, counts, strict=True):
            row[name] += int(value)
        self.accumulators[site] = accumulator

    # --- lifecycle -----------------------------------------------------------------------
    @property
    def active(self) -> bool:
        """True between start() and stop() in this thread (context)."""
        return any(m is self for m in _ACTIVE.get())

    def start(self) -> Monitor:
        """Begin counting roundings made in this thread (idempotent); returns self."""
        if not self.active:
            _ACTIVE.set((*_ACTIVE.get(), self))
        return self

    def stop(self) -> Monitor:
        """Stop counting (idempotent); the counts so far are kept. Returns self."""
        _ACTIVE.set(tuple(m for m in _ACTIVE.get() if m is not self))
        return self

    def reset(self) -> None:
        """Forget every count (the monitor stays active or inactive as it was)."""
        self.counts.clear()
        self.formats.clear()
        self.blocks.clear()
        self.sums.clear()
        self.accumulators.clear()

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- reading ---------------------------------------------------------------------------
    def total(self) -> dict[str, int]:
        """The counts summed over every site."""
        out = {"elements": 0, **dict.fromkeys(EVENTS, 0)}
        for row in self.counts.values():
            for key in out:
                out[key] += row[key]
        return out

    def summary(self) -> str:
        """A printable table: one row per site (and a total), each event as count and share.

        The share is the count divided by the elements rounded at that site.
        """
        header = ["site", "format", "elements", *EVENTS]
        rows = [header]
        items = list(self.counts.items())
        if len(items) > 1:
            items.append(("total", self.total()))
        for site, row in items:
            n = row["elements"]
            cells = [site, self.formats.get(site, ""), f"{n:,}"]
            for name in EVENTS:
                k = row[name]
                cells.append(f"{k:,} ({k / n:.2%})" if n and k else "0")
            rows.append(cells)
        if len(rows) == 1 and not self.blocks and not self.sums:
            return "fpsim monitor: nothing rounded yet"
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines = []
        for r, cells in enumerate(rows):
            left = [c.ljust(w) for c, w in zip(cells[:2], widths[:2], strict=True)]
            right = [c.rjust(w) for c, w in zip(cells[2:], widths[2:], strict=True)]
            lines.append("  ".join(left + right).rstrip())
            if r == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join((lines if len(rows) > 1 else []) + self._block_lines()
                         + self._sum_lines())

    def _block_lines(self) -> list[str]:
        """The fpsim.mx rows: blocks, elements, and each block event as count and share."""
        if not self.blocks:
            return []
        lines = ["block quantization (fpsim.mx): " + ", ".join(BLOCK_EVENTS)]
        for site, row in self.blocks.items():
            n, nb = row["elements"], row["blocks"]
            lines.append(
                f"  {site} ({self.formats.get(site, '')}): {nb:,} blocks, {n:,} elements; "
                f"saturated {row['saturated']:,}, flushed {row['flushed']:,}, "
                f"clipped blocks {row['clipped_blocks']:,}"
                + (f" ({row['clipped_blocks'] / nb:.2%})" if nb else ""))
        return lines

    def _sum_lines(self) -> list[str]:
        """The accumulation rows: outputs, additions, and swamped terms as count and share."""
        if not self.sums:
            return []
        lines = ["accumulation: " + ", ".join(SUM_EVENTS)]
        for site, row in self.sums.items():
            n, k = row["additions"], row["swamped"]
            lines.append(f"  {site} ({self.accumulators.get(site, '')}): {row['sums']:,} sums, "
                         f"{n:,} additions; swamped {k:,}" + (f" ({k / n:.2%})" if n else ""))
        return lines

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        state = "active" if self.active else "stopped"
        return f"<fpsim Monitor ({state}), {len(self.counts)} site(s)>"


def monitor() -> Monitor:
    """A new Monitor; use it as ``with fpsim.monitor() as m:`` or call ``start()``/``stop()``.

    >>> m = fpsim.monitor().start()
    >>> _ = fpsim.array([70000.0, 1.0], "fp16") * 2
    >>> m.stop().counts["array"]["overflow"]
    1
    """
    return Monitor()
