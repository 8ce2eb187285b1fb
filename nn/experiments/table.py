"""Every experiment in one table: ``EXPERIMENTS`` maps a name (what ``fpsim compare
--experiment`` takes) to an ``Experiment``: its title, the technique it is about, the function
that trains it, its default configuration, its claims and the function that words its numbers.

A ``Claim`` is a statement about held-out loss that the seeds test (``nn.experiments.seeds``):
"``variant`` ends with a higher held-out loss than ``reference``", i.e. taking the technique
away costs loss. Only such directed statements are claims: "no worse" cannot be shown by an
interval, only not contradicted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nn.experiments.accumulation import ACCUMULATION_DEFAULT, fp32_accumulation
from nn.experiments.accumulation import findings as accumulation_findings
from nn.experiments.bf16_remedies import KAHAN, REMEDIES_DEFAULT, bf16_remedies
from nn.experiments.bf16_remedies import MASTERS as BF16_MASTERS
from nn.experiments.bf16_remedies import PURE as PURE_BF16
from nn.experiments.bf16_remedies import STOCHASTIC as STOCHASTIC_BF16
from nn.experiments.bf16_remedies import findings as bf16_remedies_findings
from nn.experiments.fp8 import FP8_DEFAULT, fp8_findings, fp8_recipes
from nn.experiments.masters import MASTER_DEFAULT, MIXED, PURE, master_weights
from nn.experiments.masters import findings as master_findings
from nn.experiments.reconstruction import RECONSTRUCTION_DEFAULT, bf16_reconstruction
from nn.experiments.reconstruction import findings as reconstruction_findings
from nn.experiments.result import ExperimentResult
from nn.experiments.rng_bits import FULL, NEAREST, RNG_BITS_DEFAULT, rng_bits_findings, rng_bits_lm
from nn.experiments.statistics import CNN_DEFAULT, fp32_statistics
from nn.experiments.statistics import findings as statistics_findings
from nn.experiments.statistics_lm import findings_lm, fp32_statistics_lm
from nn.experiments.stories import (
    DEFAULT,
    SGD_CONFIG,
    accumulation_lm_findings,
    adam_state,
    adam_state_findings,
    bf16_findings,
    bf16_vs_fp16,
    fp32_accumulation_lm,
    master_weights_lm,
    master_weights_lm_findings,
    underflow_findings,
    underflow_from_averaging,
    underflow_with_sgd,
)

QUICK_STEPS = 40  # ``fpsim compare --quick``: steps per run
LOSS_CLAIM_SEEDS = 5  # ours: the default number of seeds of an experiment that makes a loss claim


@dataclass(frozen=True)
class Claim:
    """"``variant`` ends with a higher held-out loss than ``reference``" (labels of two runs of
    the same experiment, compared seed by seed)."""

    variant: str
    reference: str

    @property
    def name(self) -> str:
        return f"{self.variant} > {self.reference}"

    def describe(self) -> str:
        return f"{self.variant} ends with a higher held-out loss than {self.reference}"


@dataclass(frozen=True)
class Experiment:
    """One experiment: ``run(config)`` trains every variant of it from ``config.seed`` (initial
    weights and batch order) and returns an ``ExperimentResult``; ``findings(result)`` words
    its numbers, one sentence per line."""

    name: str
    title: str
    technique: str
    run: Callable[[Any], ExperimentResult]
    config: Any
    claims: tuple[Claim, ...]
    findings: Callable[[ExperimentResult], list[str]]

    @property
    def default_seeds(self) -> int:
        """The seeds ``fpsim compare`` trains by default: ``LOSS_CLAIM_SEEDS`` when the
        experiment makes a loss claim, else 1."""
        return LOSS_CLAIM_SEEDS if self.claims else 1

    def config_for(self, *, steps: int | None = None, seed: int | None = None) -> Any:
        """The default configuration with ``steps`` and ``seed`` changed where given."""
        changes = {k: v for k, v in (("steps", steps), ("seed", seed)) if v is not None}
        return self.config.with_(**changes)


def _master_weights(config: Any) -> ExperimentResult:
    return master_weights(config, spread_seeds=())  # the seeds are the caller's


def _accumulation(config: Any) -> ExperimentResult:
    return fp32_accumulation(config, spread_seeds=())


UNSCALED, SCALED, FP32 = "mixed_float16, no scaling", "mixed_float16 + dynamic", "float32"
_UNDERFLOW_CLAIMS = (Claim(UNSCALED, FP32), Claim(UNSCALED, SCALED))

# in the order ``fpsim compare --all`` runs them: the quicker first
EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (
    Experiment("adam-state", "Adam with fp16 slots (epsilon 1e-8 -> 0, v underflows) vs fp32 "
               "slots", "fp32 optimizer state", adam_state, DEFAULT,
               (Claim("Adam, fp16 slots", "Adam, fp32 slots"),), adam_state_findings),
    Experiment("underflow", "underflow from averaging (unscaled mixed_float16 vs float32 vs "
               "dynamic loss scaling)", "loss scaling", underflow_from_averaging,
               DEFAULT, _UNDERFLOW_CLAIMS, underflow_findings),
    Experiment("bf16", "mixed_bfloat16 (no scaling) vs mixed_float16 (dynamic scaling): the "
               "price in precision", "bf16 vs fp16", bf16_vs_fp16, DEFAULT,
               (Claim("mixed_bfloat16", FP32), Claim("mixed_bfloat16", SCALED)),
               bf16_findings),
    Experiment("master-weights-lm", "fp32 master weights vs pure float16 weights (the LM, Adam "
               "lr 1e-4)", "fp32 master weights", master_weights_lm, DEFAULT,
               (Claim(PURE, MIXED),), master_weights_lm_findings),
    Experiment("bf16-remedies", "pure bfloat16 weights: nearest-even vs stochastic rounding vs "
               "Kahan-compensated updates (the LM, Adam lr 1e-4; Zamirai et al. 2020)",
               "optimizer-side remedies for bf16 weights", bf16_remedies, REMEDIES_DEFAULT,
               (Claim(PURE_BF16, BF16_MASTERS), Claim(PURE_BF16, STOCHASTIC_BF16),
                Claim(PURE_BF16, KAHAN)), bf16_remedies_findings),
    Experiment("statistics-lm", "attention softmax and LayerNorm statistics in fp32 vs fp16 "
               "(the LM)", "fp32 softmax and statistics", fp32_statistics_lm, DEFAULT,
               (Claim("fp16 statistics", "fp32 statistics"),), findings_lm),
    Experiment("accumulation-lm", "fp32 vs fp16 accumulation in the logits layer's matmuls "
               "(the LM)", "fp32 accumulation", fp32_accumulation_lm, DEFAULT,
               (Claim("fp16 accumulation", "fp32 accumulation"),),
               accumulation_lm_findings),
    Experiment("master-weights", "fp32 master weights vs pure float16 weights (a CNN, Adam lr "
               "3e-4)", "fp32 master weights", _master_weights, MASTER_DEFAULT,
               (Claim(PURE, MIXED),), master_findings),
    Experiment("statistics", "BatchNormalization statistics in fp32 vs fp16 (a CNN fed 0-255 "
               "pixels)", "fp32 statistics", fp32_statistics, CNN_DEFAULT,
               (Claim("fp16 statistics", "fp32 statistics"),), statistics_findings),
    Experiment("accumulation", "fp32 vs fp16 accumulation in the convolutions (a CNN, batch "
               "256: 16384-term kernel gradients)", "fp32 accumulation", _accumulation,
               ACCUMULATION_DEFAULT, (Claim("fp16 accumulation", "fp32 accumulation"),),
               accumulation_findings),
    Experiment("fp8", "fp8 with per-tensor delayed scaling or MX blocks vs plain e4m3fn (a "
               "character MLP on CPython's pydoc text)", "fp8 per-tensor scaling", fp8_recipes,
               FP8_DEFAULT, (Claim("mixed_e4m3fn", "fp8_hybrid_delayed"),
                             Claim("mixed_e4m3fn", "mxfp8")), fp8_findings),
    Experiment("reconstruction", "mixed_bfloat16 vs float32 and mixed_float16 on a task that "
               "asks for more than 8 bits (per-pixel reconstruction of the digits, an MLP "
               "autoencoder)", "bf16 vs fp16", bf16_reconstruction, RECONSTRUCTION_DEFAULT,
               (Claim("mixed_bfloat16", FP32), Claim("mixed_bfloat16", SCALED)),
               reconstruction_findings),
    Experiment("rng-bits", "stochastic rounding of pure-bf16 weight updates with 3, 8 or all "
               "random bits vs nearest (the LM)", "stochastic rounding with enough random bits",
               rng_bits_lm, RNG_BITS_DEFAULT,
               (Claim(NEAREST, FULL), Claim("bf16 weights, SR 3 bits", FULL)),
               rng_bits_findings),
    Experiment("underflow-sgd", "underflow from averaging, trained with SGD + momentum (300 "
               "steps)", "loss scaling", underflow_with_sgd, SGD_CONFIG,
               _UNDERFLOW_CLAIMS, underflow_findings),
)}

# the digits story is not in the table: one fixed seed, a loss multiplied by 2^-18 (a teaching
# device), no claim tested across seeds
DIGITS = "digits"
DIGITS_TITLE = "the 8x8 digits MLP (loss x 2^-18, a teaching device; no claims)"


def experiment(name: str) -> Experiment:
    """The table's entry ``name``; a ValueError names the known ones."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; known: {sorted(EXPERIMENTS)}")
    return EXPERIMENTS[name]


def experiment_names() -> list[str]:
    """The names ``fpsim compare --experiment`` takes: the table's and "digits"."""
    return [*EXPERIMENTS, DIGITS]


def default_config(name: str) -> Any:
    """The configuration experiment ``name`` runs with by default."""
    return experiment(name).config


def findings(result: ExperimentResult) -> list[str]:
    """What the numbers of ``result`` say, one sentence per line (the table's ``findings`` of
    the experiment that made it)."""
    return experiment(result.name).findings(result)


def warm_up(name: str) -> float:
    """Run experiment ``name`` at 2 steps (compiling every kernel it uses); returns seconds."""
    start = time.perf_counter()
    entry = experiment(name)
    entry.run(entry.config_for(steps=2))
    return time.perf_counter() - start


def listing() -> list[str]:
    """``fpsim compare --list``: one line per experiment, its name, technique and claims."""
    lines = [f"{e.name}: {e.technique}; claims: " + "; ".join(c.describe() for c in e.claims)
             + f" (default {e.default_seeds} seeds)" for e in EXPERIMENTS.values()]
    return [*lines, f"{DIGITS}: {DIGITS_TITLE}"]
