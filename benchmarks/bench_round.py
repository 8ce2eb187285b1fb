"""Throughput of fpsim.round beside numpy, ml_dtypes and a plain copy, measured in one run.

    python benchmarks/bench_round.py [--log2n 24] [--repeat 7] [--cases fpsim] [--clock cpu]

Each row is the median of ``--repeat`` timed calls on the same 2^n float32 array (standard
normal values times 100, so every format sees normals, subnormals and overflow). The calls are
interleaved: every round times each case once, in turn, so that all rows see the same drift of
a shared machine. (Timed back to back instead, the row timed first after the slow reference
round trips came out 5 to 20% lower than the same compiled kernel timed later for another
format. Some of that stays even interleaved: on this 2-core machine the two-thread calls that
follow the single-threaded reference round trips and the allocating calls in a round come out
slower than those later in it. ``--cases fpsim`` times only the copy and fpsim's out= rows,
the goals' rows, alike.) The ratio columns
divide by np.copyto's throughput (single-threaded: the memory-bandwidth ceiling of one core,
read n, write n) and by the reference round trips. Ratios, not absolute times, are what to
compare across machines. ``GOALS`` holds the goals of the issue on warm speed; the other
ratios are printed without one. ``--clock cpu`` times the CPU seconds of all the process's
threads instead of wall seconds: the work an element costs, which a loaded machine disturbs
less (then "/copy" above 1 means cheaper than the single-threaded copy, whatever the threads).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable

import ml_dtypes
import numpy as np
from timing import interleaved_times

import fpsim
from fpsim import _kernels
from fpsim.kernels import threads as fpsim_threads
from fpsim.rounding import get_mode

COPY = "np.copyto (ceiling)"
COPY_THREADS = "np.copyto on fpsim's threads"
FORMATS = ("fp16", "bf16", "e4m3fn", "e5m2")
DIRECTED = ("nearest_away", "toward_zero", "up", "down", "odd")

# The warm-speed goals (issue 14): (label, rows whose slowest counts, goal for its rate / copy).
GOALS: list[tuple[str, tuple[str, ...], float]] = [
    ("fp16 nearest_even out= / copy", ("fpsim fp16 nearest_even out=",), 1.2),
    ("bf16 nearest_even out= / copy", ("fpsim bf16 nearest_even out=",), 1.2),
    ("min directed fp16 out= / copy", tuple(f"fpsim fp16 {m} out=" for m in DIRECTED), 0.7),
    ("min stochastic out= / copy", tuple(f"fpsim {f} stochastic out=" for f in FORMATS), 0.35),
]
FIRST_CALL_GOAL = 1.5  # seconds, import + first fpsim.round (issue 14)

# Ratios printed for information (no goal): (label, numerator row, denominator row).
RATIOS: list[tuple[str, str, str]] = [
    ("copy on fpsim's threads / copy", COPY_THREADS, COPY),
    ("fp16 nearest_even out= / threaded copy", "fpsim fp16 nearest_even out=", COPY_THREADS),
    ("bf16 nearest_even out= / threaded copy", "fpsim bf16 nearest_even out=", COPY_THREADS),
    ("e4m3fn nearest_even out= / copy", "fpsim e4m3fn nearest_even out=", COPY),
    ("e5m2 nearest_even out= / copy", "fpsim e5m2 nearest_even out=", COPY),
    ("bf16 out= / ml_dtypes bf16", "fpsim bf16 nearest_even out=",
     "ml_dtypes bfloat16 round trip"),
    ("e4m3fn out= / ml_dtypes e4m3fn", "fpsim e4m3fn nearest_even out=",
     "ml_dtypes e4m3fn round trip"),
    ("e5m2 out= / ml_dtypes e5m2", "fpsim e5m2 nearest_even out=", "ml_dtypes e5m2 round trip"),
    ("fp16 out= / numpy float16", "fpsim fp16 nearest_even out=", "numpy float16 round trip"),
]


def first_call_seconds() -> float:
    """Import + first fpsim.round in a fresh interpreter (numba cache warm)."""
    code = (
        "import time; t=time.perf_counter(); import numpy as np, fpsim; "
        "fpsim.round(np.ones(4, np.float32), 'fp16'); print(time.perf_counter()-t)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)  # warm cache
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip())


def _copy_range(src: np.ndarray, dst: np.ndarray, lo: int, hi: int) -> None:
    np.copyto(dst[lo:hi], src[lo:hi])  # (releases the GIL, as the kernels do)


def threaded_copy(x: np.ndarray, out: np.ndarray) -> None:
    """np.copyto(out, x) split into blocks by fpsim's own thread pool (fpsim.kernels.threads.run,
    the same blocks a rounding kernel gets)."""
    fpsim_threads.run(_copy_range, x.size, (x, out), ())


def cases(x: np.ndarray, out: np.ndarray, only_fpsim: bool) -> dict[str, Callable[[], object]]:
    """Every timed case by row name (only_fpsim: the copy and fpsim's out= rows)."""
    steps: dict[str, Callable[[], object]] = {COPY: lambda: np.copyto(out, x)}
    # the copy split over the threads fpsim's kernels use (np.copyto releases the GIL): the
    # ceiling of what a two-thread pass over memory can reach on this machine, which the
    # goals' single-thread "copy" does not show
    steps[COPY_THREADS] = lambda: threaded_copy(x, out)
    if not only_fpsim:
        steps["numpy float16 round trip"] = lambda: x.astype(np.float16).astype(np.float32)
        for name, dtype in (("bfloat16", ml_dtypes.bfloat16), ("e4m3fn", ml_dtypes.float8_e4m3fn),
                            ("e5m2", ml_dtypes.float8_e5m2)):
            steps[f"ml_dtypes {name} round trip"] = (
                lambda d=dtype: x.astype(d).astype(np.float32))
    for fmt in FORMATS:
        steps[f"fpsim {fmt} nearest_even out="] = lambda f=fmt: fpsim.round(x, f, out=out)
        if not only_fpsim:
            steps[f"fpsim {fmt} nearest_even"] = lambda f=fmt: fpsim.round(x, f)
        steps[f"fpsim {fmt} stochastic out="] = (
            lambda f=fmt: fpsim.round(x, f, "stochastic", rng=1, out=out))
    for mode in DIRECTED:
        steps[f"fpsim fp16 {mode} out="] = lambda m=mode: fpsim.round(x, "fp16", m, out=out)
    if not only_fpsim:
        # the general kernel's one-mode specialisation on the int32 view, which large float32
        # arrays in these modes took before fpsim.kernels.directed_f32: the before/after
        c = _kernels.carrier_constants(x.dtype)
        f = fpsim.quantize.format_constants(fpsim.FP16, x.dtype, True, "inf")
        bits, out_bits = x.view(np.int32), out.view(np.int32)
        for mode in DIRECTED:
            kernel = _kernels.specialised_range(get_mode(mode))
            steps[f"  before: int64 kernel, {mode}"] = (
                lambda k=kernel: _kernels.run(k, x.size, (bits, out_bits), (0, c, f)))
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--cases", choices=("all", "fpsim"), default="all",
                        help="fpsim: only the copy and fpsim's out= rows (the goals), quicker")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="cpu: CPU seconds of all threads instead of wall seconds")
    args = parser.parse_args()
    n = 2**args.log2n
    x = (np.random.default_rng(0).standard_normal(n) * 100).astype(np.float32)
    out = np.empty_like(x)

    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    times = interleaved_times(cases(x, out, args.cases == "fpsim"), args.repeat, clock)
    rates = {name: n / float(np.median(ts)) for name, ts in times.items()}
    copy = rates[COPY]
    print(f"n = 2^{args.log2n} float32 elements, median of {args.repeat} interleaved rounds "
          f"({args.clock} clock); G = 1e9 elements/s")
    print(f"{'case':36s} {'G/s':>7s} {'/copy':>7s}")
    for name, rate in rates.items():
        print(f"{name:36s} {rate / 1e9:7.3f} {rate / copy:7.2f}")
    print()
    print(f"{'goal (issue 14)':36s} {'ratio':>7s} {'goal':>7s}")
    for label, rows, goal in GOALS:
        ratio = min(rates[r] for r in rows) / copy
        verdict = ("ok" if ratio >= goal else "MISSED") if args.clock == "wall" else (
            "(goals are on the wall clock)")
        print(f"{label:36s} {ratio:7.2f} {'>=' + format(goal, 'g'):>7s} {verdict}")
    first = first_call_seconds()
    print(f"{'first call incl. import (s)':36s} {first:7.2f} "
          f"{'<=' + format(FIRST_CALL_GOAL, 'g'):>7s} "
          f"{'ok' if first <= FIRST_CALL_GOAL else 'MISSED'}")
    print()
    for label, num, den in RATIOS:
        if num in rates and den in rates:
            print(f"{label:36s} {rates[num] / rates[den]:7.2f}")


if __name__ == "__main__":
    main()
