"""How many threads numpy's BLAS uses for nn's matrices: ``limit_blas`` sets it for the rest of
the process, ``blas_thread_count`` reads it (both through threadpoolctl).

nn's matrices are small (tens to a few hundred rows), and on a busy machine OpenBLAS's
spinning threads cost more than they bring for them: one training run measured 23 s with one
BLAS thread against 104 s with two, on two shared cores. ``BLAS_THREADS`` is ours.
"""

from __future__ import annotations

from typing import Any

BLAS_THREADS = 1  # ours: see the module docstring

_LIMITER: Any = None  # keeps the threadpoolctl limit alive for the rest of the process


def blas_thread_count() -> int | None:
    """The threads of the BLAS numpy calls (threadpoolctl), or None when none is found (or
    threadpoolctl is not installed)."""
    try:
        from threadpoolctl import threadpool_info  # type: ignore[import-untyped]
    except ImportError:
        return None
    counts = [int(p["num_threads"]) for p in threadpool_info() if p.get("user_api") == "blas"]
    return max(counts) if counts else None


def limit_blas(threads: int | None) -> int | None:
    """Limit BLAS to ``threads`` threads (>= 1) for the rest of this process (None: leave it
    as the environment set it); returns the count now in force (None when threadpoolctl finds
    no BLAS)."""
    global _LIMITER
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"limit_blas: threads must be an int >= 1 or None, got "
                             f"{threads!r}")
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:  # BLAS stays as the environment set it
            return None
        _LIMITER = threadpool_limits(limits=threads, user_api="blas")
    return blas_thread_count()
