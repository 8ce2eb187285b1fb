"""Throughput and peak memory of every fpsim.mx path beside a single-thread copy, in one run.

    python benchmarks/bench_mx.py --log2n 24 --repeat 5 [--threads N] [--format NAME ...]

One row per block format: ``quantize`` with nearest-even and with stochastic elements,
``encode`` and ``decode`` (of encode's codes), each as a ratio to np.copyto of the same float32
array (read n, write n into a preallocated array: the memory bandwidth ceiling of one thread),
timed alternately with it (timing.interleaved_times) so that both see the same drift of a
shared machine, the best of ``--repeat`` rounds; a call also allocates its output. The array
is 2^n float32 standard normal values times 100, blocked along its one axis. The kernels run
on ``--threads`` threads, by default fpsim's own count (FPSIM_NUM_THREADS, else the usable
CPUs: what a user's call gets); ``--threads 1`` compares one thread with one thread
(FPSIM_NUM_THREADS is set before fpsim is imported). One thread is timed in CPU time (user and
system: page faults count), which the other processes of a loaded machine do not stretch;
several threads in wall time. ``peak`` is the largest tracemalloc peak of the four calls over
the input's bytes: it sees numpy's allocations, which hold every output and temporary (the
kernels write into arrays numpy allocated). The issue's bar: every ratio at least 0.3 (the
calls as a user makes them, fpsim's default threads, against one thread's copy) and every
peak at most 2. A last line gives two costs inside those calls as the same ratio: a copy into
a freshly allocated array (its page faults) and NVFP4's tensor-amax pass (which also keeps
every block's amax). Ratios, not absolute times, compare across machines; on a loaded machine
they are noisy (the load average is printed).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
from collections.abc import Callable


def _peak(call: Callable[[], object]) -> int:
    """tracemalloc's peak over one call (bytes)."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--log2n", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None,
                        help="kernel threads (default: fpsim's, FPSIM_NUM_THREADS or the CPUs)")
    parser.add_argument("--format", nargs="+", default=None)
    args = parser.parse_args()
    if args.threads is not None:
        if args.threads < 1:
            parser.error(f"--threads must be at least 1, got {args.threads}")
        os.environ["FPSIM_NUM_THREADS"] = str(args.threads)
    import numpy as np
    from timing import interleaved_times

    import fpsim
    from fpsim import mx
    from fpsim.kernels.threads import get_num_threads

    threads = get_num_threads()

    names = args.format or sorted(mx.BLOCK_FORMATS)
    for name in names:
        mx.get_block_format(name)  # an unknown name lists the known ones
    n = 2**args.log2n
    x = (np.random.default_rng(0).standard_normal(n) * 100).astype(np.float32)
    dst = np.empty_like(x)
    fpsim.warmup()
    # one thread: CPU time (user + system, page faults included), which a loaded machine's
    # other processes do not stretch; several: wall time
    clock = time.process_time if threads == 1 else time.perf_counter
    print(f"n = 2^{args.log2n} float32, {threads} thread(s)"
          f"{'' if args.threads else ' (fpsim default)'}, best of {args.repeat} "
          f"({'CPU' if threads == 1 else 'wall'} time), load average "
          f"{' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    print("ratio = copy time / call time (bar: >= 0.3); peak = tracemalloc peak / input bytes "
          "(bar: <= 2)")
    paths = ("nearest", "stochastic", "encode", "decode")
    print(f"{'format':<12}{'copy ms':>8}" + "".join(f"{p:>12}" for p in paths) + f"{'peak':>7}")
    for name in names:
        codes = mx.encode(x, name)
        calls: dict[str, Callable[[], object]] = {
            "nearest": lambda name=name: mx.quantize(x, name),
            "stochastic": lambda name=name: mx.quantize(x, name, mode="stochastic", rng=0),
            "encode": lambda name=name: mx.encode(x, name),
            "decode": lambda name=name, codes=codes: mx.decode(*codes, name),
        }
        times = interleaved_times({"copy": lambda: np.copyto(dst, x), **calls}, args.repeat,
                                  clock)
        best = {k: min(v) for k, v in times.items()}
        ratios = [best["copy"] / best[k] for k in calls]
        peak = max(_peak(call) for call in calls.values()) / x.nbytes
        print(f"{name:<12}{1e3 * best['copy']:>8.1f}"
              + "".join(f"{r:>12.2f}" for r in ratios) + f"{peak:>7.2f}")
        sys.stdout.flush()
    # two costs inside every call above, as the same ratio: allocating the output (its page
    # faults: a fresh array's first write) and NVFP4's tensor-amax pass over the input
    rows = x.reshape(1, -1)
    times = interleaved_times({"copy": lambda: np.copyto(dst, x),
                               "fresh": lambda: np.copyto(np.empty_like(x), x),
                               "amax": lambda: mx._whole_block_amax(rows)}, args.repeat, clock)
    best = {k: min(v) for k, v in times.items()}
    print(f"reference: copy into a fresh array {best['copy'] / best['fresh']:.2f}, "
          f"NVFP4's tensor-amax pass {best['copy'] / best['amax']:.2f}")


if __name__ == "__main__":
    main()
