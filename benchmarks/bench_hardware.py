"""Every model and recipe component of docs/hardware.md beside its baseline, in one run.

    python benchmarks/bench_hardware.py [--repeat 5] [--seed 0]

A row times a component and its baseline alternately (timing.interleaved_times, so both see the
same drift of a shared machine; best of ``--repeat`` rounds after a warm-up call, wall time,
fpsim's default thread count) and prints both times and their ratio, component / baseline: how
many baseline calls one component call costs. The rows:

- accumulator models (fpsim.accumulate.PRESETS): ``fpsim.matmul`` of (64, 4096) @ (4096, 64)
  e4m3fn values (K = 4096, DeepSeek-V3's case) with each preset, against the IEEE float32
  accumulation (today's default model);
- few-random-bit stochastic rounding: ``fpsim.round(x, "bfloat16", "stochastic",
  rng_bits=8)`` (hardware's ``cvt.rs`` draws 8 bits) of 2^22 float32 values, against the full
  56-bit draw;
- Float8BlockScaling's tiles: ``fpsim.mx.quantize_blockwise`` of a 2048x2048 float32 array in
  1x128 and 128x128 tiles, against ``fpsim.round(x, "e4m3fn")`` (the rounding without scales);
- the random Hadamard transform (``fpsim.hadamard.random_hadamard_transform``, 16-element
  blocks of the same array), against numpy's float32 product of those blocks with the same
  16x16 matrix;
- NVFP4 and Float8 block-scaled training (policies "nvfp4_te" and "fp8_blockwise"): one
  training step (forward, loss, backward, SGD on the fp32 masters) of a 256-256-256-10 MLP on
  a batch of 64, against the same MLP's "float32" step;
- optimizer-side remedies for pure bfloat16 weights: the same step under "bfloat16" with Adam's
  stochastically rounded updates, and with Kahan-compensated ones, against plain Adam.

The block formats' own speed bar is benchmarks/bench_mx.py's. Ratios, not absolute times,
compare across machines; on a loaded machine they are noisy (the load average is printed).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/timing.py
from bench_train import nn_model, nn_step  # noqa: E402
from timing import interleaved_times  # noqa: E402

Call = Callable[[], object]


def _rows(seed: int) -> list[tuple[str, str, Call, Call]]:
    """(row, baseline, component call, baseline call) for every row of the table."""
    import fpsim
    import nn
    from fpsim import hadamard, mx
    from fpsim.accumulate import PRESETS

    rng = np.random.default_rng(seed)
    a = fpsim.round(rng.standard_normal((64, 4096)).astype(np.float32), "e4m3fn")
    b = fpsim.round(rng.standard_normal((4096, 64)).astype(np.float32), "e4m3fn")
    rows: list[tuple[str, str, Call, Call]] = [
        (f"matmul K=4096, accumulate={name!r}", "accumulate=float32 (IEEE)",
         lambda p=preset: fpsim.matmul(a, b, accumulate=p),
         lambda: fpsim.matmul(a, b, accumulate="float32"))
        for name, preset in PRESETS.items() if name != "ieee_fp32"]
    x = rng.standard_normal(1 << 22).astype(np.float32)
    rows.append(("round bf16 stochastic, rng_bits=8", "the full draw",
                 lambda: fpsim.round(x, "bfloat16", "stochastic", rng=0, rng_bits=8),
                 lambda: fpsim.round(x, "bfloat16", "stochastic", rng=0)))
    tiles = rng.standard_normal((2048, 2048)).astype(np.float32)
    for block in ((1, 128), (128, 128)):
        rows.append((f"quantize_blockwise e4m3fn {block[0]}x{block[1]}", "round e4m3fn",
                     lambda blk=block: mx.quantize_blockwise(tiles, "e4m3fn", blk),
                     lambda: fpsim.round(tiles, "e4m3fn")))
    matrix = hadamard.rht_matrix().astype(np.float32)
    rows.append(("random Hadamard transform, 16-blocks", "numpy float32 blocks @ 16x16",
                 lambda: hadamard.random_hadamard_transform(tiles),
                 lambda: tiles.reshape(-1, 16) @ matrix))
    sizes, batch = [256, 256, 256, 10], 64
    xs = rng.random((batch, sizes[0]), dtype=np.float32)
    ys = rng.integers(0, sizes[-1], batch)
    loss_fn = nn.losses.SparseCategoricalCrossentropy(from_logits=True)

    def model(policy: str) -> nn.Sequential:  # bench_train's MLP, seeded alike
        return nn_model(sizes, policy, seed)

    def sgd_step(m: nn.Sequential) -> Call:
        return lambda: nn_step(m, loss_fn, xs, ys)

    def adam_step(m: nn.Sequential, **options: object) -> Call:
        opt = nn.optimizers.Adam(1e-4, **options)

        def step() -> float:
            with nn.GradientTape() as tape:
                loss = loss_fn(ys, m(xs, training=True))
            grads = tape.gradient(loss, m.trainable_variables)
            opt.apply_gradients(zip(grads, m.trainable_variables, strict=True))
            return loss.item()
        return step

    float32 = sgd_step(model("float32"))
    for policy in ("nvfp4_te", "fp8_blockwise"):
        rows.append((f"training step, policy {policy!r}", "policy 'float32'",
                     sgd_step(model(policy)), float32))
    plain = adam_step(model("bfloat16"))
    rows.append(("bfloat16 Adam step, stochastic updates", "round-to-nearest updates",
                 adam_step(model("bfloat16"), update_rounding="stochastic", seed=seed), plain))
    rows.append(("bfloat16 Adam step, Kahan updates", "round-to-nearest updates",
                 adam_step(model("bfloat16"), kahan=True), plain))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    import fpsim
    from fpsim.kernels.threads import get_num_threads

    fpsim.warmup()
    rows = _rows(args.seed)
    print(f"{get_num_threads()} thread(s), best of {args.repeat} (wall time), load average "
          f"{' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    print("ratio = component time / baseline time")
    width = max(len(r[0]) for r in rows)
    print(f"{'component':<{width}}  {'ms':>8}  {'baseline':<30}{'ms':>8}  {'ratio':>6}")
    for name, baseline, call, base in rows:
        times = interleaved_times({"component": call, "baseline": base}, args.repeat)
        best = {k: min(v) for k, v in times.items()}
        print(f"{name:<{width}}  {1e3 * best['component']:>8.2f}  {baseline:<30}"
              f"{1e3 * best['baseline']:>8.2f}  {best['component'] / best['baseline']:>6.2f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
