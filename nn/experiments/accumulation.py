"""Experiment 4, fp32 accumulation (``fpsim compare --experiment accumulation``): the CNN of
``nn.experiments.cnn`` (fed 0-255 pixels, fp32 BatchNormalization statistics) under
mixed_float16 with every Conv2D's products accumulated in fp32 against the same layers given
``accumulator="float16"`` (forward and backward; both runs loss-scaled, fp32 masters), trained
on the same batches from the same weights. ``extra["spread"]`` repeats the pair on other seeds,
so the gap can be read against how much it moves from seed to seed.

The knob is real and printed: the batch size. A convolution's kernel gradient sums one
product per image and output pixel, so its inner dimension is batch x height x width:
256 x 8 x 8 = 16384 terms for the first convolution, 256 x 4 x 4 = 4096 for the second. An
fp16 accumulator keeps 11 significant bits of the running sum, so every product smaller than
half an ulp of it is lost (swamped). The images' pixels are all positive and large, so the
first convolution's running sums wander far from the (small) final gradient: the error is
largest there. ``sequential_fp16_sum`` replays that sum, addition by addition.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import fpsim
import nn
import nn.experiments.progress as progress
from nn import layers
from nn.engine.tensor import Tensor
from nn.experiments.cnn import CNNConfig, build_cnn, data_for, train_cnn
from nn.experiments.result import ExperimentResult
from nn.functions.conv import patches
from nn.losses import SparseCategoricalCrossentropy

ACCUMULATION_DEFAULT = CNNConfig(batch_size=256, steps=100)
SMALL_BATCH = 64  # the batch the other CNN experiment uses: the knob turned down
SPREAD_SEEDS = (1, 2)  # the pair trained again on these seeds (extra["spread"])
LOSS_SCALE = 2.0**15  # the dynamic loss scale's start: the gradients the first step sums


@progress.option
def fp32_accumulation(config: CNNConfig = ACCUMULATION_DEFAULT,
                      spread_seeds: tuple[int, ...] = SPREAD_SEEDS, *,
                      progress: bool = False) -> ExperimentResult:
    """Train the CNN with fp32 and with fp16 accumulation in its convolutions (see the module
    docstring). ``extra``:

    - ``inner_dimensions``: per convolution, the terms its kernel gradient sums (batch x
      output height x width);
    - ``swamped_additions`` / ``relative_error``: per convolution, on the first batch (loss
      times ``LOSS_SCALE``), the share of non-zero products whose addition left the fp16
      accumulator unchanged, and the fp16 sum's relative error (2-norm) against the exact
      float64 sum of the same products; ``small_batch``: the same two at batch
      ``SMALL_BATCH`` (the knob turned down);
    - ``spread``: per seed in ``spread_seeds``, the held-out loss gap (fp16 minus fp32
      accumulation) of the pair trained from that seed;
    - ``running_sums``: the first convolution's kernel element whose fp16 sum is furthest
      from exact, its running sum addition by addition, ``(fp16, exact)`` (for the plot).
    """
    fp32, _ = train_cnn("fp32 accumulation", config, "mixed_float16")
    fp16, _ = train_cnn("fp16 accumulation", config, "mixed_float16", accumulator="float16")
    extra: dict[str, Any] = kernel_gradient_sums(config)
    extra["small_batch"] = kernel_gradient_sums(config.with_(batch_size=SMALL_BATCH))
    extra["spread"] = {}
    for seed in spread_seeds:
        other = config.with_(seed=seed)
        a, _ = train_cnn("fp32", other, "mixed_float16")
        b, _ = train_cnn("fp16", other, "mixed_float16", accumulator="float16")
        extra["spread"][seed] = b.test_loss - a.test_loss
    inner = extra["inner_dimensions"]
    knob = (f"the batch size {config.batch_size}: the convolutions' kernel gradients sum batch "
            "x height x width products (" + ", ".join(f"{n} for {name}"
                                                     for name, n in inner.items()) + ")")
    return ExperimentResult(
        "accumulation", "fp32 vs fp16 accumulation in the convolutions (CNN, batch "
        f"{config.batch_size})", config, knob, [fp32, fp16], extra,
        ("fp16 accumulation", "fp32 accumulation"))


def conv_kernel_sums(config: CNNConfig, scale: float = LOSS_SCALE
                     ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per convolution of the mixed_float16 CNN (fp32 accumulation) on the first batch, loss
    times ``scale``: ``(rows, grads)``, the two operands of its kernel gradient
    ``rows^T @ grads`` as the backward pass sees them (float64 arrays holding fp16 values):
    ``rows`` the input's ``kh x kw x in`` patches, one row per image and output pixel,
    ``grads`` the gradient at the convolution's output, one row per the same."""
    (x, y), _ = data_for(config)
    model = build_cnn(config, "mixed_float16")
    loss_fn = SparseCategoricalCrossentropy(from_logits=True)
    inputs: dict[str, Tensor] = {}
    outputs: dict[str, Tensor] = {}
    with nn.GradientTape() as tape:
        h = Tensor(x[:config.batch_size])
        for layer in model.layers:
            if isinstance(layer, layers.Conv2D):
                inputs[layer.name] = h
                h = layer(h, training=True)
                outputs[layer.name] = h
            else:
                h = layer(h, training=True)
        loss = loss_fn(y[:config.batch_size], h) * scale
    grads = tape.gradient(loss, list(outputs.values()))
    sums = {}
    for (name, h_in), g in zip(inputs.items(), grads, strict=True):
        k = config.kernel_size
        cols = patches(Tensor(h_in.data), k, 1, "same").data
        rows = fpsim.round(cols.reshape(-1, k * k * cols.shape[-1]).astype(np.float64), "fp16")
        sums[name] = (rows, g.data.reshape(-1, g.shape[-1]).astype(np.float64))
    return sums


