"""What an experiment returns: ``ExperimentResult`` (its runs in table order, the numbers it
measured beyond them, the knob that produced the effect) and ``LOSS_EFFECT``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from nn.experiments.lm import LMRun

LOSS_EFFECT = 0.01  # nats per character: a smaller held-out gap is "not shown at this size"


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

    @property
    def loss_effect_shown(self) -> bool:
        """True when the held-out loss shows the effect: the contrast run's loss is not
        finite, or differs from its reference's by at least ``LOSS_EFFECT`` nats (per
        character, or per image for the CNN); and when ``extra["spread"]`` holds the same
        gap measured from other seeds (seed -> gap), every one of those does too, on the
        same side (a gap that changes sign or shrinks below ``LOSS_EFFECT`` from one seed to
        the next is noise)."""
        label, reference = self.contrast or (self.runs[-1].label, self.runs[0].label)
        gap = self.gap(label, reference)
        if not math.isfinite(gap):
            return True
        gaps = [gap, *self.extra.get("spread", {}).values()]
        return (all(g >= LOSS_EFFECT for g in gaps) or all(g <= -LOSS_EFFECT for g in gaps))

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
