"""Keras's progress lines for ``fit`` and ``evaluate``, printed on stdout as Keras prints them.

- ``verbose=1``: a bar per epoch, redrawn in place on a terminal and printed once, complete,
  elsewhere (logs, notebooks' captured output, pipes)::

      6/6 [==============================] - 2s 78ms/step - loss: 4.9609 - accuracy: 0.4132

- ``verbose=2``: one line when the epoch ends: ``6/6 - 0s - loss: 0.2998 - 34ms/step``.
- ``verbose=0``: nothing.

Values print as Keras prints them: ``%.4f``, or ``%.4e`` when ``|v| <= 1e-3``. The time per
step is in s, ms or us.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import TextIO

from nn.engine.checks import count

WIDTH = 30
VERBOSE_LEVELS = (0, 1, 2)


def check_verbose(verbose: object) -> int:
    """0, 1 or 2 (Keras's "auto" means 1), else a ValueError naming ``verbose``."""
    if verbose == "auto":
        return 1
    if isinstance(verbose, bool) or verbose not in VERBOSE_LEVELS:
        raise ValueError(f"verbose must be 0 (silent), 1 (progress bar), 2 (one line per epoch) "
                         f"or 'auto', got {verbose!r}")
    return int(verbose)  # one of 0, 1, 2


def format_value(value: float) -> str:
    return f"{value:.4f}" if abs(value) > 1e-3 else f"{value:.4e}"


def format_logs(logs: Mapping[str, float]) -> str:
    return "".join(f" - {k}: {format_value(v)}" for k, v in logs.items())


def format_per_step(seconds: float) -> str:
    if seconds >= 1 or seconds == 0:
        return f"{seconds:.0f}s/step"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.0f}ms/step"
    return f"{seconds * 1e6:.0f}us/step"


class Progbar:
    """The progress of one epoch (or one ``evaluate``) of ``target`` steps (None: unknown)."""

    def __init__(self, target: int | None, verbose: int, stream: TextIO | None = None,
                 interval: float = 0.05) -> None:
        self.target = None if target is None else count("target", target, minimum=1)
        self.verbose = check_verbose(verbose)
        self.stream = sys.stdout if stream is None else stream
        isatty = getattr(self.stream, "isatty", None)
        self.interactive = bool(isatty()) if callable(isatty) else False
        self.interval = interval
        self.start = time.perf_counter()
        self._last_draw = 0.0
        self._width = 0

    def _bar(self, step: int) -> str:
        if self.target is None:
            return f"{step}/Unknown"
        done = int(WIDTH * step / self.target)
        body = "=" * done if step >= self.target else "=" * done + ">" + "." * (WIDTH - done - 1)
        return f"{step}/{self.target} [{body[:WIDTH]}]"

    def update(self, step: int, logs: Mapping[str, float], note: str = "") -> None:
        """Redraw the bar after ``step`` steps (a terminal only, at most every ``interval``);
        ``note`` (e.g. ``"loss_scale: 32768"``) is appended."""
        now = time.perf_counter()
        if self.verbose != 1 or not self.interactive or now - self._last_draw < self.interval:
            return
        self._last_draw = now
        line = f"{self._bar(step)}{format_logs(logs)}{' - ' + note if note else ''}"
        self.stream.write("\r" + line.ljust(self._width))
        self._width = len(line)
        self.stream.flush()

    def finish(self, steps: int, logs: Mapping[str, float], note: str = "") -> None:
        """Print the epoch's final line (``steps`` steps run, with the final logs)."""
        if self.verbose == 0:
            return
        elapsed = time.perf_counter() - self.start
        per_step = format_per_step(elapsed / max(steps, 1))
        if self.verbose == 1:
            if self.target is None:
                self.target = max(steps, 1)
            line = f"{self._bar(steps)} - {elapsed:.0f}s {per_step}{format_logs(logs)}"
        else:
            line = f"{steps}/{steps} - {elapsed:.0f}s{format_logs(logs)} - {per_step}"
        line += f" - {note}" if note else ""
        prefix = "\r" if self.interactive and self.verbose == 1 else ""
        self.stream.write(prefix + line.ljust(self._width) + "\n")
        self.stream.flush()
