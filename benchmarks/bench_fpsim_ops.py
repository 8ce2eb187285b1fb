"""Cost of the monitor and of the emulated operations beside plain numpy, measured in one run.

    python benchmarks/bench_fpsim_ops.py [--log2n 24] [--matmul-n 1024] [--repeat 7]

Each time is the median of ``--repeat`` calls after one warm-up call (compilation, page faults);
the monitor and fpsim.matmul rows time their two sides alternately, call by call.
The ratio column divides by the baseline on the same row; the target column is the issue's goal.
Rows:

- ``fpsim.round`` to fp16 of 2^n float32 values (standard normal times 100) into a preallocated
  output, with an active ``fpsim.monitor`` vs without (the counting kernel vs the plain one);
  for information the same for two cases of the general per-mode kernels (a mode other than
  nearest-even, float64 input);
- ``fpsim.matmul`` of two fp16 EmulatedArrays with fp32 accumulation (default ``order="auto"``,
  the BLAS path, plus the final rounding to fp16) vs numpy's float32 matmul of the same shapes;
- for information: ``EmulatedArray`` fp16 addition vs numpy float16 addition, ``.sum()`` with
  the sequential fp32-accumulation kernel vs numpy's float32 sum, and the sequential matmul
  kernel (a quarter of the size per dimension) vs the BLAS path.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np
from timing import median_seconds, paired_median_seconds

import fpsim


def round_with_monitor(x: np.ndarray, out: np.ndarray) -> None:
    with fpsim.monitor():
        fpsim.round(x, "fp16", out=out)


def with_monitor(call: Callable[[], object]) -> Callable[[], None]:
    def monitored() -> None:
        with fpsim.monitor():
            call()
    return monitored


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, default=24)
    parser.add_argument("--matmul-n", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n, r = 2**args.log2n, args.repeat

    x = (rng.standard_normal(n) * 100).astype(np.float32)
    out = np.empty_like(x)
    rows = []
    counted, plain = paired_median_seconds(lambda: round_with_monitor(x, out),
                                           lambda: fpsim.round(x, "fp16", out=out), r)
    rows.append((f"fpsim.round fp16, 2^{args.log2n} float32: monitor on / off",
                 counted, plain, "<= 1.3"))
    x64, out64 = x.astype(np.float64), np.empty(n)
    for what, call in (  # the general per-mode kernels, for information
        ("fp16 toward_zero", lambda: fpsim.round(x, "fp16", "toward_zero", out=out)),
        ("fp16 of float64", lambda: fpsim.round(x64, "fp16", out=out64)),
    ):
        rows.append((f"fpsim.round {what}, 2^{args.log2n}: monitor on / off",
                     *paired_median_seconds(with_monitor(call), call, r), "-"))

    m = args.matmul_n
    a32 = rng.standard_normal((m, m)).astype(np.float32)
    b32 = rng.standard_normal((m, m)).astype(np.float32)
    a, b = fpsim.array(a32, "fp16"), fpsim.array(b32, "fp16")
    a16, b16 = a.numpy(), b.numpy()
    emulated, numpy_mm = paired_median_seconds(lambda: fpsim.matmul(a, b),
                                               lambda: np.matmul(a16, b16), r)
    rows.append((f"fpsim.matmul fp16 {m}x{m}, fp32 acc / numpy float32 matmul",
                 emulated, numpy_mm, "<= 1.5"))

    xa, xb = fpsim.array(x, "fp16"), fpsim.array(x[::-1].copy(), "fp16")
    ha, hb = xa.numpy().astype(np.float16), xb.numpy().astype(np.float16)
    rows.append((f"EmulatedArray fp16 a + b, 2^{args.log2n} / numpy float16 add",
                 median_seconds(lambda: xa + xb, r), median_seconds(lambda: ha + hb, r), "-"))
    rows.append((f"EmulatedArray.sum() fp32 acc sequential, 2^{args.log2n} / numpy float32 sum",
                 median_seconds(lambda: xa.sum(), r), median_seconds(lambda: np.sum(x), r), "-"))
    q = max(m // 4, 1)
    aq, bq = a[:q, :q].copy(), b[:q, :q].copy()
    rows.append((f"fpsim.matmul fp16 {q}x{q}: sequential kernel / BLAS path",
                 median_seconds(lambda: fpsim.matmul(aq, bq, order="sequential"), 3),
                 median_seconds(lambda: fpsim.matmul(aq, bq), r), "-"))

    width = max(len(row[0]) for row in rows)
    print(f"{'measurement':<{width}}  {'time (ms)':>10}  {'baseline (ms)':>13}  {'ratio':>7}  "
          "target")
    for name, t, base, target in rows:
        print(f"{name:<{width}}  {t * 1e3:>10.2f}  {base * 1e3:>13.2f}  {t / base:>7.2f}  {target}")


if __name__ == "__main__":
    main()
