"""What an experiment returns: ``ExperimentResult`` (its runs in table order, the numbers it
measured beyond them, the knob that produced the effect). Whether a loss effect is shown is
a verdict across seeds (``nn.experiments.seeds``), never a property of one result."""

from __future__ import annotations

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
