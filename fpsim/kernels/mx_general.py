"""The general block-quantization kernel: every MX and NVFP4 format, every element rounding
mode (stochastic with its random bits), float32 or float64 input.

One pass per block of ``block`` consecutive elements of a row (the last block of a row may be
shorter), in float64 throughout:

1. the block's amax; a NaN or inf in it gives the NaN scale (every value NaN, elements 0);
2. the divisor: MX, ``2^e`` with e from fpsim.kernels.mx.shared_exponent; two-level (NVFP4),
   ``block_scale * tensor_scale`` with ``block_scale = amax / (max_elem * tensor_scale)``
   rounded to E4M3 (the scale rule's mode, saturating);
3. each element ``x / divisor`` (one float64 division: exact for a power of two, and for
   float32 input a correctly rounded quotient that is never within 2^-53 of an element
   midpoint unless on it) rounded to the element format with the general rounding kernel
   (saturating), and the value ``element * divisor`` (exact in float64) stored in the output's
   dtype (one rounding to float32 for float32 output). A zero divisor (a block scale rounded to
   0) gives signed zeros (+0 for MXINT8, whose integers have no -0).

This is fpsim.mx's reference decision list (see its module docstring), element for element.
Kernels assume validated input (fpsim.mx checks and packs the arguments).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from fpsim.kernels.accumulate import _round_f64
from fpsim.kernels.general import _round_bits
from fpsim.kernels.mx import shared_exponent


@njit(inline="always")
def _rnd(x, m, stochastic, seed, i, c, f):
    """The float64 x rounded to the format (general kernel; c: the float64 carrier)."""
    b = np.float64(x).view(np.int64)
    return np.int64(_round_bits(b, m, stochastic, seed, i, c, f)).view(np.float64)


@njit(inline="always")
def code_of(v, mant_bits, bias, emin, sign_bit):
    """The code of v (float64, a value of an IEEE-like format with mant_bits, bias, emin, its
    sign bit ``sign_bit``): S|E..E|M..M, subnormals with E = 0."""
    a = abs(v)
    b = np.float64(a).view(np.int64)
    e = (b >> 52) - 1023  # a is a normal float64 (or 0)
    if a == 0.0:
        mag = 0
    elif e >= emin:
        mag = ((e + bias) << mant_bits) | ((b >> (52 - mant_bits)) & ((1 << mant_bits) - 1))
    else:
        mag = int(a * math.ldexp(1.0, mant_bits - emin))  # k * 2^(emin - M), exactly k
    return np.uint8(mag | (sign_bit if math.copysign(1.0, v) < 0 else 0))


@njit(inline="always")
def _codes(src, ecodes, start, end, divisor, z, m, stochastic, seed, c, fe, mant_bits, ebias,
           eemin, esign, integer):
    """ecodes[i] = the code of src[i] / divisor rounded (+ z): encode's plain loop."""
    for i in range(start, end):
        j = np.uint64(i)
        el = _rnd(np.float64(src[j]) / divisor, m, stochastic, seed, i, c, fe) + z
        if integer:  # int8 two's complement of el * 64
            ecodes[j] = np.uint8(np.int64(round(el * 64.0)) & 0xFF)
        else:
            ecodes[j] = code_of(el, mant_bits, ebias, eemin, esign)


@njit(inline="always")
def _values(src, dst, start, end, divisor, z, m, stochastic, seed, c, fe):
    """dst[i] = (src[i] / divisor rounded, + z) * divisor: the plain loop, no branches."""
    for i in range(start, end):
        j = np.uint64(i)
        el = _rnd(np.float64(src[j]) / divisor, m, stochastic, seed, i, c, fe) + z
        dst[j] = el * divisor


