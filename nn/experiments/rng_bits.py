"""Stochastic rounding with few random bits: pure-bf16 weights of the char LM, each weight
update rounded to bf16 stochastically with 3, 8 or all random bits, against nearest.

After Fitzgibbon & Felix, "On Stochastic Rounding with Few Random Bits" (ARITH 2025), whose
Figure 3 trains with r-bit stochastic rounding: with r random bits a value at fraction ``f``
of the way between its two neighbours rounds up with probability ``floor(f * 2^r) / 2^r``
(``fpsim.round(..., mode="stochastic", rng_bits=r)``), so an update smaller than ``2^-r`` of
an ulp is always lost, as under nearest, and larger ones are biased toward zero by up to
``2^-r`` ulp. Hardware's ``cvt.rs`` draws 8 bits (ours: "full" is fpsim's 56-bit draw).

Every run: the LM under the policy "bfloat16" (weights stored in bf16, no fp32 masters), the
configured optimizer's update ``delta`` computed as usual, then the new weight
``round(w - delta)`` to bf16, exactly in float64 then one rounding (nearest, or stochastic
with the run's bits; the random stream seeded by the config's seed and the bits). The
optimizer then subtracts ``w - new`` in float32 (exact: two bf16 values within 2^16 of each
other; ``extra["inexact_updates"]`` counts any that were not).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import fpsim
from fpsim import BF16
from nn.experiments.lm import LMConfig, train_lm
from nn.experiments.result import ExperimentResult

# ours: Adam at 1e-3, steps near half a bf16 ulp of the larger weights; 100 steps keep a
# seed's four runs near two minutes
RNG_BITS_DEFAULT = LMConfig(learning_rate=1e-3, steps=100)
NEAREST = "bf16 weights, nearest"
BITS = {"bf16 weights, SR 3 bits": 3, "bf16 weights, SR 8 bits": 8,
        "bf16 weights, SR full": None}
FULL = "bf16 weights, SR full"


class _RoundedUpdates:
    """Makes ``optimizer``'s update land on ``round(w - delta)`` in bf16 (see the module
    docstring); counts the non-zero updates lost (the weight unchanged) and those whose
    float32 subtraction was inexact."""

    def __init__(self, optimizer: Any, rng_bits: int | None, stochastic: bool,
                 seed: int) -> None:
        self.inner = optimizer._update
        self.mode = "stochastic" if stochastic else "nearest_even"
        self.rng_bits = rng_bits if stochastic else None
        self.rng = np.random.default_rng([seed, 0 if rng_bits is None else rng_bits])
        self.inexact = 0
        self.lost = 0
        optimizer._update = self

    def __call__(self, g: np.ndarray, w: np.ndarray, slots: Any, t: int) -> np.ndarray:
        delta = self.inner(g, w, slots, t)
        wide = w.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            new = np.asarray(fpsim.round(wide - np.asarray(delta, np.float64), BF16, self.mode,
                                         rng=self.rng if self.mode == "stochastic" else None,
                                         rng_bits=self.rng_bits), np.float64)
            step = (wide - new).astype(w.dtype)
            self.lost += int(np.count_nonzero((new == wide) & (np.asarray(delta) != 0)))
            self.inexact += int(np.count_nonzero((wide - step.astype(np.float64)) != new))
        return step


def rng_bits_lm(config: LMConfig = RNG_BITS_DEFAULT) -> ExperimentResult:
    """Pure-bf16 LM training with nearest and with 3-, 8- and full-bit stochastic rounding of
    the weight updates (module docstring). ``extra``: the non-zero weight updates lost per run
    (``swamped_updates``) and ``inexact_updates`` (expected 0)."""
    runs, shares, inexact = [], {}, {}  # (the optimizer sees the rounded step: lost here)
    for label, bits in ((NEAREST, None), *BITS.items()):
        optimizer = config.make_optimizer()
        hook = _RoundedUpdates(optimizer, bits, label != NEAREST, config.seed)
        run = train_lm(label, config, "bfloat16", optimizer, telemetry=False)
        runs.append(run)
        inexact[label] = hook.inexact
        shares[label] = hook.lost
    return ExperimentResult(
        "rng-bits", "stochastic rounding of bf16 weight updates with 3, 8 or all random bits",
        config, "random bits per rounded update", runs,
        {"swamped_updates": shares, "inexact_updates": inexact},
        ("bf16 weights, SR 3 bits", FULL))


def rng_bits_findings(r: ExperimentResult) -> list[str]:
    """What ``rng_bits_lm``'s numbers say."""
    lost = r.extra["swamped_updates"]
    return [*(f"{label}: held-out loss {r.gap(label, FULL):+.4f} vs SR full, "
              f"{lost[label]} weight updates lost" for label in (NEAREST, *BITS)
              if label != FULL),
            f"SR full: held-out loss {r.run(FULL).test_loss:.4f}, {lost[FULL]} weight updates "
            "lost"]
