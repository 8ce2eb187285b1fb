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


_ABS = np.int32(0x7FFFFFFF)  # every bit of a float32 but the sign
_INF_BITS = np.int32(0x7F800000)  # 0|11111111|000...0: |x| at or above it is inf or NaN
_EXPONENT_FIELD = np.uint32(0x7F800000)
_MANTISSA = np.int32((1 << 23) - 1)


@njit(inline="always")
def pow2_f32(k):
    """2^k as a float32 for -127 <= k <= 127, from its bits (2^-127 is a subnormal)."""
    b = ((k + 127) << 23) if k >= -126 else (1 << (k + 149))
    return np.int32(b).view(np.float32)


@njit(inline="always")
def first_block(lo, nb):
    """(row, column) of block ``lo`` in rows of ``nb`` blocks: the walk's start (next_block
    steps on from there, with no division inside the loop)."""
    r = lo // nb
    return r, lo - r * nb


@njit(inline="always")
def block_span(r, c, n, block, nb):
    """Block ``c`` of row ``r`` (rows of n elements, nb blocks each) is the flat elements
    ``[start, end)`` (the last block of a row may be shorter): (start, end, the next block's
    row and column)."""
    start = r * n + c * block
    end = min(r * n + n, start + block)
    c += 1
    if c == nb:
        r += 1
        c = 0
    return start, end, r, c


@njit(inline="always")
def next_block(bits, r, c, n, block, nb):
    """The block walk every fused kernel shares, over C rows of n elements (``bits``: their
    1-D int32 view, float32 bits): block ``c`` of row ``r`` is elements ``[start, end)`` (the
    last block of a row may be shorter). Returns (start, end, the block's largest ``|x|`` as
    bits, the next block's row and column). ``|x|``'s bits are monotone in ``|x|`` and NaN
    sorts above inf, so ``amax_bits >= _INF_BITS`` marks a block holding NaN or inf; the
    integer max vectorizes."""
    start, end, r, c = block_span(r, c, n, block, nb)
    amax_bits = np.int32(0)
    for i in range(start, end):  # in int32 throughout: twice the lanes of numba's int64
        amax_bits = np.int32(max(amax_bits, np.int32(bits[np.uint64(i)] & _ABS)))
    return start, end, amax_bits, r, c


@njit(inline="always")
def fill_nan(dst, start, end):
    """A block holding NaN or inf: every value NaN (its scale is the NaN scale)."""
    for i in range(start, end):
        dst[np.uint64(i)] = np.nan


@njit(inline="always")
def nan_block_codes(ecodes, scodes, b, start, end, nan_code):
    """The codes of a block holding NaN or inf: element codes 0, the scale's NaN code."""
    for i in range(start, end):
        ecodes[np.uint64(i)] = 0
    scodes[b] = nan_code


@njit(inline="always")
def pow2_f64(k):
    """2^k as a float64 for -1022 <= k <= 1023, from its bits (no libm call)."""
    return np.int64((k + 1023) << 52).view(np.float64)


@njit(inline="always")
def shared_exponent_bits(amax_bits, rule, emax, fmax, mant_bits):
    """shared_exponent from the float32 bits of amax (finite): for a normal amax the exponent
    and the "even" carry come from its fields; a subnormal amax takes the float64 route."""
    ef = amax_bits >> 23
    if ef == 0:
        return shared_exponent(np.float64(np.int32(amax_bits).view(np.float32)), rule, emax,
                               np.float64(fmax), mant_bits)
    e = ef - 127 - emax
    if rule == 1:
        if e < SCALE_EMAX and np.int32(amax_bits).view(np.float32) > fmax * pow2_f32(
                max(e, SCALE_EMIN)):
            e += 1
    elif rule == 2:  # the significand rounds up to 2 at the element's precision
        e += (amax_bits & _MANTISSA) >= (1 << 23) - (1 << (22 - mant_bits))
    return min(max(e, SCALE_EMIN), SCALE_EMAX)


@njit(inline="always")
def _element(x, down, up, fmax, p):
    """x * 2^-e rounded to nearest even in the element format, saturated, times 2^e.

    |x * 2^-e| < 2^64, so the fast path's addition trick needs no rescaling (see
    fpsim.kernels.fast_f32): with B = 2^(e' + 23 - M) (at least C_SUB), (|v| + B) - B is |v|
    rounded on the format's grid; min() saturates at max. The input is finite.
    """
    v = x * down
    av = abs(v)
    b = np.uint32((np.float32(av).view(np.uint32) & _EXPONENT_FIELD) + p.SHIFT).view(np.float32)
    b = b if b > p.C_SUB else p.C_SUB
    ra = min((av + b) - b, fmax)
    return v, ra, np.copysign(ra, v) * up


