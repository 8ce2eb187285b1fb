"""bf16's price in precision on a task that asks for more (``fpsim compare --experiment
reconstruction``): an MLP autoencoder that reconstructs the 8x8 digits pixel by pixel, trained
under float32, mixed_float16 (dynamic loss scaling) and mixed_bfloat16 (no scaling) from the
same weights on the same batches.

The model is ``Dense(256, relu) -> Dense(64)`` on the 64 pixels (ink counts / 16, in [0, 1]:
``nn.datasets.load_digits``), the loss Keras's mean squared error over batch x 64 pixels,
trained with Adam. Wide enough to pass the pixels through, the float32 model reconstructs them
to an rms error of about 1.6% of the pixel range within 300 steps. That is finer than bf16
carries: its 8 significant bits space values 2^-8 ~ 0.4% apart (relative), so every activation
and every product the forward pass rounds to bf16 adds an error of that order, while fp16's
11 bits (2^-11 ~ 0.05%) stay below the model's own error. A classifier's cross-entropy does
not see this (``--experiment bf16``: argmax survives rounding); a regression to 1-2% does.

The knob is the task's precision (a per-pixel reconstruction fit to ~1.6% rms), printed in the
findings; nothing else is staged: the sizes are the usual ones, and Adam's lr 3e-3 is ours.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

import nn
import nn.experiments.progress as progress
from nn.datasets import load_digits
from nn.experiments.lm import LMRun, final_loss, first_nonfinite_step
from nn.experiments.result import ExperimentResult
from nn.losses import MeanSquaredError

PIXELS = 64  # 8x8


@dataclass(frozen=True)
class ReconstructionConfig:
    """The autoencoder's width and training: ``steps`` batches of ``batch_size`` digits, the
    training set reshuffled each pass (``default_rng([seed, pass])``); ``seed`` draws the
    weights and the batch order. Adam at ``learning_rate`` (ours)."""

    hidden: int = 256
    batch_size: int = 256
    steps: int = 300
    learning_rate: float = 3e-3
    seed: int = 0

    @property
    def positions(self) -> int:
        """How many per-pixel squared errors one step averages: batch_size x 64."""
        return self.batch_size * PIXELS

    def describe(self) -> str:
        return (f"MLP autoencoder on 8x8 digits (pixels in [0, 1]): 64 -> Dense {self.hidden} "
                f"relu -> Dense 64, MSE over batch {self.batch_size} x 64 pixels; {self.steps} "
                f"steps of Adam lr {self.learning_rate:g}, seed {self.seed}")

    def make_optimizer(self) -> Any:
        return nn.Adam(self.learning_rate)

    def with_(self, **changes: Any) -> ReconstructionConfig:
        return replace(self, **changes)


RECONSTRUCTION_DEFAULT = ReconstructionConfig()


def build_autoencoder(config: ReconstructionConfig, policy: str) -> nn.Sequential:
    """The autoencoder under ``policy``, weights from ``config.seed``."""
    nn.set_random_seed(config.seed)
    with nn.policy_scope(policy):
        model = nn.Sequential([nn.Dense(config.hidden, activation="relu", name="encode"),
                               nn.Dense(PIXELS, name="decode")])
        with nn.no_grad():  # build now: the weights are drawn right after the seed
            model(np.zeros((1, PIXELS), np.float32))
    return model


@functools.lru_cache(maxsize=4)
def digit_pixels(samples: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(x, x_test)``: ``samples`` training digits (the training set reshuffled each pass)
    and the 359 held-out ones, (n, 64) float32 in [0, 1] (cached: every run shares them)."""
    (x, _), (x_test, _) = load_digits(seed=0)
    passes = -(-samples // len(x))
    order = np.concatenate([np.random.default_rng([seed, p]).permutation(len(x))
                            for p in range(passes)])[:samples]
    return x[order], x_test


def train_autoencoder(label: str, config: ReconstructionConfig, policy: str,
                      loss_scale: str = "none") -> LMRun:
    """Train ``build_autoencoder(config, policy)`` for ``config.steps`` steps and measure it:
    held-out MSE, the last steps' training loss, the first step whose loss was not finite."""
    x, x_test = digit_pixels(config.batch_size * config.steps, config.seed)
    model = build_autoencoder(config, policy)
    model.compile(config.make_optimizer(), MeanSquaredError())
    start = time.perf_counter()
    with progress.variant_bar(label, config.steps) as tick:
        history = model.fit(progress.TickingBatches(x, x, config.batch_size, tick), epochs=1,
                            verbose=0, loss_scale=loss_scale, telemetry=False)
    with np.errstate(all="ignore"):
        scores = model.evaluate(x_test, x_test, batch_size=512, verbose=0, return_dict=True)
    assert isinstance(scores, dict)
    test_loss = float(scores["loss"])
    scaler = model.loss_scale_optimizer
    return LMRun(
        label=label, policy=policy, test_loss=test_loss if math.isfinite(test_loss) else math.nan,
        final_loss=final_loss(history), activation_underflow=0.0, activation_subnormal=0.0,
        weight_underflow=0.0, swamped_updates=int(sum(history.swamped_updates)),
        skipped_steps=history.skipped_steps,
        final_loss_scale=None if scaler is None else scaler.loss_scale,
        nan_step=first_nonfinite_step(history), wall_time=time.perf_counter() - start,
        history=history, telemetry=False)


FP32, FP16, BF16 = "float32", "mixed_float16 + dynamic", "mixed_bfloat16"


@progress.option
def bf16_reconstruction(config: ReconstructionConfig = RECONSTRUCTION_DEFAULT, *,
                   progress: bool = False) -> ExperimentResult:
    """float32, mixed_float16 with dynamic loss scaling and mixed_bfloat16 (no scaling) on the
    autoencoder (see the module docstring). ``extra["rms_float32"]``: the float32 model's
    held-out rms error per pixel; ``extra["positions"]``: the squared errors a step
    averages."""
    runs = [train_autoencoder(FP32, config, "float32"),
            train_autoencoder(FP16, config, "mixed_float16", loss_scale="dynamic"),
            train_autoencoder(BF16, config, "mixed_bfloat16")]
    rms = math.sqrt(runs[0].test_loss) if math.isfinite(runs[0].test_loss) else math.nan
    knob = (f"the task's precision: a per-pixel reconstruction that float32 fits to {rms:.4f} "
            "rms (pixels in [0, 1]), finer than bf16's 2^-8 relative spacing")
    return ExperimentResult(
        "reconstruction", "per-pixel reconstruction (MLP autoencoder): mixed_bfloat16 vs "
        "float32 and mixed_float16", config, knob, runs,
        {"rms_float32": rms, "positions": config.positions}, (BF16, FP32))


def findings(r: ExperimentResult) -> list[str]:
    """What ``reconstruction``'s numbers say, one sentence per line."""
    fp32 = r.run(FP32).test_loss
    return [
        f"float32: held-out MSE {fp32:.3e} (rms {r.extra['rms_float32']:.4f} per pixel)",
        *(f"{label}: held-out MSE {r.run(label).test_loss:.3e}, {r.gap(label, FP32):+.2e} vs "
          f"float32 ({r.gap(label, FP32) / fp32:+.1%})" for label in (FP16, BF16)),
    ]
