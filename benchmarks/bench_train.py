"""One training step of an MLP: nn float32 vs nn mixed_float16 vs hand-written numpy float32.

A step is forward, softmax cross-entropy (from logits), backward and an SGD update of the fp32
master weights. All variants run in this one process on the same data, interleaved round by
round. For each model the table gives the fastest step of each variant (on a shared machine,
the least disturbed one) and the median step, and the ratios the targets are about:

- nn float32 / numpy float32        (target <= 1.3)
- nn mixed_float16 / nn float32     (target <= 1.5)

After the table it prints each variant's minor page faults per step (fresh pages of memory,
about a microsecond each; see ``page_faults``).

Run: ``python benchmarks/bench_train.py`` (``--quick`` skips the 784-4096-4096-10 model). On a
busy shared machine, multi-threaded BLAS makes step times erratic for every variant;
``OPENBLAS_NUM_THREADS=1`` gives steadier ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/timing.py
from timing import interleaved_times  # noqa: E402

LR = 0.01
VARIANTS = ("numpy float32", "nn float32", "nn mixed_float16")


# --- hand-written numpy float32 -------------------------------------------------------------------
def numpy_params(sizes: list[int], rng: np.random.Generator) -> list[np.ndarray]:
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        params += [rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32),
                   np.zeros(fan_out, np.float32)]
    return params


def numpy_step(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> float:
    """Forward, softmax cross-entropy, backward, SGD: the straightforward float32 numpy code."""
    n_layers = len(params) // 2
    acts = [x]
    h = x
    for i in range(n_layers):
        z = h @ params[2 * i] + params[2 * i + 1]
        h = np.maximum(z, 0) if i < n_layers - 1 else z
        acts.append(h)
    logits = acts[-1]
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    s = e.sum(axis=1, keepdims=True)
    rows = np.arange(len(y))
    loss = float(np.mean(np.log(s[:, 0]) - shifted[rows, y]))
    g = e / s
    g[rows, y] -= 1
    g /= len(y)
    for i in reversed(range(n_layers)):
        w = params[2 * i]
        gw = acts[i].T @ g
        gb = g.sum(axis=0)
        if i > 0:
            g = g @ w.T
            g *= acts[i] > 0
        w -= LR * gw
        params[2 * i + 1] -= LR * gb
    return loss


# --- nn ---------------------------------------------------------------------------------------
def nn_model(sizes: list[int], policy: str, seed: int) -> nn.Sequential:
    with nn.policy_scope(policy):
        layers = [nn.Dense(n, activation="relu", seed=seed + i) for i, n in enumerate(sizes[1:-1])]
        model = nn.Sequential([*layers, nn.Dense(sizes[-1], seed=seed + 99)])
        model(np.zeros((1, sizes[0]), np.float32))  # build
    return model


def nn_step(model: nn.Sequential, loss_fn: nn.losses.Loss, x: np.ndarray, y: np.ndarray) -> float:
    variables = model.trainable_variables
    for v in variables:
        v.zero_grad()
    loss = loss_fn(y, model(x, training=True))
    loss.backward()
    for v in variables:  # SGD on the fp32 master weights
        v.data -= LR * v.grad.data
    return loss.item()


def make_steps(sizes: list[int], batch: int, seed: int = 0) -> dict[str, Callable[[], float]]:
    """The three variants' step functions, on the same data and initial weights."""
    rng = np.random.default_rng(seed)
    x = rng.random((batch, sizes[0]), dtype=np.float32)
    y = rng.integers(0, sizes[-1], batch)
    loss_fn = nn.losses.SparseCategoricalCrossentropy(from_logits=True)
    params = numpy_params(sizes, rng)
    m32 = nn_model(sizes, "float32", seed)
    m16 = nn_model(sizes, "mixed_float16", seed)
    return {
        "numpy float32": lambda: numpy_step(params, x, y),
        "nn float32": lambda: nn_step(m32, loss_fn, x, y),
        "nn mixed_float16": lambda: nn_step(m16, loss_fn, x, y),
    }


def bench(sizes: list[int], batch: int, repeats: int, seed: int = 0) -> dict[str, list[float]]:
    """Step times (seconds) of each variant, ``repeats`` rounds interleaved after a warm-up."""
    return interleaved_times(make_steps(sizes, batch, seed), repeats)


def page_faults(steps: dict[str, Callable[[], float]], repeats: int) -> dict[str, float] | None:
    """Minor page faults per step of each variant (interleaved, after a warm-up round), or None
    where ``resource`` is missing (Windows).

    A fault is a fresh page of memory touched for the first time, about a microsecond each:
    under glibc's own settings malloc returns the freed top of the heap to the kernel between
    steps, so a step that allocates its large arrays afresh pays for their pages again every
    step (the reason ``import nn`` tells malloc to keep them: ``nn.engine.memory``; run with
    ``NN_RETAIN_FREED_MEMORY=0`` to see the faults). All variants share one heap, so each
    one's count depends on the others' allocations too.
    """
    try:
        import resource
    except ImportError:
        return None
    counts = dict.fromkeys(steps, 0)
    for step in steps.values():
        step()
    for _ in range(repeats):
        for k, step in steps.items():
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            step()
            counts[k] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    return {k: c / repeats for k, c in counts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the 784-4096-4096-10 model")
    parser.add_argument("--repeats", type=int, default=0, help="steps timed per variant")
    args = parser.parse_args()
    cases = [([64, 256, 256, 10], 256, 60), ([64, 256, 256, 10], 2048, 20)]
    if not args.quick:
        cases.append(([784, 4096, 4096, 10], 1024, 5))
    header = (f"| {'model':<16} | {'batch':>5} | {'step':<6} | {'numpy f32 ms':>12} | "
              f"{'nn f32 ms':>9} | {'nn mixed16 ms':>13} | {'nn f32 / numpy':>14} | "
              f"{'mixed16 / f32':>13} |")
    print(header)
    print("|" + "|".join("-" * len(c) for c in header.split("|")[1:-1]) + "|")
    faults = []
    for sizes, batch, repeats in cases:
        steps = make_steps(sizes, batch)
        times = interleaved_times(steps, args.repeats or repeats)
        model = "-".join(map(str, sizes))
        for label, stat in (("min", min), ("median", statistics.median)):
            a, b, c = (stat(times[k]) for k in VARIANTS)
            print(f"| {model:<16} | {batch:>5} | {label:<6} | {a * 1e3:>12.2f} | {b * 1e3:>9.2f} | "
                  f"{c * 1e3:>13.2f} | {b / a:>14.2f} | {c / b:>13.2f} |")
        counts = page_faults(steps, min(10, args.repeats or repeats))
        if counts is not None:
            faults.append(f"{model} batch {batch}: " + ", ".join(
                f"{k} {counts[k]:.0f}" for k in VARIANTS))
    print("targets: nn f32 / numpy <= 1.3, mixed16 / f32 <= 1.5")
    if faults:
        print("page faults per step (fresh pages touched; all variants share one heap):")
        print("\n".join(faults))


if __name__ == "__main__":
    main()
