"""The small character-level transformer language model the experiments train, and one run of
it measured: ``LMConfig``, ``build_lm``, ``lm_data``, ``train_lm`` -> ``LMRun``.

The model is Keras's transformer example at a size that trains in seconds on two cores:
``TokenAndPositionEmbedding(128, T, d)``, ``blocks`` x ``TransformerBlock(d, heads, ff)``
(post-norm, causal) and ``Dense(128)`` logits, trained for next-character prediction on
Python's own documentation (``nn.datasets.text``), with the cross-entropy averaged over
batch x positions as Keras and PyTorch average it. Every run of an experiment draws the same
weights (``seed``) and sees the same batches in the same order.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

import nn
import nn.experiments.progress as progress
from nn import layers
from nn.datasets import text
from nn.functions.accumulate import accumulator_format
from nn.losses import SparseCategoricalCrossentropy
from nn.models.model import Model
from nn.training.history import History


@dataclass(frozen=True)
class LMConfig:
    """The language model's size and training; ``steps`` batches of ``batch_size`` windows of
    ``sequence_length`` characters, so the loss averages over batch_size x sequence_length."""

    sequence_length: int = 64
    batch_size: int = 32
    embed_dim: int = 32
    num_heads: int = 2
    ff_dim: int = 64
    blocks: int = 1
    normalize_first: bool = False
    epsilon: float = 1e-3
    steps: int = 150
    optimizer: str = "adam"
    learning_rate: float = 3e-3
    momentum: float = 0.9
    seed: int = 0

    @property
    def positions(self) -> int:
        """How many per-position losses one step averages: batch_size x sequence_length."""
        return self.batch_size * self.sequence_length

    def describe(self) -> str:
        norm = "pre-norm " if self.normalize_first else ""
        eps = "" if self.epsilon == 1e-3 else f", LayerNorm epsilon {self.epsilon:g}"
        return (f"char LM on Python's docs: {self.blocks} {norm}block(s), d={self.embed_dim}, "
                f"{self.num_heads} heads, ff {self.ff_dim}{eps}; batch {self.batch_size} x "
                f"{self.sequence_length} positions (the loss is their mean), {self.steps} "
                f"steps of {self.optimizer_text()}, seed {self.seed}")

    def optimizer_text(self) -> str:
        if self.optimizer == "sgd":
            return f"SGD lr {self.learning_rate:g} momentum {self.momentum:g}"
        return f"{self.optimizer} lr {self.learning_rate:g}"

    def make_optimizer(self, **kwargs: Any) -> Any:
        """A new optimizer as configured (``kwargs`` go to its constructor)."""
        if self.optimizer == "sgd":
            return nn.SGD(self.learning_rate, momentum=self.momentum, **kwargs)
        if self.optimizer == "adam":
            return nn.Adam(self.learning_rate, **kwargs)
        raise ValueError(f"LMConfig: optimizer must be 'sgd' or 'adam', got {self.optimizer!r}")

    def with_(self, **changes: Any) -> LMConfig:
        return replace(self, **changes)


def build_lm(config: LMConfig, policy: str, *, stats_dtype: str | None = None,
             accumulator: str | None = None, accumulate_in: tuple[str, ...] = ("logits",)
             ) -> nn.Sequential:
    """The language model under ``policy``, weights from ``config.seed``. ``stats_dtype``
    (e.g. "float16") is the blocks' attention and LayerNormalization layers'
    ``statistics_dtype``: their softmax and statistics run in it while their variables keep
    the policy's format; ``accumulator`` is the accumulator format of the layers named in
    ``accumulate_in``: "logits" (the last Dense) and "ff" (every block's two feed-forward
    Dense layers, whose inner dimensions are embed_dim and ff_dim forward and batch x
    positions in the kernel gradients)."""
    unknown = set(accumulate_in) - {"logits", "ff"}
    if unknown:
        raise ValueError(f"build_lm: accumulate_in names layers 'logits' and 'ff', got "
                         f"{sorted(unknown)}")
    nn.set_random_seed(config.seed)
    with nn.policy_scope(policy):
        blocks = [layers.TransformerBlock(config.embed_dim, config.num_heads, config.ff_dim,
                                          epsilon=config.epsilon,
                                          normalize_first=config.normalize_first)
                  for _ in range(config.blocks)]
        if stats_dtype is not None:
            for block in blocks:
                block.attention.statistics_dtype = stats_dtype
                block.ln1.set_statistics_dtype(stats_dtype)
                block.ln2.set_statistics_dtype(stats_dtype)
        if accumulator is not None and "ff" in accumulate_in:
            for block in blocks:
                for dense in (block.ff1, block.ff2):
                    dense.accumulator = accumulator_format(accumulator, "accumulator")
        model = nn.Sequential([
            layers.TokenAndPositionEmbedding(text.VOCABULARY, config.sequence_length,
                                             config.embed_dim),
            *blocks,
            nn.Dense(text.VOCABULARY, accumulator=accumulator if "logits" in accumulate_in
                     else None),
        ])
        with nn.no_grad():  # build now: the weights are drawn right after the seed
            model(np.zeros((1, config.sequence_length), np.int64))
    return model


@functools.lru_cache(maxsize=4)
def lm_data(sequence_length: int, samples: int, seed: int = 0) -> Any:
    """``((x, y), (x_test, y_test))`` character windows (cached: every run shares them)."""
    return text.char_dataset(sequence_length, samples, seed=seed)


def data_for(config: LMConfig) -> Any:
    return lm_data(config.sequence_length, config.batch_size * config.steps, config.seed)


@dataclass
class LMRun:
    """One training run of the language model, measured."""

    label: str
    policy: str
    test_loss: float
    final_loss: float
    activation_underflow: float
    activation_subnormal: float
    weight_underflow: float
    swamped_updates: int
    skipped_steps: int
    final_loss_scale: float | None
    nan_step: int | None
    wall_time: float
    history: History = field(repr=False)
    telemetry: bool = True  # False: the gradient shares were not counted (they read 0)
    test_accuracy: float | None = None  # held-out accuracy, for a classifier (nn.experiments.cnn)

    def summary(self) -> dict[str, Any]:
        """The plain numbers (no history)."""
        return {k: v for k, v in self.__dict__.items() if k != "history"}


def final_loss(history: History, window: int = 20) -> float:
    """Mean training loss of the last ``window`` steps (NaN if any was not finite)."""
    return float(np.mean(history.step_loss[-window:]))


def first_nonfinite_step(history: History) -> int | None:
    bad = np.flatnonzero(~np.isfinite(np.asarray(history.step_loss, dtype=np.float64)))
    return int(bad[0]) if len(bad) else None


def train_lm(label: str, config: LMConfig, policy: str, optimizer: Any, *,
             loss_scale: str | float = "none", model: Model | None = None,
             telemetry: bool = True) -> LMRun:
    """Train ``model`` (default ``build_lm(config, policy)``) for ``config.steps`` steps with
    ``optimizer`` and measure it: held-out loss, the last steps' training loss, the shares of
    activation/weight gradients flushed to zero, swamped updates, skipped steps, the first
    step whose loss was not finite."""
    (x, y), (x_test, y_test) = data_for(config)
    model = build_lm(config, policy) if model is None else model
    model.compile(optimizer, SparseCategoricalCrossentropy(from_logits=True))
    start = time.perf_counter()
    with progress.variant_bar(label, len(x) // config.batch_size) as tick:
        if progress.shown():  # the same batches, handed out one by one to tick the bar
            history = model.fit(progress.TickingBatches(x, y, config.batch_size, tick),
                                epochs=1, verbose=0, loss_scale=loss_scale,
                                telemetry=telemetry)
        else:
            history = model.fit(x, y, batch_size=config.batch_size, epochs=1, shuffle=False,
                                verbose=0, loss_scale=loss_scale, telemetry=telemetry)
    with np.errstate(all="ignore"):  # a diverged run evaluates to NaN, reported as such
        scores = model.evaluate(x_test, y_test, batch_size=256, verbose=0, return_dict=True)
    assert isinstance(scores, dict)
    test_loss = float(scores["loss"])
    scaler = model.loss_scale_optimizer
    return LMRun(
        label=label, policy=policy, test_loss=test_loss if math.isfinite(test_loss) else math.nan,
        final_loss=final_loss(history),
        activation_underflow=history.gradient_share("underflow", "activation"),
        activation_subnormal=history.gradient_share("subnormal", "activation"),
        weight_underflow=history.gradient_share("underflow", "weight"),
        swamped_updates=int(sum(history.swamped_updates)),
        skipped_steps=history.skipped_steps,
        final_loss_scale=None if scaler is None else scaler.loss_scale,
        nan_step=first_nonfinite_step(history), wall_time=time.perf_counter() - start,
        history=history, telemetry=telemetry)
