"""Timing helper shared by the benchmark scripts (run them as ``python benchmarks/NAME.py``)."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``repeat`` calls of ``fn`` after one warm-up call (compilation,
    page faults of a fresh output)."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def paired_median_seconds(
    fn: Callable[[], object], baseline: Callable[[], object], repeat: int
) -> tuple[float, float]:
    """Median wall times of ``fn`` and ``baseline``, called alternately ``repeat`` times each
    after one warm-up call of each, so that both see the same drift of a shared machine."""
    fn()
    baseline()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for f, ts in ((fn, times[0]), (baseline, times[1])):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
    return float(np.median(times[0])), float(np.median(times[1]))


def interleaved_times(steps: dict[str, Callable[[], object]], repeats: int,
                      clock: Callable[[], float] = time.perf_counter
                      ) -> dict[str, list[float]]:
    """Wall times (seconds; or another ``clock``'s, e.g. time.process_time for the CPU time of
    all the process's threads) of each step, after one warm-up call of each (numba kernels load
    or compile), ``repeats`` rounds with the steps interleaved so that all see the same drift
    of a shared machine."""
    times: dict[str, list[float]] = {k: [] for k in steps}
    for step in steps.values():
        step()
    for _ in range(repeats):
        for k, step in steps.items():
            t0 = clock()
            step()
            times[k].append(clock() - t0)
    return times
