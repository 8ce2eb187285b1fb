"""Experiment 3, fp32 for normalization statistics (``fpsim compare --experiment statistics``):
the CNN of ``nn.experiments.cnn`` under mixed_float16 with its BatchNormalization statistics in
fp32 (Keras's rule) against the same layers given ``statistics_dtype="float16"`` (mean,
variance and normalization in fp16; the weights stay fp32 masters and both runs are
loss-scaled, so the statistics' format is the only difference).

The knob is real and printed: the images are 8-bit pixels 0-255, not divided by 255, and the
BatchNormalization after the first convolution does the normalizing. That convolution's
outputs deviate from their channel mean by up to ~160 at initialization, and SGD grows its
kernel (BatchNormalization undoes the kernel's scale, so nothing holds it back) until a
deviation passes 256: its square passes fp16's max 65504, the channel's batch variance is inf,
the channel's output collapses to beta and its gradient to zero, and the moving variance
becomes inf for good, so at inference the channel is dead. The fp32 statistics never notice.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import fpsim
import nn
import nn.experiments.progress as progress
from nn.engine import sites
from nn.experiments.cnn import CNNConfig, data_for, train_cnn
from nn.experiments.result import ExperimentResult
from nn.experiments.statistics_lm import FP16_SQUARE_LIMIT

CNN_DEFAULT = CNNConfig()
SCALED = "fp16 statistics, pixels / 255"  # the third run: the knob turned off
PROBE_IMAGES = 256  # held-out images on which the stem's deviations are measured


@progress.option
def fp32_statistics(config: CNNConfig = CNN_DEFAULT, *, progress: bool = False
                    ) -> ExperimentResult:
    """Train the CNN with fp32 and with fp16 BatchNormalization statistics (see the module
    docstring), and a third time with fp16 statistics on pixels divided by 255 (the knob
    turned off: ``pixel_max=1``). ``extra`` (the fp16 run's story, step by step):

    - ``first_overflow_step`` / ``first_overflow_site`` / ``first_overflow_values``: the first
      step whose forward pass overflowed (fpsim.monitor), where, and how many values;
    - ``first_dead_step``: the first step after which a channel's moving variance was inf;
      ``all_dead_step``: the step after which every channel of the first BatchNormalization
      was; ``dead_channels``: per BatchNormalization, the channels dead at the end, out of
      ``channels``;
    - per run label: ``overflow_share``, the share of the first BatchNormalization's squared
      deviations ``(x - mean)^2`` beyond fp16's max on ``PROBE_IMAGES`` held-out images
      (``stem_deviations``), ``largest_deviation`` their largest ``|x - mean|``, ``skipped``
      the steps skipped for non-finite gradients;
    - ``scaled_dead_channels``: the third run's dead channels per BatchNormalization;
    - ``squared_deviations``: the fp32-statistics model's squared deviations (for the plot).
    """
    fp32, fp32_probe = train_cnn("fp32 statistics", config, "mixed_float16")
    fp16, probe = train_cnn("fp16 statistics", config, "mixed_float16", stats_dtype="float16",
                            watch=True)
    scaled_config = config.with_(pixel_max=1)
    scaled, scaled_probe = train_cnn(SCALED, scaled_config, "mixed_float16",
                                     stats_dtype="float16")
    first = probe.first_overflow(lambda site: not is_backward(site))
    first_step, first_site, first_values = first if first is not None else (None, None, 0)
    dead = np.asarray(probe.dead)
    stem_dead = np.flatnonzero(dead[:, 0] == config.filters[0])
    extra: dict[str, Any] = {
        "first_overflow_step": first_step, "first_overflow_site": first_site,
        "first_overflow_values": first_values,
        "first_dead_step": _first(np.flatnonzero(dead.sum(axis=1) > 0)),
        "all_dead_step": _first(stem_dead),
        "dead_channels": [int(n) for n in dead[-1]], "channels": list(config.filters),
        "overflow_share": {}, "largest_deviation": {}, "skipped": {},
    }
    extra["scaled_dead_channels"] = [int(n) for n in scaled_probe.dead[-1]]
    for run, model, c in ((fp32, fp32_probe.model, config), (fp16, probe.model, config),
                          (scaled, scaled_probe.model, scaled_config)):
        deviations = stem_deviations(model, c)
        extra["overflow_share"][run.label] = squares_overflow_share(deviations)
        extra["largest_deviation"][run.label] = float(np.max(np.abs(deviations)))
        extra["skipped"][run.label] = [i for i, s in enumerate(run.history.step_skipped) if s]
        if run is fp32:
            extra["squared_deviations"] = deviations.astype(np.float64) ** 2
    knob = (f"the inputs: 8-bit pixels 0-{config.pixel_max}, not divided by 255 (the first "
            f"BatchNormalization does the normalizing), and SGD lr {config.learning_rate:g} "
            "growing the first convolution's kernel; the third run turns it off (pixels / 255)")
    return ExperimentResult(
        "statistics", "fp32 vs fp16 BatchNormalization statistics (CNN, raw pixels)", config,
        knob, [fp32, fp16, scaled], extra, ("fp16 statistics", "fp32 statistics"))


def _first(steps: np.ndarray) -> int | None:
    return int(steps[0]) if len(steps) else None


def is_backward(site: str) -> bool:
    """True for a monitor site of the backward pass: a part of its name is ``grad`` (an op in
    the backward name scope, a variable's gradient) or starts with ``grad_`` (a layer's
    activation or weight gradient, an op's input gradient); see ``nn.sites``."""
    return any(part == sites.GRAD or part.startswith(f"{sites.GRAD}_")
               for part in site.split("/"))


def stem_deviations(model: Any, config: CNNConfig) -> np.ndarray:
    """``x - mean(x)`` at the first BatchNormalization's input (the first convolution's
    output, as the model rounds it), each channel's mean over ``PROBE_IMAGES`` held-out images
    and their pixels, computed in float64: the values whose squares the statistics hold."""
    _, (x_test, _) = data_for(config)
    with nn.no_grad():
        h = model.layers[0](x_test[:PROBE_IMAGES], training=True).data.astype(np.float64)
    return h - h.mean(axis=(0, 1, 2))


def squares_overflow_share(deviations: np.ndarray) -> float:
    """The share of ``deviations`` whose square, rounded to fp16, is inf: ``|d| >
    FP16_SQUARE_LIMIT`` (256, to within fp16's rounding), where an fp16 variance overflows."""
    with np.errstate(over="ignore"):
        squares = fpsim.round(fpsim.round(deviations, "fp16") ** 2, "fp16")
    return float(np.mean(np.isinf(squares)))


def findings(r: ExperimentResult) -> list[str]:
    """What ``fp32_statistics``' numbers say, one sentence per line."""
    fp32, fp16, scaled = r.runs
    x = r.extra
    lines = []
    if x["first_overflow_step"] is None:
        lines.append("fp16 statistics: no forward overflow in "
                     f"{r.config.steps} steps (largest |x - mean| "
                     f"{x['largest_deviation'][fp16.label]:.0f})")
    else:
        lines.append(
            f"fp16 statistics: first overflow at step {x['first_overflow_step']}, site "
            f"{x['first_overflow_site']} ({x['first_overflow_values']} value(s): |x - mean| > "
            f"{FP16_SQUARE_LIMIT:g}, its square > 65504); first channel dead (moving variance "
            f"inf) after step {x['first_dead_step']}, all {x['channels'][0]} of the first "
            f"BatchNormalization after step {x['all_dead_step']}")
    lines += [
        f"dead channels at the end: {x['dead_channels']} of {x['channels']}",
        "share of the first BatchNormalization's (x - mean)^2 beyond fp16's max on "
        f"{PROBE_IMAGES} held-out images: " + ", ".join(
            f"{label} {share:.2%} (largest |x - mean| {x['largest_deviation'][label]:.0f})"
            for label, share in x["overflow_share"].items()),
        f"held-out accuracy {fp16.test_accuracy:.1%} with fp16 statistics vs "
        f"{fp32.test_accuracy:.1%} with fp32; loss {r.gap(fp16.label, fp32.label):+.3f} nats",
        f"the knob turned off (pixels / 255): fp16 statistics reach "
        f"{scaled.test_accuracy:.1%}, dead channels {x['scaled_dead_channels']}",
        "steps skipped for non-finite gradients: " + ", ".join(
            f"{label} {len(steps)}" for label, steps in x["skipped"].items()),
    ]
    return lines
