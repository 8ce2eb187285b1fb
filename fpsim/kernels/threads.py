"""Run a range kernel over a large array on several threads: a small pool of Python threads.

Every kernel here takes ``(..., lo, hi, ...)`` and releases the GIL (``nogil=True``), so
``run`` splits ``[0, n)`` into one contiguous block per thread, runs the first block on the
calling thread and the others on the pool, and returns the kernels' results in block order.
No OpenMP or TBB runtime is involved, which makes it safe to ``fork`` after a parallel call (the
child drops the parent's pool and starts its own on first use) and safe to call from several
Python threads at once (each call waits only for its own blocks).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

# Below this many elements a kernel runs on the calling thread: handing out blocks costs more.
PARALLEL_MIN = 1 << 15


def _default_threads() -> int:
    for name in ("FPSIM_NUM_THREADS", "NUMBA_NUM_THREADS"):
        env = os.environ.get(name)
        if env:
            try:
                return max(1, int(env))
            except ValueError:
                raise ValueError(f"{name} must be a whole number of threads, got {env!r}"
                                 ) from None
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
               else (os.cpu_count() or 1))


_threads = _default_threads()
_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def get_num_threads() -> int:
    """How many threads a large array is split over (FPSIM_NUM_THREADS, else the usable CPUs)."""
    return _threads


def _get_pool() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=max(1, _threads - 1),
                                       thread_name_prefix="fpsim-kernel")
        return _pool


def _forget_pool_after_fork() -> None:
    """In a forked child the parent's worker threads do not exist: start afresh."""
    global _pool, _lock
    _pool = None
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_after_fork)


def run(kernel: Callable[..., Any], n: int, before: tuple, after: tuple,
        parallel: bool = True, work: int | None = None, start: int = 0) -> list[Any]:
    """``[kernel(*before, lo, hi, *after) for each block]`` over ``[start, n)``: one block on
    the calling thread when the work (``n - start`` elements unless given) is below
    ``PARALLEL_MIN`` or ``parallel=False``, else one block per thread (at most one an
    element)."""
    count = n - start
    work = count if work is None else work
    blocks = min(_threads, count) if parallel and work >= PARALLEL_MIN else 1
    if blocks <= 1:
        return [kernel(*before, start, n, *after)]
    per = -(-count // blocks)
    bounds = [(start + k * per, min(n, start + (k + 1) * per)) for k in range(blocks)]
    pool = _get_pool()
    futures = [pool.submit(kernel, *before, lo, hi, *after) for lo, hi in bounds[1:]]
    first = kernel(*before, bounds[0][0], bounds[0][1], *after)
    return [first, *(f.result() for f in futures)]
