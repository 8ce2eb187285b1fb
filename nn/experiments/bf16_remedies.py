"""Pure bfloat16 weights without fp32 master copies, and the optimizer-side remedies from the
literature that keep their small updates (Zamirai, Zhang, Aberger, De Sa, "Revisiting BFloat16
Training", arXiv:2010.06192, 2020): stochastic rounding of the weight update and Kahan
(compensated) summation of the updates (``nn.optimizers.remedies``).

The language model (``nn.experiments.lm``) is trained four ways from the same weights and
batches, at a late-training learning rate (Adam, 1e-4 by default, as ``master-weights-lm``):
Adam's steps of about 1e-4 are below half an ulp of every bf16 weight above about 0.05
(bf16 keeps 8 significant bits), so plain nearest-even rounding loses them.

- ``mixed_bfloat16 (fp32 masters)``: the reference (bf16 compute, fp32 weights);
- ``bfloat16 (no master)``: bf16 weights, every update rounded to nearest;
- ``bfloat16 + stochastic rounding``: bf16 weights, updates rounded stochastically (seeded
  from the configuration's seed);
- ``bfloat16 + Kahan``: bf16 weights and a bf16 compensation per weight.

bf16 needs no loss scaling (fp32's exponent range), so none is used. ``extra["swamped_share"]``
per run: the weight elements a non-zero update left unchanged, per update made (with Kahan the
compensation keeps what the weight did not take, so its count overstates what was lost).
"""

from __future__ import annotations

from typing import Any

from nn.experiments.lm import LMConfig, build_lm, train_lm
from nn.experiments.result import ExperimentResult

MASTERS = "mixed_bfloat16 (fp32 masters)"
PURE = "bfloat16 (no master)"
STOCHASTIC = "bfloat16 + stochastic rounding"
KAHAN = "bfloat16 + Kahan"
REMEDIES_LEARNING_RATE = 1e-4  # ours: as master-weights-lm, a late-training rate

REMEDIES_DEFAULT = LMConfig(learning_rate=REMEDIES_LEARNING_RATE)


def bf16_remedies(config: LMConfig = REMEDIES_DEFAULT) -> ExperimentResult:
    """The four runs above (same weights and batches); see the module docstring."""
    variants: list[tuple[str, str, dict[str, Any]]] = [
        (MASTERS, "mixed_bfloat16", {}),
        (PURE, "bfloat16", {}),
        (STOCHASTIC, "bfloat16", {"update_rounding": "stochastic", "seed": config.seed}),
        (KAHAN, "bfloat16", {"kahan": True}),
    ]
    runs = [train_lm(label, config, policy, config.make_optimizer(**options))
            for label, policy, options in variants]
    size = sum(v.size for v in build_lm(config, "float32").trainable_variables)
    shares = {r.label: r.swamped_updates / max(size * (config.steps - r.skipped_steps), 1)
              for r in runs}
    return ExperimentResult(
        "bf16-remedies", "pure bfloat16 weights: nearest-even vs stochastic rounding vs Kahan "
        "summation of the updates", config,
        f"the learning rate {config.learning_rate:g}: updates below half an ulp of bf16 weights",
        runs, {"swamped_share": shares}, (PURE, MASTERS))


def findings(r: ExperimentResult) -> list[str]:
    """What ``bf16_remedies``'s numbers say, one sentence per line."""
    shares = r.extra["swamped_share"]
    lines = [f"{label}: {share:.1%} of weight updates left the weight unchanged"
             for label, share in shares.items()]
    lines += [f"{label}: held-out loss {r.gap(label, MASTERS):+.4f} vs fp32 masters"
              for label in (PURE, STOCHASTIC, KAHAN)]
    return lines
