"""Throughput of every fpsim.mx quantize path beside a single-thread copy, in one run.

    python benchmarks/bench_mx.py [--log2n 24] [--repeat 5] [--format NAME ...] [--mode M ...]

One row per block format and element rounding mode (and one per format for ``encode``). The
array is 2^n float32 standard normal values times 100, blocked along its one axis. The ratio
divides np.copyto's time (read n, write n into a preallocated array: the memory bandwidth
ceiling of one thread) by the call's (which also allocates its output). The issue's bar is a
ratio of at least 0.3 for every row. Ratios, not absolute times, compare across machines.
"""

from __future__ import annotations

import argparse

import numpy as np
from timing import paired_median_seconds

import fpsim
from fpsim import mx


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--format", nargs="+", default=sorted(mx.BLOCK_FORMATS),
                        choices=sorted(mx.BLOCK_FORMATS))
    parser.add_argument("--mode", nargs="+", default=["nearest_even", "stochastic"])
    args = parser.parse_args()
    n = 2**args.log2n
    x = (np.random.default_rng(0).standard_normal(n) * 100).astype(np.float32)
    dst = np.empty_like(x)
    fpsim.warmup()
    print(f"n = 2^{args.log2n} float32, median of {args.repeat}; ratio = copy time / call time "
          f"(bar: >= 0.3)")
    print(f"{'format':<12}{'call':<22}{'G elements/s':>14}{'ratio':>8}")
    for name in args.format:
        calls = {f"quantize {m}": (lambda m=m, name=name: mx.quantize(x, name, mode=m, rng=0))
                 for m in args.mode}
        calls["encode"] = lambda name=name: mx.encode(x, name)
        for what, call in calls.items():
            t, t_copy = paired_median_seconds(call, lambda: np.copyto(dst, x), args.repeat)
            print(f"{name:<12}{what:<22}{n / t / 1e9:>14.3f}{t_copy / t:>8.2f}")


if __name__ == "__main__":
    main()
