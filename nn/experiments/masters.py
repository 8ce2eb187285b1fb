"""Experiment 2, fp32 master weights (``fpsim compare --experiment master-weights``): the CNN
of ``nn.experiments.cnn`` trained with Adam at lr 3e-4 (a common default) under
mixed_float16 (fp32 master weights, fp16 compute) against the pure "float16" policy (the
weights themselves in fp16), both loss-scaled and both with fp32 BatchNormalization
statistics, so the weights' format is the only difference. ``extra["spread"]`` repeats the pair
on other seeds.

The knob is the learning rate, and nothing staged: Adam's step is about ``lr`` per weight
whatever the gradient's size, and fp16 keeps 11 significant bits, so a step of 3e-4 is below
half an ulp of every fp16 weight of magnitude 1 or more: such a step away from zero is lost.
Every BatchNormalization's gamma starts at exactly 1.0 (where fp16's spacing is 2**-10 above
and 2**-11 below), so in pure float16 a gamma cannot grow by such steps; fp32 masters keep
every step.
"""

from __future__ import annotations

import math
from typing import Any

import fpsim
import nn.experiments.progress as progress
from nn.experiments.cnn import CNNConfig, train_cnn
from nn.experiments.result import ExperimentResult

MASTER_DEFAULT = CNNConfig(optimizer="adam", learning_rate=3e-4, steps=300)
SPREAD_SEEDS = (1, 2)  # the pair trained again on these seeds (extra["spread"])
MIXED, PURE = "mixed_float16 (fp32 masters)", "float16 (no master)"


def swamp_threshold(step: float) -> float:
    """The smallest power of two ``w`` such that ``step`` is below half an fp16 ulp of every
    weight of magnitude ``w`` or more: half an ulp of ``w`` in ``[2**e, 2**(e+1))`` is
    ``2**(e - 11)`` (fp16 keeps 11 significant bits)."""
    return 2.0 ** (math.floor(math.log2(step)) + fpsim.FP16.precision + 1)


@progress.option
def master_weights(config: CNNConfig = MASTER_DEFAULT,
                   spread_seeds: tuple[int, ...] = SPREAD_SEEDS, *,
                   progress: bool = False) -> ExperimentResult:
    """Train the CNN with fp32 master weights and with pure fp16 weights (see the module
    docstring). ``extra``:

    - ``swamped_share``: per run, the weight updates lost (a non-zero update that left the
      stored weight unchanged) over the updates made (weights x steps taken);
    - ``swamped_by_variable``: per run, the variables with the most swamped updates, largest
      first (name -> count; five of them);
    - ``swamp_threshold``: the weight magnitude from which a step of ``learning_rate`` is
      lost in fp16 (``swamp_threshold``);
    - ``spread``: per seed in ``spread_seeds``, the held-out loss gap (pure float16 minus fp32
      masters) of the pair trained from that seed.
    """
    mixed, mixed_probe = train_cnn(MIXED, config, "mixed_float16")
    pure, pure_probe = train_cnn(PURE, config, "float16", stats_dtype="float32")
    extra: dict[str, Any] = {"swamped_share": {}, "swamped_by_variable": {},
                             "swamp_threshold": swamp_threshold(config.learning_rate),
                             "spread": {}}
    for run, probe in ((mixed, mixed_probe), (pure, pure_probe)):
        model = probe.model
        weights = sum(v.size for v in model.trainable_variables)
        steps = config.steps - run.skipped_steps
        extra["swamped_share"][run.label] = run.swamped_updates / max(weights * steps, 1)
        counts = model.inner_optimizer.swamped_counts
        top = sorted(counts.items(), key=lambda item: -item[1])[:5]
        extra["swamped_by_variable"][run.label] = dict(top)
    for seed in spread_seeds:
        other = config.with_(seed=seed)
        a, _ = train_cnn("fp32 masters", other, "mixed_float16")
        b, _ = train_cnn("float16", other, "float16", stats_dtype="float32")
        extra["spread"][seed] = b.test_loss - a.test_loss
    knob = (f"the learning rate: {config.optimizer_text()}, steps of at most about "
            f"{config.learning_rate:g} per weight, below half an fp16 ulp of every weight of "
            f"magnitude {extra['swamp_threshold']:g} or more (BatchNormalization's gammas "
            "start at 1)")
    return ExperimentResult(
        "master-weights", "fp32 master weights vs pure float16 weights (CNN, Adam "
        f"lr {config.learning_rate:g})", config, knob, [mixed, pure], extra, (PURE, MIXED))


def findings(r: ExperimentResult) -> list[str]:
    """What ``master_weights``' numbers say, one sentence per line."""
    mixed, pure = r.runs
    x = r.extra
    lines = [f"{label}: {share:.1%} of weight updates swamped (lost below half an ulp)"
             for label, share in x["swamped_share"].items()]
    top = x["swamped_by_variable"][pure.label]
    if top:
        lines.append("most swamped in pure float16: " + ", ".join(
            f"{name} {count:,}" for name, count in top.items()))
    lines.append(
        f"held-out loss {r.gap(pure.label, mixed.label):+.3f} nats with pure float16 weights "
        f"(accuracy {pure.test_accuracy:.1%} vs {mixed.test_accuracy:.1%}), training loss "
        f"(last 20 steps) {pure.final_loss - mixed.final_loss:+.3f}")
    if x["spread"]:
        lines.append("the same pair from other seeds, held-out loss gap: " + ", ".join(
            f"seed {seed} {gap:+.3f}" for seed, gap in x["spread"].items()))
    return lines
