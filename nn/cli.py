"""The ``fpsim train`` and ``fpsim compare`` commands (fpsim/cli.py imports this module lazily).

``fpsim compare`` is the project's main job: the same MLP trained on the digits data under
five precision set-ups, one table and one picture.

The setting, chosen so that fp16's narrow range matters (digits is otherwise too easy):

- The loss is the mean cross-entropy times ``LOSS_WEIGHT = 2**-18``, as when a per-sample loss
  is averaged over a very large effective batch (gradient accumulation over many micro-batches,
  or per-token averaging in a language model). Every gradient is then 2**18 times smaller:
  the logits' gradient (p - onehot) / 64 * 2**-18 is at most 2**-24, fp16's smallest
  subnormal; the many entries at or below 2**-25 round to zero and what survives is
  subnormal (a few significant bits at most).
- The SGD learning rate is multiplied by 2**18 to compensate. Both factors are powers of two,
  so the float32 run is *bit-identical* to plain SGD (lr 0.05, momentum 0.9) on the plain loss:
  the setting changes nothing but where the gradients lie on fp16's exponent scale.
- Under mixed_float16 without loss scaling a large share of the activation gradients flush to
  zero and training ends far worse; the dynamic loss scale (Keras's rule, starting at 2**15,
  but doubling after ``GROWTH_STEPS = 10`` finite steps instead of 2000 so that a short run
  shows the climb, the overflow, the skipped step and the halving) lifts them back into range
  and matches float32; mixed_bfloat16 needs no scaling (fp32's exponent range); pure float16
  (fp16 weights, no master copy) also loses updates to swamping.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import nn
from nn.history import History
from nn.loss_scale import LossScaleOptimizer
from nn.losses import SparseCategoricalCrossentropy
from nn.model import Model, WeightedLoss

HIDDEN = (64, 64)
LOSS_WEIGHT = 2.0**-18
LEARNING_RATE = 0.05
MOMENTUM = 0.9
BATCH_SIZE = 64
EPOCHS = 20
QUICK_EPOCHS = 4
GROWTH_STEPS = 10
SEED = 0

RUNS: tuple[tuple[str, str, str], ...] = (
    # (label, policy, loss scaling)
    ("float32", "float32", "none"),
    ("mixed_float16, no scaling", "mixed_float16", "none"),
    ("mixed_float16 + dynamic", "mixed_float16", "dynamic"),
    ("mixed_bfloat16", "mixed_bfloat16", "none"),
    ("float16 (no master)", "float16", "none"),
)


def parse_loss_scale(text: str | None) -> str | float | None:
    """``--loss-scale``: "dynamic", "none" or a positive number (a fixed scale)."""
    if text is None:
        return None
    key = text.strip().lower()
    if key in ("dynamic", "none"):
        return key
    try:
        value = float(key)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"--loss-scale must be 'dynamic', 'none' or a positive number, got "
                         f"{text!r}")
    return value


def build_mlp(policy: str, hidden: tuple[int, ...] = HIDDEN, seed: int = SEED,
              classes: int = 10) -> nn.Sequential:
    """Dense-relu layers and a Dense logits layer under ``policy``, initialised from ``seed``."""
    nn.set_random_seed(seed)
    with nn.policy_scope(policy):
        layers = [nn.Dense(h, activation="relu") for h in hidden] + [nn.Dense(classes)]
        return nn.Sequential(layers)


def make_optimizer(name: str, learning_rate: float | None = None) -> nn.optimizers.Optimizer:
    """"sgd" (momentum 0.9, lr 0.05), "rmsprop" (lr 1e-3) or "adam" (lr 1e-3)."""
    name = name.lower()
    if name == "sgd":
        return nn.SGD(LEARNING_RATE if learning_rate is None else learning_rate,
                      momentum=MOMENTUM)
    if name == "rmsprop":
        return nn.RMSprop(1e-3 if learning_rate is None else learning_rate)
    if name == "adam":
        return nn.Adam(1e-3 if learning_rate is None else learning_rate)
    raise ValueError(f"unknown optimizer {name!r}; known: sgd, rmsprop, adam")


# --- compare --------------------------------------------------------------------------------------
@dataclass
class RunResult:
    """One row of the ``fpsim compare`` table."""

    label: str
    policy: str
    loss_scaling: str
    test_accuracy: float
    skipped_steps: int
    final_loss_scale: float | None
    activation_underflow: float
    swamped_updates: int
    wall_time: float
    history: History


def story_model(policy: str, loss_scaling: str, epochs_hint: int | None = None) -> Model:
    """The compare set-up's MLP, compiled with the weighted loss and scaled SGD (see above)."""
    model = build_mlp(policy)
    opt: Any = nn.SGD(LEARNING_RATE / LOSS_WEIGHT, momentum=MOMENTUM)
    if loss_scaling == "dynamic":
        opt = LossScaleOptimizer(opt, dynamic_growth_steps=GROWTH_STEPS)
    loss = WeightedLoss(SparseCategoricalCrossentropy(from_logits=True), LOSS_WEIGHT)
    model.compile(opt, loss, metrics=["accuracy"])
    return model