@njit(nogil=True, cache=True)
def mx_blocks(src, dst, ecodes, scodes, lo, hi, n, block, two_level, tensor_scale, rule, emax,
              max_elem, mant_bits, integer, m, seed, c, fe, ms, fs, values, parts, count,
              layout):
    """Blocks lo..hi-1 of src (1-D view of C rows of n elements, float32 or float64).

    values: dst[i] = the dequantized value (dst has src's dtype); parts: ecodes[i] = the
    element's code and scodes[b] = the block scale's code (uint8). ``layout``: (element
    bias, element emin, element sign bit, scale NaN code, E4M3 bias, E4M3 mantissa bits,
    E4M3 emin, E8M0 bias). Returns int64 (blocks, saturated, flushed, clipped blocks) when
    ``count``, else zeros.
    """
    ebias, eemin, esign, nan_code, sbias, smant, semin, e8bias = layout
    counts = np.zeros(4, dtype=np.int64)
    nb = (n + block - 1) // block
    for b in range(lo, hi):
        r = b // nb
        start = r * n + (b - r * nb) * block
        end = min(r * n + n, start + block)
        amax = 0.0
        for i in range(start, end):
            amax = max(amax, abs(np.float64(src[i])))  # (max ignores a NaN: tested below)
        bad = not math.isfinite(amax)
        for i in range(start, end):
            if src[i] != src[i]:
                bad = True
        counts[0] += 1
        if bad:
            for i in range(start, end):
                if values:
                    dst[i] = np.nan
                if parts:
                    ecodes[i] = 0
            if parts:
                scodes[b] = nan_code
            continue
        if two_level:
            scale = _round_f64(amax / (max_elem * tensor_scale), ms, 0, 0, c, fs)
            divisor = scale * tensor_scale
            if parts:
                scodes[b] = code_of(scale, smant, sbias, semin, 0)
        else:
            e = shared_exponent(amax, rule, emax, max_elem, mant_bits)
            divisor = math.ldexp(1.0, e)
            if parts:
                scodes[b] = np.uint8(e + e8bias)
        live = divisor > 0.0
        # + z: +0.0 turns MXINT8's -0 into +0 (its integers have no -0); -0.0 changes nothing
        z = 0.0 if integer else -0.0
        if live and values and not parts and not count:
            if m.STOCHASTIC:
                _values(src, dst, start, end, divisor, z, m, True, seed, c, fe)
            else:
                _values(src, dst, start, end, divisor, z, m, False, seed, c, fe)
            continue
        if live and parts and not values and not count:
            if m.STOCHASTIC:
                _codes(src, ecodes, start, end, divisor, z, m, True, seed, c, fe, mant_bits,
                       ebias, eemin, esign, integer)
            else:
                _codes(src, ecodes, start, end, divisor, z, m, False, seed, c, fe, mant_bits,
                       ebias, eemin, esign, integer)
            continue
        over = 0.0
        for i in range(start, end):
            x = np.float64(src[i])
            q = x / divisor if live else x
            if live:
                el = _round_f64(q, m, seed, i, c, fe)
            else:
                el = math.copysign(0.0, x)
            el = el + z
            if values:
                dst[i] = el * divisor
            if parts:
                if integer:  # int8 two's complement of el * 64
                    ecodes[i] = np.uint8(np.int64(round(el * 64.0)) & 0xFF)
                else:
                    ecodes[i] = code_of(el, mant_bits, ebias, eemin, esign)
            if count:
                aq = abs(q)
                over = max(over, aq)
                counts[1] += aq > max_elem
                counts[2] += (q != 0.0) and (el == 0.0)
        if count:
            counts[3] += over > max_elem
    return counts


@njit(nogil=True, cache=True)
def finite_amax_bits(bits, lo, hi, abs_mask, inf_bits):
    """The largest finite |x| of bits[lo:hi] (an integer view of float32 or float64 values)
    as the integer of its bits (0 if none): |x|'s bits are monotone in |x|, NaN and inf lie
    at or above ``inf_bits`` and count as 0 (an integer select and max: the loop vectorizes)."""
    a = np.int64(0)
    for i in range(lo, hi):
        v = np.int64(bits[np.uint64(i)]) & abs_mask
        a = max(a, v if v < inf_bits else np.int64(0))
    return a


_ABS32 = np.int32(0x7FFFFFFF)  # 0|11111111|111...1: every bit of a float32 but the sign
_INF32 = np.int32(0x7F800000)  # 0|11111111|000...0: |x| at or above it is inf or NaN


@njit(nogil=True, cache=True)
def finite_amax_f32(bits, lo, hi):
    """finite_amax_bits for float32 (``bits``: an int32 view) in int32 throughout, so the
    vector loop holds twice the elements."""
    a = np.int32(0)
    for i in range(lo, hi):
        v = np.int32(bits[np.uint64(i)] & _ABS32)
        a = np.int32(max(a, np.int32(v if v < _INF32 else 0)))
    return a
