"""The accumulation kernel (fpsim.accumulate): sums of rows, rounded every addition.

The accumulator is a float64 holding a value of the accumulation format. Each step adds one
term exactly in spirit: TwoSum gives hi + lo == s + x exactly; when lo != 0, hi is moved to the
odd neighbour on lo's side (round-to-odd into float64), which keeps the "inexact" information
so that the one rounding to a format of p <= 24 bits (53 >= p + 2) is the correct rounding of
the exact s + x. Products of two float32-representable values (<= 24-bit significands, at most
48 bits, exponents far inside float64's range) are exact in float64.

The kernel works on rows ``[lo, hi)`` and releases the GIL (fpsim.kernels.threads runs blocks of
rows in parallel). Matrix products use it too, on rows of exact products (fpsim.accumulate):
one kernel to compile instead of two. ``mode`` is a code of fpsim.kernels.general.MODE_KERNELS.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fpsim.kernels.general import _round_bits


@njit(inline="always")
def _odd_sum(s, x):
    """s + x rounded to odd in float64 (exactly s + x when that fits float64)."""
    hi = s + x
    bb = hi - s
    lo = (s - (hi - bb)) + (x - bb)  # TwoSum: hi + lo == s + x exactly (no overflow here)
    if lo != 0.0 and np.isfinite(hi):
        b = np.float64(hi).view(np.int64)
        if (b & 1) == 0:
            # sign-magnitude bits: +1 grows |hi|, -1 shrinks it; step toward the exact value
            b = b + 1 if (lo > 0.0) == (hi > 0.0) else b - 1
            hi = np.int64(b).view(np.float64)
    return hi


@njit
def _round_f64(x, mode, seed, i, c, f):
    """A float64 value rounded to the format (c must be the float64 carrier tuple)."""
    b = np.float64(x).view(np.int64)
    return np.int64(_round_bits(b, mode, mode.STOCHASTIC, seed, i, c, f)).view(np.float64)


@njit(inline="always")
def lost(a, b, t):
    """1 when the addition ``a + b``, rounded to ``t``, lost a non-zero operand whole (``t``
    equals the other one, finite): a swamped term, the telemetry of fpsim.monitor."""
    return np.int64(np.isfinite(t) and ((b != 0.0 and t == a) or (a != 0.0 and t == b)))


@njit
def _reduce_row(x, buf, pairwise, mode, seed, base, c, f, counts):
    """One row's sum, the accumulator rounded to the format after every addition; adds the
    row's additions and swamped terms (``lost``) to ``counts``.

    sequential: s = x[0]; s = rnd(s + x[k]) for k = 1..n-1.
    pairwise: adjacent pairs level by level, rnd(buf[2i] + buf[2i+1]) (a balanced tree);
    an odd element out moves up a level unchanged. ``buf`` has room for n values.
    """
    n = x.size
    if n == 0:
        return 0.0
    counts[0] += n - 1
    if not pairwise:
        s = _round_f64(x[0], mode, seed, base, c, f)
        for k in range(1, n):
            t = _round_f64(_odd_sum(s, x[k]), mode, seed, base + k, c, f)
            counts[1] += lost(s, x[k], t)
            s = t
        return s
    for k in range(n):
        buf[k] = _round_f64(x[k], mode, seed, base + k, c, f)
    step = n
    m = n
    while m > 1:
        half = m // 2
        for k in range(half):
            a, b = buf[2 * k], buf[2 * k + 1]
            buf[k] = _round_f64(_odd_sum(a, b), mode, seed, base + step + k, c, f)
            counts[1] += lost(a, b, buf[k])
        if m % 2 == 1:
            buf[half] = buf[m - 1]
        step += half
        m = m - half
    return buf[0]


@njit(nogil=True, cache=True)
def accumulate_rows(x, out, lo, hi, pairwise, mode, seed, c, f):
    """out[r] = sum of the float64 row x[r, :] with the accumulator rounded every addition,
    for the rows lo <= r < hi. Returns (additions, swamped terms): int64 counts for
    fpsim.monitor (an addition whose rounded result equals one operand while the other is
    non-zero lost that term whole)."""
    n = x.shape[1]
    counts = np.zeros(2, dtype=np.int64)
    for r in range(lo, hi):
        buf = np.empty(n if pairwise else 0, dtype=np.float64)
        out[r] = _reduce_row(x[r], buf, pairwise, mode, seed, r * 2 * n, c, f, counts)
    return counts