def run_story(label: str, policy: str, loss_scaling: str, data: Any, epochs: int,
              verbose: int = 0) -> RunResult:
    """Train one compare configuration and measure it."""
    (x, y), (x_test, y_test) = data
    model = story_model(policy, loss_scaling)
    start = time.perf_counter()
    history = model.fit(x, y, batch_size=BATCH_SIZE, epochs=epochs, seed=SEED, verbose=verbose,
                        loss_scale=None if loss_scaling == "dynamic" else "none")
    _, accuracy = model.evaluate(x_test, y_test, batch_size=256)
    wall = time.perf_counter() - start
    scaler = model.loss_scale_optimizer
    return RunResult(
        label=label, policy=policy, loss_scaling=loss_scaling, test_accuracy=float(accuracy),
        skipped_steps=history.skipped_steps,
        final_loss_scale=None if scaler is None else scaler.loss_scale,
        activation_underflow=history.gradient_share("underflow", "activation"),
        swamped_updates=int(sum(history.swamped_updates)), wall_time=wall, history=history)


def run_compare(epochs: int = EPOCHS, verbose: int = 0) -> list[RunResult]:
    """Every configuration of ``RUNS`` on the digits data (same seed, same batches)."""
    data = nn.datasets.load_digits()
    return [run_story(label, policy, scaling, data, epochs, verbose)
            for label, policy, scaling in RUNS]


