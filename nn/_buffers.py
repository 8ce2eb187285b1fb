"""Recycled output arrays for nn's hot ops: a training step allocates its large arrays afresh.

Why: a small model's training step makes the same large arrays every step (activations, the
compute-format copies of the weights, matmul outputs, gradients) and frees them all at its
end. glibc's malloc hands the freed top of the heap back to the kernel ("trimming", above a
threshold it sets from the sizes it has seen) and maps large arrays afresh, so the next step
page-faults every new page again: measured on the 64-256-256-10 MLP at batch 256, the
mixed_float16 step took about 350 page faults (over half its extra time over float32), the
float32 step none, and which variant paid at batch 2048 changed from run to run.

``empty(shape)`` instead hands out an array the pool made earlier, once nothing but the pool
refers to it any more (``sys.getrefcount``): every Tensor, graph node, view (a view holds its
base) and Python variable counts, so an array still visible anywhere is never written, and
results are the same as with ``np.empty``. The pool is per thread (a thread never takes an
array another thread may be filling), keeps at most ``MAX_PER_SHAPE`` arrays of one shape and
``MAX_BYTES`` in all (beyond that, plain ``np.empty``; every ``DROP_EVERY``-th such request
drops the arrays nobody uses, to make room), and ignores arrays below ``MIN_BYTES``, which
malloc's free lists serve well.
Memory the pool holds is the working set of the largest step seen, as PyTorch's caching
allocator keeps its blocks; ``clear()`` lets it go.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

ENABLED = True  # False: every call is np.empty (the tests compare both)
MIN_BYTES = 1 << 16  # smaller arrays come from malloc's free lists without page faults
MAX_PER_SHAPE = 16  # a step of a small MLP holds up to about ten arrays of one shape at once
MAX_BYTES = 64 << 20  # the most one thread's pool keeps
DROP_EVERY = 8  # with the pool full, look for unused arrays to drop at every 8th request

Key = tuple[tuple[int, ...], np.dtype]


class _Pool(threading.local):
    def __init__(self) -> None:
        self.arrays: dict[Key, list[np.ndarray]] = {}
        self.nbytes = 0
        self.over_budget = 0  # requests that found the pool full since the last drop


_pool = _Pool()


def _refcounts(arrays: list[np.ndarray]) -> list[int]:
    return [sys.getrefcount(a) for a in arrays]


# what ``_refcounts`` reports for an array only the pool's list refers to (measured, not
# assumed: how many references the interpreter itself holds meanwhile is its own business)
_FREE = _refcounts([np.empty(0)])[0]


def _take(arrays: list[np.ndarray]) -> np.ndarray | None:
    for i, count in enumerate(_refcounts(arrays)):
        if count == _FREE:
            return arrays[i]
    return None


def _drop_unused() -> None:
    """Forget every pooled array nobody else refers to (to make room under MAX_BYTES)."""
    for key, arrays in list(_pool.arrays.items()):
        kept = [a for a, count in zip(arrays, _refcounts(arrays), strict=True) if count > _FREE]
        _pool.nbytes -= sum(a.nbytes for a in arrays) - sum(a.nbytes for a in kept)
        if kept:
            _pool.arrays[key] = kept
        else:
            del _pool.arrays[key]


def empty(shape: tuple[int, ...], dtype: np.dtype | type = np.float32) -> np.ndarray:
    """An uninitialised C-contiguous array of ``shape``, recycled when one is free (see the
    module docstring); the caller overwrites every element, as after ``np.empty``."""
    dtype = np.dtype(dtype)
    nbytes = dtype.itemsize
    for n in shape:
        nbytes *= n
    if nbytes < MIN_BYTES or not ENABLED:
        return np.empty(shape, dtype)
    key = (shape, dtype)
    arrays = _pool.arrays.get(key)
    if arrays is not None:
        found = _take(arrays)
        if found is not None:
            return found
    out = np.empty(shape, dtype)
    if nbytes > MAX_BYTES:
        return out
    if _pool.nbytes + nbytes > MAX_BYTES:
        _pool.over_budget += 1
        if _pool.over_budget >= DROP_EVERY:  # (a scan of every pooled array: not every call)
            _pool.over_budget = 0
            _drop_unused()
            arrays = _pool.arrays.get(key)
    if _pool.nbytes + nbytes <= MAX_BYTES and (arrays is None or len(arrays) < MAX_PER_SHAPE):
        _pool.arrays.setdefault(key, []).append(out)
        _pool.nbytes += nbytes
    return out


def clear() -> None:
    """Let go of this thread's pooled arrays (those still in use live on with their users)."""
    _pool.arrays.clear()
    _pool.nbytes = 0


def pooled_bytes() -> int:
    """Bytes this thread's pool holds (in use or free)."""
    return _pool.nbytes
