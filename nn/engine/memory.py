"""Keep freed memory for reuse: glibc's malloc tuned for a training loop's large temporaries.

A training step allocates and frees the same large arrays every step: im2col windows, matmul
outputs, gradients, 0.1 to 10 MB each. glibc's malloc serves arrays above its mmap threshold
with fresh pages and hands the free top of its heap back to the operating system once it
exceeds the trim threshold (both adjust themselves, to at most 32 MiB and twice that). Fresh
pages fault on first touch, a microsecond or more each, so the step pays for its memory again
every time: in ``benchmarks/bench_models.py``'s CNN that was 1900 to 3200 page faults a step,
some 40% of the step's CPU time, whatever the policy (and the count moved with what ran
before, which is why float32 once measured slower than mixed_float16).

``retain_freed_memory()`` fixes both thresholds: arrays up to 32 MiB come from the heap, and up
to 128 MiB of freed heap is kept for the next step instead of being returned, as a caching
allocator does. The price is that a process's resident memory stays near its peak. ``import nn``
applies it once (``apply_default``) unless the environment sets ``NN_RETAIN_FREED_MEMORY=0``;
on a C library other than glibc (macOS, Windows, musl) it does nothing and returns False.
"""

from __future__ import annotations

import ctypes
import os
import platform

ENV = "NN_RETAIN_FREED_MEMORY"
MMAP_THRESHOLD = 32 << 20  # glibc's largest allowed value (HEAP_MAX_SIZE / 2 on 64-bit)
TRIM_THRESHOLD = 128 << 20

# mallopt parameter numbers, from glibc's <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def retain_freed_memory(mmap_threshold: int = MMAP_THRESHOLD,
                        trim_threshold: int = TRIM_THRESHOLD) -> bool:
    """Serve allocations below ``mmap_threshold`` bytes from the heap and keep up to
    ``trim_threshold`` bytes of freed heap for reuse (glibc ``mallopt``); True if applied,
    False on a C library that is not glibc. Process-wide, and it ends glibc's own adjustment of
    both thresholds."""
    for name, value in (("mmap_threshold", mmap_threshold), ("trim_threshold", trim_threshold)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"retain_freed_memory: {name} must be a whole number of bytes "
                             f">= 0, got {value!r}")
    if mmap_threshold > MMAP_THRESHOLD:
        raise ValueError(f"retain_freed_memory: mmap_threshold must be at most {MMAP_THRESHOLD} "
                         f"(glibc's limit), got {mmap_threshold}")
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, mmap_threshold)) and bool(
        mallopt(_M_TRIM_THRESHOLD, min(trim_threshold, 2**31 - 1)))


def apply_default() -> bool:
    """``retain_freed_memory()`` unless ``NN_RETAIN_FREED_MEMORY=0``; True if applied."""
    value = os.environ.get(ENV, "1")
    if value not in ("0", "1"):
        raise ValueError(f"{ENV} must be 0 (leave glibc's malloc as it is) or 1, got {value!r}")
    return value == "1" and retain_freed_memory()