@njit(nogil=True, cache=True)
def mx_quantize_f32(src, dst, lo, hi, n, block, rule, emax, max_elem, mant_bits, p, integer,
                    count):
    """dst = src block-quantized for the blocks lo..hi-1 (src, dst: 1-D float32 views of C
    arrays of rows of n elements, blocked along the rows; block b is row b // nb, elements
    (b % nb) * block onwards). Blocks are independent, so ranges of them run in parallel.
    ``integer`` (MXINT8): each value plus +0.0, as its integers have no -0 (-0 + 0 = +0;
    the other formats add -0.0, which changes nothing), in the same pass.

    Returns int64 counts (blocks, saturated elements, flushed elements, clipped blocks) when
    ``count`` (else zeros): a saturated element's scaled magnitude exceeds max; a flushed one
    is non-zero and became 0; a clipped block is one whose scaled amax exceeds max.
    """
    counts = np.zeros(4, dtype=np.int64)
    bits = src.view(np.int32)
    nb = (n + block - 1) // block
    fmax = np.float32(max_elem)
    z = np.float32(0.0) if integer else np.float32(-0.0)
    r, c = first_block(lo, nb)
    for _ in range(lo, hi):
        start, end, amax_bits, r, c = next_block(bits, r, c, n, block, nb)
        if amax_bits >= _INF_BITS:
            fill_nan(dst, start, end)
            counts[0] += 1
            continue
        e = shared_exponent_bits(amax_bits, rule, emax, fmax, mant_bits)
        down = pow2_f32(-e)
        up = pow2_f32(e)
        if not count:
            for i in range(start, end):
                j = np.uint64(i)  # an unsigned index: no wraparound check, so it vectorizes
                dst[j] = _element(src[j], down, up, fmax, p)[2] + z
            continue
        saturated = np.int32(0)
        flushed = np.int32(0)
        for i in range(start, end):
            j = np.uint64(i)
            v, ra, out = _element(src[j], down, up, fmax, p)
            saturated += np.int32(abs(v) > fmax)
            flushed += np.int32((v != 0) & (ra == 0))
            dst[j] = out + z
        counts[0] += 1
        counts[1] += saturated
        counts[2] += flushed
        counts[3] += np.int64(np.int32(amax_bits).view(np.float32) * down > fmax)
    return counts


@njit(nogil=True, cache=True)
def mx_encode_f32(src, ecodes, scodes, lo, hi, n, block, rule, emax, max_elem, mant_bits, p,
                  layout):
    """(element codes, scale codes) of src as mx_quantize_f32 rounds it, for the blocks
    lo..hi-1: the scale's E8M0 code ``e + 127``, each element's code from its rounded
    magnitude ``ra`` (``magnitude_code``) with the sign bit for negative x (-0 too); MXINT8
    (``integer``): the int8 two's complement of ``ra * 64`` with x's sign (+0 for -0). A NaN
    block gets the scale code 0xFF and element codes 0. ``layout``: (element bias, element
    emin, element sign bit, integer)."""
    ebias, eemin, esign, integer = layout
    kc = code_constants(mant_bits, ebias, eemin)
    bits = src.view(np.int32)
    nb = (n + block - 1) // block
    fmax = np.float32(max_elem)
    r, c = first_block(lo, nb)
    for b in range(lo, hi):
        start, end, amax_bits, r, c = next_block(bits, r, c, n, block, nb)
        if amax_bits >= _INF_BITS:
            nan_block_codes(ecodes, scodes, b, start, end, 0xFF)
            continue
        e = shared_exponent_bits(amax_bits, rule, emax, fmax, mant_bits)
        scodes[b] = np.uint8(e + 127)
        down = pow2_f32(-e)
        up = pow2_f32(e)
        if integer:
            for i in range(start, end):
                j = np.uint64(i)
                v = _element(src[j], down, up, fmax, p)
                q = np.int32(np.copysign(v[1], v[0]) * np.float32(64.0))  # -0 -> 0
                ecodes[j] = np.uint8(q & 0xFF)
            continue
        for i in range(start, end):
            j = np.uint64(i)
            mag = magnitude_code(_element(src[j], down, up, fmax, p)[1], kc)
            ecodes[j] = np.uint8(mag | (esign if bits[j] < 0 else 0))


@njit(inline="always")
def code_constants(mant_bits, bias, emin):
    """magnitude_code's constants for an element format (computed once, outside the loop):
    (float32's exponent bias less the element's, in the exponent field; mant_bits;
    2^(mant_bits - emin); 2^emin)."""
    return (np.int32(127 - bias) << 23, mant_bits, np.float32(2.0 ** (mant_bits - emin)),
            np.float32(2.0**emin))


@njit(inline="always")
def magnitude_code(ra, k):
    """The code E..E|M..M of ``ra`` (>= 0, a value of an element format, as a normal
    float32; ``k``: the format's code_constants), branch-free:

        normal ra (>= 2^emin): E = ra's exponent + bias, M = ra's top mant_bits mantissa bits
        (ra's bits less float32's exponent bias, plus the element's, shifted down)
        subnormal ra: E = 0, M = ra * 2^(mant_bits - emin) (an integer, exactly)
    """
    a = np.float32(ra)
    normal = ((a.view(np.int32) - k[0]) >> (23 - k[1])) & 0xFF
    return normal if a >= k[3] else np.int32(a * k[2])