def compare_table(results: list[RunResult]) -> str:
    """The printed table: one row per configuration."""
    header = ("run", "test acc", "skipped", "final scale", "act. grads -> 0", "swamped",
              "time")
    rows = [header]
    for r in results:
        scale = "-" if r.final_loss_scale is None else f"2^{math.log2(r.final_loss_scale):g}"
        rows.append((r.label, f"{r.test_accuracy:.1%}", str(r.skipped_steps), scale,
                     f"{r.activation_underflow:.1%}", f"{r.swamped_updates:,}",
                     f"{r.wall_time:.1f} s"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(row, widths, strict=True)))
             for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def plot_compare(results: list[RunResult], path: str | Path) -> Path:
    """A PNG: loss curves, the loss-scale timeline, and activation-gradient exponent histograms
    (float32's true gradients and the scaled fp16 ones) against the fp16 range."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import fpsim.plot

    fig, axes = plt.subplots(2, 2, figsize=(13, 8.5), layout="constrained")
    ax = axes[0, 0]
    for r in results:
        epochs = np.arange(1, len(r.history.epoch) + 1)
        ax.plot(epochs, np.asarray(r.history.history["loss"]) / LOSS_WEIGHT, marker=".",
                label=r.label)
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("training cross-entropy (loss / 2^-18)")
    ax.set_title("loss curves")
    ax.legend(fontsize="small")

    ax = axes[0, 1]
    for r in results:
        if r.final_loss_scale is None:
            continue
        h = r.history
        steps = np.arange(len(h.step_loss_scale))
        ax.step(steps, np.log2(h.step_loss_scale), where="post", label=f"{r.label}: scale")
        skipped = np.flatnonzero(h.step_skipped)
        ax.plot(skipped, np.log2(np.asarray(h.step_loss_scale)[skipped]), "rx",
                label=f"skipped steps ({len(skipped)})")
    ax.set_xlabel("step")
    ax.set_ylabel("log2 loss scale")
    ax.set_title(f"dynamic loss scale (x2 after {GROWTH_STEPS} finite steps, /2 on inf)")
    ax.legend(fontsize="small")

    by_label = {r.label: r for r in results}
    if "float32" in by_label:
        ax = axes[1, 0]
        fpsim.plot.exponent_histogram(by_label["float32"].history.exponent_values(), "fp16",
                                      ax=ax)
        share = ax.get_title().split(": ", 1)[-1]
        ax.set_title(f"float32 run: the true activation gradients against fp16's range\n"
                     f"(in fp16: {share}, bin centres rounded)", fontsize="medium")
    if "mixed_float16 + dynamic" in by_label:
        ax = axes[1, 1]
        run = by_label["mixed_float16 + dynamic"]
        fpsim.plot.exponent_histogram(run.history.exponent_values(), "fp16", ax=ax)
        ax.set_title("mixed_float16 + dynamic: activation gradients as stored in fp16 "
                     f"(x loss scale)\n{run.activation_underflow:.1%} flushed to 0 while "
                     "rounding (fpsim.monitor)", fontsize="medium")
    fig.suptitle(f"digits MLP {HIDDEN}, loss x 2^-18, SGD lr {LEARNING_RATE} x 2^18, "
                 f"momentum {MOMENTUM}")
    path = Path(path)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def compare(args: argparse.Namespace) -> int:
    """``fpsim compare [--out DIR] [--epochs E] [--quick]``: table on stdout, PNG in DIR."""
    epochs = args.epochs if args.epochs is not None else (QUICK_EPOCHS if args.quick else EPOCHS)
    if epochs < 1:
        raise ValueError(f"--epochs must be >= 1, got {epochs}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    results = run_compare(epochs)
    print(f"digits, MLP {HIDDEN}, {epochs} epochs, batch {BATCH_SIZE}, seed {SEED}")
    print(compare_table(results))
    png = plot_compare(results, out / "compare.png")
    print(f"wrote {png} ({time.perf_counter() - start:.1f} s in all)")
    return 0


# --- train --------------------------------------------------------------------------------------
def train(args: argparse.Namespace) -> int:
    """``fpsim train --policy P ...``: one MLP on digits, a progress bar, a summary at the end."""
    loss_scale = parse_loss_scale(args.loss_scale)
    if args.epochs < 1 or args.batch_size < 1:
        raise ValueError("--epochs and --batch-size must be >= 1")
    nn.Policy(args.policy)  # an unknown policy name fails here with the list of valid ones
    (x, y), (x_test, y_test) = nn.datasets.load_digits()
    model = build_mlp(args.policy, seed=args.seed)
    model.compile(make_optimizer(args.optimizer),
                  SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    history = model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs, seed=args.seed,
                        verbose=0 if getattr(args, "quiet", False) else 1, loss_scale=loss_scale)
    loss, accuracy = model.evaluate(x_test, y_test, batch_size=256)
    scaler = model.loss_scale_optimizer
    print(f"policy {args.policy}, optimizer {args.optimizer}, {args.epochs} epochs: "
          f"test loss {loss:.4f}, test accuracy {accuracy:.1%}")
    scale = "none" if scaler is None else f"{scaler.loss_scale:g}"
    print(f"loss scale {scale}, skipped steps {history.skipped_steps}, swamped updates "
          f"{sum(history.swamped_updates):,}, {history.wall_time:.1f} s")
    print(history.gradient_table())
    if args.save:
        model.save(args.save)
        print(f"saved {args.save}")
    return 0
