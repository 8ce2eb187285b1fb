"""One training step of a small CNN and of a one-block transformer LM under nn's policies.

A step is forward, sparse softmax cross-entropy (from logits), backward and an SGD update of the
fp32 master weights. The variants (nn float32, mixed_float16, mixed_bfloat16, and PyTorch CPU
float32 when torch is importable) run in this one process on the same data, interleaved round
by round; the table gives each variant's fastest and median step and the ratios the targets are
about:

- nn mixed_float16 / nn float32     (target <= 1.5)
- nn float32 / torch float32        (target <= 2, where torch is installed)

Run: ``python benchmarks/bench_models.py`` (``--repeats N`` steps per variant). On a busy
shared machine ``OPENBLAS_NUM_THREADS=1`` gives steadier ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import nn
from nn import layers

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark modules
from bench_train import LR, nn_step  # noqa: E402  (one SGD step for both benchmarks)
from timing import interleaved_times  # noqa: E402

POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")

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


def torch_steps(x_cnn: np.ndarray, y_cnn: np.ndarray, x_lm: np.ndarray, y_lm: np.ndarray
                ) -> dict[str, Callable[[], float]]:
    """The same two models in PyTorch CPU float32 (empty if torch is not importable)."""
    try:
        import torch
    except ImportError:
        return {}
    tnn = torch.nn
    cnn = tnn.Sequential(
        tnn.Conv2d(CNN["image"][2], CNN["filters"][0], 3, padding=1), tnn.ReLU(),
        tnn.MaxPool2d(2), tnn.Conv2d(CNN["filters"][0], CNN["filters"][1], 3, padding=1),
        tnn.ReLU(), tnn.MaxPool2d(2), tnn.AdaptiveAvgPool2d(1), tnn.Flatten(),
        tnn.Linear(CNN["filters"][1], CNN["classes"]))
    block = tnn.TransformerEncoderLayer(LM["dim"], LM["heads"], LM["ff"], dropout=0.0,
                                        activation="gelu", batch_first=True)
    tok, pos = tnn.Embedding(LM["vocab"], LM["dim"]), tnn.Embedding(LM["length"], LM["dim"])
    head = tnn.Linear(LM["dim"], LM["vocab"])
    mask = tnn.Transformer.generate_square_subsequent_mask(LM["length"])
    lm_params = [*block.parameters(), *tok.parameters(), *pos.parameters(), *head.parameters()]

    def lm_forward(ids: Any) -> Any:
        h = tok(ids) + pos(torch.arange(ids.shape[1]))
        return head(block(h, src_mask=mask, is_causal=True))

    xc = torch.from_numpy(x_cnn.transpose(0, 3, 1, 2).copy())
    yc = torch.from_numpy(y_cnn)
    xl, yl = torch.from_numpy(x_lm), torch.from_numpy(y_lm)
    sgd_c = torch.optim.SGD(cnn.parameters(), lr=LR)
    sgd_l = torch.optim.SGD(lm_params, lr=LR)
    ce = tnn.CrossEntropyLoss()

    def step_cnn() -> float:
        sgd_c.zero_grad()
        loss = ce(cnn(xc), yc)
        loss.backward()
        sgd_c.step()
        return float(loss)

    def step_lm() -> float:
        sgd_l.zero_grad()
        loss = ce(lm_forward(xl).reshape(-1, LM["vocab"]), yl.reshape(-1))
        loss.backward()
        sgd_l.step()
        return float(loss)

    return {"cnn torch float32": step_cnn, "lm torch float32": step_lm}


def bench(repeats: int, cnn: dict[str, Any] = CNN, lm: dict[str, Any] = LM, seed: int = 0,
          with_torch: bool = True) -> dict[str, list[float]]:
    """Step times (seconds) per variant ("cnn float32", "lm mixed_float16", ...), ``repeats``
    rounds interleaved after a warm-up step of each."""
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
        steps[f"cnn {policy}"] = lambda c=c: nn_step(c, loss_fn, x_cnn, y_cnn)
        steps[f"lm {policy}"] = lambda m=m: nn_step(m, loss_fn, x_lm, y_lm)
    if with_torch:
        steps.update(torch_steps(x_cnn, y_cnn, x_lm, y_lm))
    return interleaved_times(steps, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10, help="steps timed per variant")
    args = parser.parse_args()
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
