"""Throughput of fpsim.mx.quantize (MXFP8, blocks of 32) beside a single-thread copy, in one run.

    python benchmarks/bench_mx.py [--log2n 24] [--repeat 7] [--format mxfp8_e4m3]

The array is 2^n float32 standard normal values times 100, blocked along its one axis. The
ratio divides np.copyto's time (read n, write n into a preallocated array: the memory
bandwidth ceiling of one thread) by quantize's (which also allocates its output). The issue's
bar is a ratio of at least 0.3 for MXFP8. Ratios, not absolute times, compare across machines.
"""

from __future__ import annotations

import argparse

import numpy as np
from timing import paired_median_seconds

from fpsim import mx


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--format", default="mxfp8_e4m3", choices=sorted(mx.BLOCK_FORMATS))
    args = parser.parse_args()
    n = 2**args.log2n
    x = (np.random.default_rng(0).standard_normal(n) * 100).astype(np.float32)
    dst = np.empty_like(x)
    t_mx, t_copy = paired_median_seconds(
        lambda: mx.quantize(x, args.format), lambda: np.copyto(dst, x), args.repeat)
    print(f"n = 2^{args.log2n}, {args.format}, median of {args.repeat}")
    print(f"{'np.copyto (1 thread)':<28}{n / t_copy / 1e9:8.2f} G elements/s")
    print(f"{'fpsim.mx.quantize':<28}{n / t_mx / 1e9:8.2f} G elements/s")
    print(f"ratio quantize / copy: {t_copy / t_mx:.2f} (bar: >= 0.3)")


if __name__ == "__main__":
    main()
