"""The small convolutional network experiment 3 trains, and one run of it measured:
``CNNConfig``, ``build_cnn``, ``pixel_data``, ``train_cnn`` -> ``LMRun`` (the same record as a
language-model run, with ``test_accuracy``).

The model is the usual Keras image classifier with BatchNormalization doing the normalizing:
``Conv2D(16, 3, "same") -> BatchNormalization -> ReLU -> MaxPooling2D -> Conv2D(32, 3, "same")
-> BatchNormalization -> ReLU -> GlobalAveragePooling2D -> Dense(10)``, on scikit-learn's 8x8
digits given as 8-bit pixel values 0-255 (the ink counts 0-16 times 255/16, rounded: the scale
MNIST's ``load_data`` and image files give), not divided by 255. The first convolution's
outputs then lie in the hundreds, and they grow while SGD trains (a convolution followed by
BatchNormalization is free to grow its kernel: the normalization undoes its scale). Every run
of an experiment draws the same weights (``seed``) and sees the same batches in the same order.
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

import fpsim
import nn
import nn.experiments.progress as progress
from fpsim.monitor import Monitor
from nn import layers
from nn.datasets import load_digits
from nn.experiments.lm import LMRun, final_loss, first_nonfinite_step
from nn.losses import SparseCategoricalCrossentropy

PIXEL_MAX = 255  # 8-bit pixels


@dataclass(frozen=True)
class CNNConfig:
    """The network's size and training: ``steps`` batches of ``batch_size`` digits, the
    training set reshuffled each pass (``default_rng([seed, pass])``). ``pixel_max`` is the
    inputs' scale: 255 (8-bit pixels as stored) or 1 (divided by 255, the other idiom).
    ``bn_momentum`` 0.9 is PyTorch's default (its momentum=0.1); Keras's 0.99 leaves the
    moving statistics far from the batch statistics after 200 steps, so the float32 model's
    held-out accuracy would lag its training. ``optimizer`` is "sgd" (with ``momentum``) or
    "adam" (Keras's defaults beside the learning rate)."""

    filters: tuple[int, ...] = (16, 32)
    kernel_size: int = 3
    pixel_max: int = PIXEL_MAX
    bn_momentum: float = 0.9
    batch_size: int = 64
    steps: int = 200
    learning_rate: float = 0.1
    momentum: float = 0.9
    seed: int = 0
    optimizer: str = "sgd"

    def describe(self) -> str:
        filters = ", ".join(map(str, self.filters))
        return (f"CNN on 8x8 digits, pixels 0-{self.pixel_max}: Conv2D {self.kernel_size}x"
                f"{self.kernel_size} ({filters}) + BN (momentum {self.bn_momentum:g}) + ReLU, "
                f"max-pool between, GAP, Dense 10; {self.steps} steps of "
                f"{self.optimizer_text()}, batch {self.batch_size}, seed {self.seed}")

    def optimizer_text(self) -> str:
        if self.optimizer == "adam":
            return f"Adam lr {self.learning_rate:g}"
        return f"SGD lr {self.learning_rate:g} momentum {self.momentum:g}"

    def make_optimizer(self) -> Any:
        """A new optimizer as configured."""
        if self.optimizer == "sgd":
            return nn.SGD(self.learning_rate, momentum=self.momentum)
        if self.optimizer == "adam":
            return nn.Adam(self.learning_rate)
        raise ValueError(f"CNNConfig: optimizer must be 'sgd' or 'adam', got "
                         f"{self.optimizer!r}")

    def with_(self, **changes: Any) -> CNNConfig:
        return replace(self, **changes)


def build_cnn(config: CNNConfig, policy: str, *, stats_dtype: str | None = None,
              accumulator: str | None = None) -> nn.Sequential:
    """The network under ``policy``, weights from ``config.seed``; ``stats_dtype`` (e.g.
    "float16") is every BatchNormalization's ``statistics_dtype`` (its statistics and the
    normalization in that format, its variables in the policy's); ``accumulator`` (e.g.
    "float16") is every Conv2D's accumulator format, forward and backward (None: fp32)."""
    nn.set_random_seed(config.seed)
    with nn.policy_scope(policy):
        stack: list[Any] = []
        for i, filters in enumerate(config.filters, 1):
            if i > 1:
                stack.append(layers.MaxPooling2D(name=f"pool{i - 1}"))
            stack += [layers.Conv2D(filters, config.kernel_size, padding="same", name=f"conv{i}",
                                    accumulator=accumulator),
                      layers.BatchNormalization(momentum=config.bn_momentum, name=f"bn{i}",
                                                statistics_dtype=stats_dtype),
                      layers.ReLU(name=f"relu{i}")]
        model = nn.Sequential([*stack, layers.GlobalAveragePooling2D(name="pool"),
                               nn.Dense(10, name="logits")])
        with nn.no_grad():  # build now: the weights are drawn right after the seed
            model(np.zeros((1, 8, 8, 1), np.float32))
    return model


@functools.lru_cache(maxsize=4)
def pixel_data(pixel_max: int, samples: int, seed: int = 0) -> Any:
    """``((x, y), (x_test, y_test))``: the digits as (n, 8, 8, 1) float32 pixels
    ``round(count / 16 * pixel_max)``; the training set repeated, reshuffled each pass, to
    ``samples`` images (cached: every run shares them)."""
    (x, y), (x_test, y_test) = load_digits(flatten=False, seed=seed)

    def pixels(a: np.ndarray) -> np.ndarray:
        return np.round(a * np.float32(pixel_max)).astype(np.float32)[..., None]

    passes = -(-samples // len(x))
    order = np.concatenate([np.random.default_rng([seed, p]).permutation(len(x))
                            for p in range(passes)])[:samples]
    return (pixels(x)[order], y[order]), (pixels(x_test), y_test)


def data_for(config: CNNConfig) -> Any:
    return pixel_data(config.pixel_max, config.batch_size * config.steps, config.seed)


def batch_norms(model: Any) -> list[Any]:
    """The model's BatchNormalization layers, in order."""
    return [layer for layer in model.layers if isinstance(layer, layers.BatchNormalization)]


class StepProbe:
    """A re-iterable dataset of ``(x, y)`` batches for ``Model.fit`` that looks at the model
    between steps: after step k it records, for each BatchNormalization, how many channels'
    moving variance is not finite (``dead[k]``, one count per layer) and, when ``monitor`` is
    given, the overflow events that step made at each monitor site (``overflows[k]``)."""

    def __init__(self, x: np.ndarray, y: np.ndarray, batch_size: int, model: Any,
                 monitor: Monitor | None = None, tick: Callable[[], Any] = lambda: None
                 ) -> None:
        self.x, self.y, self.batch_size = x, y, batch_size
        self.tick = tick  # called after each step (a progress bar's)
        self.model = model
        self.norms = batch_norms(model)
        self.monitor = monitor
        self.dead: list[list[int]] = []
        self.overflows: list[dict[str, tuple[int, int]]] = []  # site -> (overflow, elements)
        self._seen: dict[str, tuple[int, int]] = {}

    def _record(self) -> None:
        self.tick()
        self.dead.append([int(np.count_nonzero(~np.isfinite(b.moving_variance.data)))
                          for b in self.norms])
        if self.monitor is None:
            return
        now = {site: (c.get("overflow", 0), c["elements"])
               for site, c in self.monitor.counts.items()}
        step = {site: (o - self._seen.get(site, (0, 0))[0], n - self._seen.get(site, (0, 0))[1])
                for site, (o, n) in now.items()}
        self.overflows.append({s: v for s, v in step.items() if v[0]})
        self._seen = now

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for i in range(0, len(self.x), self.batch_size):
            if i:
                self._record()  # the previous step has run
            yield self.x[i:i + self.batch_size], self.y[i:i + self.batch_size]
        self._record()

    def first_overflow(self, keep: Callable[[str], bool] = lambda site: True
                       ) -> tuple[int, str, int] | None:
        """(step, site, values overflowed there in that step) of the first overflow the
        monitor saw at a site ``keep`` accepts (the alphabetically first site if a step has
        several), or None."""
        for step, events in enumerate(self.overflows):
            kept = sorted(site for site in events if keep(site))
            if kept:
                return step, kept[0], events[kept[0]][0]
        return None


def train_cnn(label: str, config: CNNConfig, policy: str, *, stats_dtype: str | None = None,
              accumulator: str | None = None, loss_scale: str | float = "dynamic",
              watch: bool = False) -> tuple[LMRun, StepProbe]:
    """Train ``build_cnn(config, policy, stats_dtype=..., accumulator=...)`` for
    ``config.steps`` steps and measure it: held-out loss and accuracy (inference mode: the
    moving statistics), the last steps' training loss, skipped steps, the first step whose
    loss was not finite. The probe has the per-step BatchNormalization state and, with
    ``watch``, every rounding's overflow events per step (fpsim.monitor; slower)."""
    (x, y), (x_test, y_test) = data_for(config)
    model = build_cnn(config, policy, stats_dtype=stats_dtype, accumulator=accumulator)
    model.compile(config.make_optimizer(), SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    start = time.perf_counter()
    monitor = fpsim.monitor() if watch else None
    with (progress.variant_bar(label, -(-len(x) // config.batch_size)) as tick,
          monitor if monitor is not None else contextlib.nullcontext()):
        probe = StepProbe(x, y, config.batch_size, model, monitor, tick)
        history = model.fit(probe, epochs=1, verbose=0, loss_scale=loss_scale,
                            telemetry=False)
    with np.errstate(all="ignore"):  # a dead channel evaluates through inf statistics
        scores = model.evaluate(x_test, y_test, batch_size=512, verbose=0, return_dict=True)
    assert isinstance(scores, dict)
    test_loss = float(scores["loss"])
    scaler = model.loss_scale_optimizer
    run = LMRun(
        label=label, policy=policy,
        test_loss=test_loss if math.isfinite(test_loss) else math.nan,
        final_loss=final_loss(history), activation_underflow=0.0, activation_subnormal=0.0,
        weight_underflow=0.0, swamped_updates=int(sum(history.swamped_updates)),
        skipped_steps=history.skipped_steps,
        final_loss_scale=None if scaler is None else scaler.loss_scale,
        nan_step=first_nonfinite_step(history), wall_time=time.perf_counter() - start,
        history=history, telemetry=False, test_accuracy=float(scores["accuracy"]))
    return run, probe
