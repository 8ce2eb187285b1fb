"""The float32 nearest-even fast path: fpsim.round's most common call, and nn's fused kernels'.

Valid for a float32 carrier, a format with subnormals, 0 < M < 23, emin <= 0 and a normal range
inside float32's, with ``p`` a ``NearestEvenF32`` (fpsim.quantize.nearest_even_f32_constants
packs it). The general kernel computes the same function; this one is float32 arithmetic only,
so it runs eight lanes wide, cheap enough that counting events beside it costs little.

Rounding |x| to the format's grid is one float32 addition. The grid spacing in |x|'s binade
[2^e, 2^(e+1)) is 2^(e-M) (2^q, q = emin - M, below the normal range). Take the power of two
B = max(2^(e+23-M), C_SUB), C_SUB = 2^(q+23): its float32 ulp is that spacing, and |x| < B,
so |x| + B lies in [B, 2B) where float32's own round-to-nearest-even works on exactly the
format's grid (B is an even multiple of the spacing, so "even" means the same thing), and
(|x| + B) - B is exact (Sterbenz). B's bits are |x|'s exponent field plus (23 - M) << 23:

    |x| = 0|EEEEEEEE|MMMMMMMMMMMMMMMMMMMMMMM
    B   = 0|EEEEEEEE + (23 - M)|00000000000000000000000

Where 2^(e+23-M) would pass float32's range (e >= 64), |x| is first scaled by 2^-64 and the
result back by 2^64, both exact. Overflow is a comparison: THRESHOLD is the smallest float32
whose rounding exceeds max (max plus half its spacing, plus one ulp where max's code is even,
as the tie then goes down to max).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fpsim.kernels.general import CHUNK

_EXPONENT_FIELD = np.uint32(((1 << 8) - 1) << 23)  # 0|11111111|000...0


@njit(inline="always")
def _nearest_even_f32_parts(v, p):
    """(v rounded, |v|, |v| rounded before the overflow and NaN cases, |v| >= THRESHOLD)."""
    av = abs(v)
    big = av >= np.float32(2.0**64)
    avs = av * (np.float32(2.0**-64) if big else np.float32(1.0))
    b = np.uint32((np.float32(avs).view(np.uint32) & _EXPONENT_FIELD) + p.SHIFT)
    b = b.view(np.float32)
    b = b if b > p.C_SUB else p.C_SUB
    ra = ((avs + b) - b) * (np.float32(2.0**64) if big else np.float32(1.0))
    r = np.copysign(ra, v)
    if p.NO_NEG_ZERO:
        r = ra if ra == 0 else r
    over = av >= p.THRESHOLD
    r = np.copysign(p.OVERFLOW, v) if over else r  # finite overflow and inf input
    return (v if v != v else r), av, ra, over  # NaN stays NaN, payload and all


@njit(inline="always")
def round_nearest_even_f32_value(v, p):
    """The float32 ``v`` rounded to nearest-even in the format described by ``p``."""
    return _nearest_even_f32_parts(v, p)[0]


@njit(nogil=True, cache=True)
def round_nearest_even_f32_range(src, dst, lo, hi, p):
    """dst[lo:hi] = src[lo:hi] rounded to nearest-even (1-D float32 arrays; dst may be src)."""
    for i in range(lo, hi):
        j = np.uint64(i)  # an unsigned index: no wraparound check, so the loop vectorizes
        dst[j] = round_nearest_even_f32_value(src[j], p)


@njit(nogil=True, cache=True)
def count_nearest_even_f32_range(src, dst, lo, hi, p):
    """round_nearest_even_f32_range that also returns the five event counts of the general
    kernel's round_count_range (int64s).

    Each chunk keeps six int32 counters, each one float32 comparison, most of them shared with
    the rounding itself (the np.int32 casts keep them 32-bit, so the loop stays eight lanes
    wide). Zero input gives zero output, so underflow = zero results - zero inputs; subnormal =
    results below the smallest normal - zero results; the fast path makes NaN from non-NaN input
    only by overflowing (finite or inf) into a format whose overflow is NaN.
    """
    totals = np.zeros(6, dtype=np.int64)
    for start in range(lo, hi, CHUNK):
        inexact = np.int32(0)
        overflow = np.int32(0)
        over = np.int32(0)
        zero = np.int32(0)
        small = np.int32(0)
        zero_in = np.int32(0)
        for i in range(start, min(hi, start + CHUNK)):
            j = np.uint64(i)  # an unsigned index: no wraparound check, so the loop vectorizes
            v = src[j]
            r, av, ra, o = _nearest_even_f32_parts(v, p)
            dst[j] = r
            finite = av < np.float32(np.inf)
            inexact = np.int32(inexact + np.int32(finite & (r != v)))
            overflow = np.int32(overflow + np.int32(finite & o))
            over = np.int32(over + np.int32(o))  # with inf input
            zero = np.int32(zero + np.int32(ra == 0))  # (NaN and overflow never have ra == 0)
            small = np.int32(small + np.int32(ra < p.MIN_NORMAL))  # zero or subnormal
            zero_in = np.int32(zero_in + np.int32(v == 0))
        totals[0] += inexact
        totals[1] += overflow
        totals[2] += over
        totals[3] += zero
        totals[4] += small
        totals[5] += zero_in
    counts = np.empty(5, dtype=np.int64)
    counts[0] = totals[0]
    counts[1] = totals[1]
    counts[2] = totals[3] - totals[5]
    counts[3] = totals[4] - totals[3]
    counts[4] = totals[2] if p.OVERFLOW != p.OVERFLOW else 0
    return counts