def sequential_fp16_sum(rows: np.ndarray, grads: np.ndarray) -> tuple[np.ndarray, float]:
    """``rows^T @ grads`` summed the way an fp16 accumulator does: products exact, the running
    sum rounded to fp16 (nearest-even) after each addition, rows taken in order (the
    "sequential" model). Returns the fp16 sums and the share of non-zero products whose
    addition left the running sum unchanged (swamped)."""
    acc = np.zeros((rows.shape[1], grads.shape[1]))
    swamped = nonzero = 0
    with np.errstate(over="ignore", invalid="ignore"):
        for r, g in zip(rows, grads, strict=True):
            product = np.outer(r, g)
            new = fpsim.round(acc + product, "fp16")
            live = product != 0
            swamped += int(np.count_nonzero(live & (new == acc)))
            nonzero += int(np.count_nonzero(live))
            acc = new
    return acc, swamped / max(nonzero, 1)


def running_sums(products: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The running sums of ``products`` (exact float64 values) after each addition: in an
    fp16 accumulator (each sum rounded to fp16 by numpy's direct float64 -> float16
    conversion, nearest-even) and exactly (float64; exact enough for a plot)."""
    fp16 = np.empty(len(products))
    acc = np.float16(0)
    for k, p in enumerate(products):
        acc = np.float16(float(acc) + float(p))
        fp16[k] = acc
    return fp16, np.cumsum(products)


def kernel_gradient_sums(config: CNNConfig) -> dict[str, Any]:
    """``inner_dimensions``, ``swamped_additions`` and ``relative_error`` per convolution (see
    ``fp32_accumulation``)."""
    return kernel_gradient_stats(conv_kernel_sums(config))


def kernel_gradient_stats(sums: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """``kernel_gradient_sums``'s numbers from each convolution's ``(rows, grads)`` (as
    ``conv_kernel_sums`` gives them; the torch backend makes its own)."""
    found: dict[str, Any] = {"inner_dimensions": {}, "swamped_additions": {},
                             "relative_error": {}}
    for name, (rows, grads) in sums.items():
        fp16_sum, swamped = sequential_fp16_sum(rows, grads)
        exact = rows.T @ grads
        if not found["inner_dimensions"]:  # the first convolution
            i, j = np.unravel_index(np.argmax(np.abs(fp16_sum - exact)), exact.shape)
            found["running_sums"] = running_sums(rows[:, i] * grads[:, j])
        found["inner_dimensions"][name] = rows.shape[0]
        found["swamped_additions"][name] = swamped
        found["relative_error"][name] = float(np.linalg.norm(fp16_sum - exact)
                                              / np.linalg.norm(exact))
    return found


def findings(r: ExperimentResult) -> list[str]:
    """What ``fp32_accumulation``'s numbers say, one sentence per line."""
    fp32, fp16 = r.runs
    x = r.extra
    small = x["small_batch"]
    lines = [
        "first batch, kernel gradients in an fp16 accumulator: " + "; ".join(
            f"{name} ({n} terms) {x['swamped_additions'][name]:.1%} of additions swamped, "
            f"relative error {x['relative_error'][name]:.1%}"
            for name, n in x["inner_dimensions"].items()),
        f"at batch {SMALL_BATCH}: " + "; ".join(
            f"{name} ({n} terms) {small['swamped_additions'][name]:.1%} swamped, error "
            f"{small['relative_error'][name]:.1%}"
            for name, n in small["inner_dimensions"].items()),
        f"held-out accuracy {fp16.test_accuracy:.1%} with fp16 accumulation vs "
        f"{fp32.test_accuracy:.1%} with fp32; loss {r.gap(fp16.label, fp32.label):+.3f} nats, "
        f"training loss (last 20 steps) {fp16.final_loss - fp32.final_loss:+.3f}",
    ]
    if x["spread"]:
        lines.append("the same pair from other seeds, held-out loss gap: " + ", ".join(
            f"seed {seed} {gap:+.3f}" for seed, gap in x["spread"].items()))
    return lines
