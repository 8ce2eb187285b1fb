"""The MX block-quantization kernel: float32 input, elements rounded to nearest even.

One pass per block of ``block`` consecutive elements of a row (the last block of a row may be
shorter): the block's amax, its shared exponent ``e`` (OCP MX: ``floor(log2 amax) - emax``,
or the "ceil" / "even" variants, clamped to E8M0's -127..127), then every element
``x * 2^-e`` rounded to nearest even in the element format, saturated, and multiplied back by
``2^e``. Both products are exact: scaling by a power of two is exact in float32 unless the
result falls below float32's normal range, and there it lies far below half the element
format's smallest subnormal, so it rounds to (signed) zero with or without the float32
rounding; every dequantized value ``element * 2^e`` is a float32 (shown in fpsim.mx).

A block holding NaN or inf gets the NaN scale: every element of it becomes NaN. An all-zero
block gets the smallest scale ``2^-127`` (its elements stay zero).

Kernels assume validated input (fpsim.mx checks and packs the arguments).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from fpsim.kernels.fast_f32 import round_nearest_even_f32_value

SCALE_RULES = ("floor", "ceil", "even")  # the kernel's rule argument is the index
SCALE_EMIN, SCALE_EMAX = -127, 127  # E8M0's exponent range


@njit(inline="always")
def shared_exponent(amax, rule, emax, max_elem, mant_bits):
    """The block's scale exponent from its amax (finite, >= 0; float64), clamped to E8M0's.

    floor: floor(log2 amax) - emax (OCP MX); ceil: the smallest e with amax <= max * 2^e
    (never clips); even: floor(log2 of amax rounded to nearest even at the element's
    precision) - emax. An all-zero block takes the smallest exponent.
    """
    if amax == 0:
        return SCALE_EMIN
    m, ex = math.frexp(amax)  # amax = m * 2^ex, m in [0.5, 1): floor(log2 amax) = ex - 1
    e = ex - 1 - emax
    if rule == 1:
        if amax > max_elem * math.ldexp(1.0, e):
            e += 1
    elif rule == 2:
        if 2.0 * m >= 2.0 - math.ldexp(1.0, -(mant_bits + 1)):
            e += 1  # amax's significand rounds up to 2 at the element's precision
    return min(max(e, SCALE_EMIN), SCALE_EMAX)


@njit(nogil=True, cache=True)
def mx_quantize_f32(src, dst, block, rule, emax, max_elem, mant_bits, p):
    """dst = src block-quantized (2-D float32 arrays, rows of blocks along the last axis).

    Returns int64 counts (blocks, saturated elements, flushed elements, clipped blocks): a
    saturated element's scaled magnitude exceeds max; a flushed one is non-zero and became 0;
    a clipped block is one whose scaled amax exceeds max.
    """
    counts = np.zeros(4, dtype=np.int64)
    rows, n = src.shape
    fmax = np.float32(max_elem)
    for r in range(rows):
        for lo in range(0, n, block):
            hi = min(n, lo + block)
            amax = np.float32(0.0)
            finite = True
            for i in range(lo, hi):
                a = abs(src[r, i])
                finite = finite and a < np.float32(np.inf)  # NaN compares False too
                amax = max(amax, a)
            counts[0] += 1
            if not finite:
                for i in range(lo, hi):
                    dst[r, i] = np.float32(np.nan)
                continue
            e = shared_exponent(np.float64(amax), rule, emax, max_elem, mant_bits)
            down = np.float32(math.ldexp(1.0, -e))
            up = np.float32(math.ldexp(1.0, e))
            saturated = np.int32(0)
            flushed = np.int32(0)
            for i in range(lo, hi):
                v = src[r, i] * down
                q = round_nearest_even_f32_value(v, p)
                saturated += np.int32(abs(v) > fmax)
                flushed += np.int32((v != 0) & (q == 0))
                dst[r, i] = q * up
            counts[1] += saturated
            counts[2] += flushed
            counts[3] += np.int64(amax * down > fmax)
    return counts
