"""One training step of a small CNN and of a one-block transformer LM under nn's policies.

A step is forward, sparse softmax cross-entropy (from logits), backward and an SGD update of the
fp32 master weights. The variants (nn float32, mixed_float16, mixed_bfloat16, and PyTorch CPU
float32 when torch is importable) run on the same data, interleaved round by round, each round
starting one variant later than the last; the table gives each variant's fastest and median
step and the ratios the targets are about:

- nn mixed_float16 / nn float32     (target <= 1.5)
- nn float32 / torch float32        (target <= 2, where torch is installed)

The PyTorch steps run in a child process (benchmarks/torch_models.py): in one process its
OpenMP threads and numpy's OpenBLAS threads spin against each other. Every fpsim and nn kernel
is compiled (or loaded from numba's cache) before the first step.

Run: ``python benchmarks/bench_models.py`` (``--repeats N`` steps per variant). On a busy
shared machine ``OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1`` (numpy's BLAS and PyTorch, whose
child process inherits the environment, each on one thread) gives steadier ratios: with two
threads, a matrix product waits for whichever thread another process has descheduled.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import nn
from nn import layers
from nn.warmup import warmup

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark modules
from bench_train import LR, nn_step  # noqa: E402  (one SGD step for both benchmarks)
from torch_models import TorchProcess  # noqa: E402

POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")
GAP = 0.25  # seconds between the nn steps and the PyTorch steps of a round (rotated_times)

# (name, batch, sizes): CNN on 16x16x3 images, 10 classes; LM with 64 tokens of a 96-symbol
# vocabulary, width 64, 4 heads, feed-forward 128.
CNN = {"batch": 64, "image": (16, 16, 3), "filters": (16, 32), "classes": 10}
LM = {"batch": 32, "length": 64, "vocab": 96, "dim": 64, "heads": 4, "ff": 128}


def cnn_model(policy: str, filters: tuple[int, int] = (16, 32), classes: int = 10,
              seed: int = 0) -> nn.Sequential:
    """Conv-relu-pool twice, global average pooling, a dense classifier."""
    nn.set_random_seed(seed)
    with nn.policy_scope(policy):
        return nn.Sequential([
            layers.Conv2D(filters[0], 3, padding="same", activation="relu"),
            layers.MaxPooling2D(),
            layers.Conv2D(filters[1], 3, padding="same", activation="relu"),
            layers.MaxPooling2D(),
            layers.GlobalAveragePooling2D(),
            nn.Dense(classes),
        ])


def lm_model(policy: str, vocab: int = 96, length: int = 64, dim: int = 64, heads: int = 4,
             ff: int = 128, seed: int = 0) -> nn.Sequential:
    """Token + position embedding, one causal transformer block, a dense head over the vocab."""
    nn.set_random_seed(seed)
    with nn.policy_scope(policy):
        return nn.Sequential([
            layers.TokenAndPositionEmbedding(vocab, length, dim),
            layers.TransformerBlock(dim, heads, ff),
            nn.Dense(vocab),
        ])


def timed(step: Callable[[], object]) -> Callable[[], float]:
    """``step`` as a callable returning its wall time in seconds."""
    def run() -> float:
        t0 = time.perf_counter()
        step()
        return time.perf_counter() - t0
    return run


def rotated_times(groups: list[dict[str, Callable[[], float]]], repeats: int,
                  gap: float = 0.0) -> dict[str, list[float]]:
    """Seconds of each step (each callable returns its own), after one warm-up call of each.

    ``repeats`` rounds; in each, every group runs its steps in turn, round ``r`` starting at
    the group's ``r``-th step, so that no step always runs right after the same neighbour; and
    between two groups the process sleeps ``gap`` seconds, so that one library's threads have
    stopped spinning (OpenBLAS's idle workers spin for about 0.1 s) before the other's start.
    """
    times: dict[str, list[float]] = {k: [] for group in groups for k in group}
    for group in groups:
        for step in group.values():
            step()
    for r in range(repeats):
        for g, group in enumerate(groups):
            if g and gap:
                time.sleep(gap)
            names = list(group)
            for k in names[r % len(names):] + names[:r % len(names)]:
                times[k].append(group[k]())
        if len(groups) > 1 and gap:
            time.sleep(gap)
    return times


def bench(repeats: int, cnn: dict[str, Any] = CNN, lm: dict[str, Any] = LM, seed: int = 0,
          with_torch: bool = True) -> dict[str, list[float]]:
    """Step times (seconds) per variant ("cnn float32", "lm mixed_float16", ...,
    "cnn torch float32" when torch is importable), ``repeats`` rotated rounds after a warm-up
    step of each. The PyTorch steps run in a child process (benchmarks/torch_models.py), after
    the nn steps of each round and ``GAP`` seconds apart from them."""
    rng = np.random.default_rng(seed)
    x_cnn = rng.standard_normal((cnn["batch"], *cnn["image"])).astype(np.float32)
    y_cnn = rng.integers(0, cnn["classes"], cnn["batch"])
    ids = rng.integers(0, lm["vocab"], (lm["batch"], lm["length"] + 1))
    x_lm, y_lm = ids[:, :-1], ids[:, 1:]
    loss_fn = nn.losses.SparseCategoricalCrossentropy(from_logits=True)
    steps: dict[str, Callable[[], float]] = {}
    for policy in POLICIES:
        c = cnn_model(policy, cnn["filters"], cnn["classes"], seed)
        m = lm_model(policy, lm["vocab"], lm["length"], lm["dim"], lm["heads"], lm["ff"], seed)
        steps[f"cnn {policy}"] = timed(lambda c=c: nn_step(c, loss_fn, x_cnn, y_cnn))
        steps[f"lm {policy}"] = timed(lambda m=m: nn_step(m, loss_fn, x_lm, y_lm))
    if not with_torch:
        return rotated_times([steps], repeats)
    child = TorchProcess(x_cnn, y_cnn, x_lm, y_lm, cnn, lm, LR)
    try:
        torch_steps = {name: lambda name=name: child.time(name) for name in child.names}
        return rotated_times([steps, torch_steps], repeats, gap=GAP)
    finally:
        child.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10, help="steps timed per variant")
    args = parser.parse_args()
    warmup(progress=False)  # no timed step may take fpsim's interim numpy path
    times = bench(args.repeats)
    header = (f"| {'model':<5} | {'step':<6} | {'f32 ms':>8} | {'mixed16 ms':>10} | "
              f"{'mixedbf16 ms':>12} | {'torch f32 ms':>12} | {'mixed16 / f32':>13} | "
              f"{'mixedbf16 / f32':>15} | {'f32 / torch':>11} |")
    print(header)
    print("|" + "|".join("-" * len(c) for c in header.split("|")[1:-1]) + "|")
    for model in ("cnn", "lm"):
        for label, stat in (("min", min), ("median", statistics.median)):
            f32, f16, bf16 = (stat(times[f"{model} {p}"]) for p in POLICIES)
            t = times.get(f"{model} torch float32")
            torch_ms = f"{stat(t) * 1e3:>12.2f}" if t else f"{'-':>12}"
            ratio = f"{f32 / stat(t):>11.2f}" if t else f"{'-':>11}"
            print(f"| {model:<5} | {label:<6} | {f32 * 1e3:>8.2f} | {f16 * 1e3:>10.2f} | "
                  f"{bf16 * 1e3:>12.2f} | {torch_ms} | {f16 / f32:>13.2f} | {bf16 / f32:>15.2f} "
                  f"| {ratio} |")
    print("targets: mixed16 / f32 <= 1.5, f32 / torch <= 2")


if __name__ == "__main__":
    main()
