"""What an experiment returns: ``ExperimentResult`` (its runs in table order, the numbers it
measured beyond them, the knob that produced the effect). Whether a loss effect is shown is
a verdict across seeds (``nn.experiments.seeds``), never a property of one result."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from nn.experiments.lm import LMRun


@dataclass
class ExperimentResult:
    """An experiment's runs (in table order) and what it measured beyond them."""

    name: str
    title: str
    config: Any  # an LMConfig (language model) or a CNNConfig (experiment 3)
    knob: str
    runs: list[LMRun]
    extra: dict[str, Any] = field(default_factory=dict)
    # (run showing the technique's absence, its reference): the pair the loss gap compares
    contrast: tuple[str, str] | None = None

    def run(self, label: str) -> LMRun:
        """The run labelled ``label``."""
        for r in self.runs:
            if r.label == label:
                return r
        raise KeyError(f"{self.name} has runs {[r.label for r in self.runs]}, not {label!r}")

    def gap(self, label: str, reference: str = "float32") -> float:
        """Held-out loss of ``label`` minus that of ``reference`` (nats per character, or
        per image)."""
        return self.run(label).test_loss - self.run(reference).test_loss


def loss_text(value: float, sign: bool = False) -> str:
    """A held-out loss or a gap as the tables and the report write it: 4 decimals, or 3
    significant digits below 0.001 (a reconstruction's MSE gap is ~1e-5), "nan" when not
    finite; ``sign`` writes the + of a positive one."""
    if not math.isfinite(value):
        return "nan"
    plus = "+" if sign else ""
    if value != 0 and abs(value) < 1e-3:
        return f"{value:{plus}.3g}"
    return f"{value:{plus}.4f}"
