"""One full ``fit`` epoch on the digits data (1438 samples, batch 64, 23 steps): nn vs PyTorch.

The model is fpsim compare's MLP 64-64-64-10 (relu) trained with SGD (lr 0.05, momentum 0.9)
on softmax cross-entropy from logits. Variants, all in this one process, interleaved epoch by
epoch after a warm-up (the telemetry variants in a second group, see ``main``), reporting the
median epoch time:

- nn float32 and nn mixed_float16 with dynamic loss scaling, each with ``telemetry=False`` and
  with the default ``telemetry=True`` (every rounding then runs through fpsim.monitor's
  counting kernels and the gradients' exponents are histogrammed);
- PyTorch float32 on the CPU, and PyTorch float16 (model and data ``.half()``: real fp16
  arithmetic on the CPU, no autocast), if torch is importable; otherwise those rows are skipped.

Targets: nn mixed_float16 epoch <= 1.5x nn float32 epoch; nn float32 epoch <= 1.5x PyTorch
float32 epoch; nn mixed_float16 epoch >= 10x faster than PyTorch's float16 epoch.

PyTorch runs with ``torch.set_num_threads(1)`` by default (``--torch-threads``): on this
shared 2-core machine its default two intra-op threads made the tiny MLP's float32 epoch about
40x slower (388 ms against 9.4 ms, measured here), so one thread is its fair, fastest setting.

Run: ``python benchmarks/bench_fit.py [--repeats N] [--torch-threads T]`` (torch rows: a
separate venv with ``pip install torch==2.13.0`` and ``pip install -e .``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

import nn

HIDDEN = (64, 64)
BATCH = 64
LR, MOMENTUM = 0.05, 0.9


def nn_epoch(policy: str, telemetry: bool) -> Callable[[], None]:
    """A callable running one fit epoch of a fresh-per-benchmark nn model."""
    (x, y), _ = nn.datasets.load_digits()
    nn.set_random_seed(0)
    with nn.policy_scope(policy):
        model = nn.Sequential([nn.Dense(h, activation="relu") for h in HIDDEN] + [nn.Dense(10)])
    model.compile(nn.SGD(LR, momentum=MOMENTUM),
                  nn.losses.SparseCategoricalCrossentropy(from_logits=True))
    scale = "dynamic" if policy == "mixed_float16" else None

    def run() -> None:
        model.fit(x, y, batch_size=BATCH, epochs=1, seed=0, verbose=0, loss_scale=scale,
                  telemetry=telemetry)

    return run


def torch_epoch(dtype_name: str) -> Callable[[], None] | None:
    """The same epoch in PyTorch (shuffled batches, SGD with momentum), or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    torch.manual_seed(0)
    dtype = getattr(torch, dtype_name)
    (x, y), _ = nn.datasets.load_digits()
    xt = torch.from_numpy(x).to(dtype)
    yt = torch.from_numpy(y)
    layers: list = []
    width = x.shape[1]
    for h in HIDDEN:
        layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
        width = h
    model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 10)).to(dtype)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    loss_fn = torch.nn.CrossEntropyLoss()
    gen = np.random.default_rng(0)

    def run() -> None:
        order = torch.from_numpy(gen.permutation(len(x)))
        for i in range(0, len(x), BATCH):
            idx = order[i:i + BATCH]
            opt.zero_grad()
            loss = loss_fn(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="timed epochs per variant")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch.set_num_threads (0: leave torch's default)")
    args = parser.parse_args()
    if args.torch_threads > 0:
        try:
            import torch
        except ImportError:
            pass
        else:
            torch.set_num_threads(args.torch_threads)
    variants: dict[str, Callable[[], None] | None] = {
        "nn float32": nn_epoch("float32", telemetry=False),
        "nn mixed_float16 + dynamic": nn_epoch("mixed_float16", telemetry=False),
        "nn float32, telemetry": nn_epoch("float32", telemetry=True),
        "nn mixed_float16 + dynamic, telemetry": nn_epoch("mixed_float16", telemetry=True),
        "torch float32": torch_epoch("float32"),
        "torch float16 (.half())": torch_epoch("float16"),
    }
    runs = {k: v for k, v in variants.items() if v is not None}
    times: dict[str, list[float]] = {k: [] for k in runs}
    # Two groups, each interleaved epoch by epoch after a warm-up. The telemetry variants run
    # last: fpsim's counting kernels start numba's OpenMP thread pool, whose idle threads spin
    # and slowed PyTorch's later epochs ~18x here (17 ms -> 311 ms measured in one process).
    groups = [[k for k in runs if "telemetry" not in k], [k for k in runs if "telemetry" in k]]
    for group in groups:
        for k in group:  # warm-up: numba kernels load or compile, torch initialises
            runs[k]()
        for _ in range(args.repeats):
            for k in group:
                t0 = time.perf_counter()
                runs[k]()
                times[k].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    width = max(map(len, variants))
    print(f"digits fit epoch: MLP 64-{'-'.join(map(str, HIDDEN))}-10, batch {BATCH}, "
          f"1438 samples, median of {args.repeats}")
    print(f"| {'variant':<{width}} | epoch ms |")
    print(f"|{'-' * (width + 2)}|----------|")
    for k in variants:
        cell = f"{med[k] * 1e3:8.1f}" if k in med else " skipped"
        print(f"| {k:<{width}} | {cell} |")

    def ratio(a: str, b: str) -> str:
        return f"{med[a] / med[b]:.2f}" if a in med and b in med else "n/a (no torch)"

    print()
    print("| ratio | measured | target |")
    print("|---|---|---|")
    for suffix in ("", ", telemetry"):
        m16, f32 = f"nn mixed_float16 + dynamic{suffix}", f"nn float32{suffix}"
        print(f"| {m16} / {f32} | {ratio(m16, f32)} | <= 1.5 |")
        print(f"| {f32} / torch float32 | {ratio(f32, 'torch float32')} | <= 1.5 |")
        print(f"| torch float16 / {m16} | {ratio('torch float16 (.half())', m16)} | >= 10 |")


if __name__ == "__main__":
    main()
