"""The stochastic block-quantization kernel: float32 input, every MX format and NVFP4 (with
its default scale rule), elements rounded stochastically with ``rb`` random bits (56: the full
draw; fewer: ``rng_bits``).

The same decisions as fpsim.kernels.mx_general (fpsim.mx's reference list) for
``mode="stochastic"``, element for element and with the same random stream (element i of the
flat array draws fpsim.kernels.general.draw of its index, as every fpsim kernel), so the two
agree bit for bit. What makes it fast: the block walk and amax from the float32 bits
(fpsim.kernels.mx), the full draw's bit count a compile-time constant, and roundings written
for just these formats (signed, with subnormals, saturating, finite input) instead of the
general kernel's every case: an MX element rounds on its float32 bits (``_element_f32``),
NVFP4's quotient ``x / d`` on the float64 carrier (``_element_f64``, its twin). NVFP4 rows of
whole blocks of 16 take fpsim.kernels.mx_nvfp4's chunks (``nvfp4_stochastic_f32_whole``).

Why an MX element may round in float32: its quotient ``q = x * 2^-e`` is a float32 with the
same 24-bit significand as x (scaling by a power of two is exact) unless it lies below
float32's normal range. The general kernel rounds q on the float64 carrier, whose bits are

    S|EEEEEEEEEEE|MMMMMMMMMMMMMMMMMMMMMMM|00000000000000000000000000000      (29 zero bits)
                  '-- float32's 23 bits --'

and drops s + 29 of them (s: what the float32 carrier drops), adding the draw's low s + 29
bits ``u & mask``: a carry into the kept bits happens iff the float32 bits' dropped part plus
the draw's bits 29.. (``u >> 29``, s of them) reach 2^s, since the 29 low bits of the sum
cannot carry on their own. With ``rb < 56`` bits, ``v`` (the draw's top rb bits) is added
at the top of the dropped bits, so likewise only its part above those 29 bits counts:
``v << (s - rb)`` or ``v >> (rb - s)`` in float32 units. Below the format's smallest
subnormal ``2^qe`` a value goes up to it iff ``v < floor(f * 2^rb)``, ``f = |q| / 2^qe``,
and ``|q| * 2^(rb - qe)`` is an exact float32 scaling whose truncation to int64 is that
floor. A q below float32's normal range (rounded there) has ``f * 2^56 < 1`` for every MX
element format (smallest subnormal at least 2^-16), so it goes to a signed zero either way.
Tests check that both kernels agree bit for bit (tests/test_mx_fused_kernels.py).
Kernels assume validated input (fpsim.mx checks and packs the arguments).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fpsim.kernels.general import GOLDEN, RANDOM_BITS, counter, mix
from fpsim.kernels.mx import (
    _ABS,
    _INF_BITS,
    fill_nan,
    first_block,
    next_block,
    pow2_f32,
    shared_exponent_bits,
)
from fpsim.kernels.mx_nvfp4 import (
    CHUNK,
    WHOLE,
    block_divisor,
    chunk_scratch,
    fill_special_block,
    whole_block_scales,
)

_SIGN = np.int32(-0x80000000)  # float32's sign bit, as an int32
_ABS64 = np.int64(0x7FFFFFFFFFFFFFFF)
_SIGN64 = np.int64(-0x8000000000000000)


@njit(inline="always")
def _element_f32(q, u, rb, k):
    """The float32 ``q`` (an MX quotient ``x * 2^-e``) rounded stochastically in the element
    format and saturated, with element i's draw ``u`` and ``rb`` random bits: the value the
    float64 carrier gives (module docstring). ``k``: (mantissa bits, emin, bits of the
    smallest subnormal 2^qe and of max as float32, 2^(rb - qe) as a float32)."""
    m, emin, q_bits, max_bits, tiny_scale = k
    bits = np.float32(q).view(np.int32)
    a = bits & _ABS
    eb = a >> 23
    s_full = 23 - m + max(emin + 127 - max(eb, 1), 0)  # bits dropped, below 2^emin too
    s = min(s_full, 23)
    mask = (np.int32(1) << s) - 1
    v = u >> (RANDOM_BITS - rb)
    if rb >= RANDOM_BITS:
        rand = np.int32(u >> 29) & mask
    else:
        rand = np.int32((v << max(s - rb, 0)) >> max(rb - s, 0))
    r = (a + rand) & ~mask
    up = v < np.int64(np.float32(abs(q)) * tiny_scale)  # below 2^qe: up with floor(f 2^rb)/2^rb
    r = r if a >= q_bits else (q_bits if up else np.int32(0))
    r = min(r, max_bits)  # saturate
    return np.int32((bits & _SIGN) | r).view(np.float32)


@njit(inline="always")
def _element_f64(q, u, rb, f, tiny_scale):
    """_element_f32 on the float64 carrier, for NVFP4's quotient ``x / d`` (float64, not a
    float32): the general kernel's stochastic rounding of a finite value to a signed format
    with subnormals, saturating (``f``: its float64 constants, fpsim.quantize's
    format_constants), with its branches for the other cases left out. Below 2^qe, up iff
    ``v < int64(|q| * tiny_scale)``, ``tiny_scale = 2^(rb - qe)`` (an exact scaling below
    2^rb, truncated: the general kernel's ``floor(sig * 2^(rb - s))``)."""
    bits = np.float64(q).view(np.int64)
    a = bits & _ABS64
    eb = a >> 52
    s_full = 52 - f.M + max(f.EMIN + 1023 - max(eb, 1), 0)
    s = min(s_full, 52)
    mask = (np.int64(1) << s) - 1
    v = u >> (RANDOM_BITS - rb)
    rand = (u & mask) if rb >= RANDOM_BITS else (v << max(s - rb, 0)) >> max(rb - s, 0)
    r = (a + rand) & ~mask
    up = v < np.int64(abs(q) * tiny_scale)
    r = r if a >= f.Q_BITS else (f.Q_BITS if up else np.int64(0))
    return np.int64((bits & _SIGN64) | min(r, f.MAX_BITS)).view(np.float64)


@njit(nogil=True, cache=True, error_model="numpy")
def mx_stochastic_f32(src, dst, lo, hi, n, block, two_level, tensor_scale, rule, emax,
                      max_elem, mant_bits, integer, scale, rb, seed, fe, f32):
    """dst = src (1-D float32 views of C rows of n elements) block-quantized with stochastic
    element rounding (``rb`` random bits) and dequantized, for the blocks lo..hi-1. MX: the
    divisor is ``2^e`` (``shared_exponent_bits``); two-level (NVFP4): ``block_scale *
    tensor_scale``, the block scale rounded to nearest even in E4M3 (``scale``: its (SHIFT,
    C_SUB, max)). ``fe``: the element format's float64 constants (saturating) for
    ``_element_f64``; ``f32``: (mantissa bits, emin, bits of 2^qe and of max as float32, qe)
    for ``_element_f32``."""
    if rb == RANDOM_BITS:  # the full draw: rb a constant, so its shifts and selects fold
        _blocks(src, dst, lo, hi, n, block, two_level, tensor_scale, rule, emax, max_elem,
                mant_bits, integer, scale, RANDOM_BITS, seed, fe, f32)
    else:
        _blocks(src, dst, lo, hi, n, block, two_level, tensor_scale, rule, emax, max_elem,
                mant_bits, integer, scale, rb, seed, fe, f32)


@njit(inline="always")
def _blocks(src, dst, lo, hi, n, block, two_level, tensor_scale, rule, emax, max_elem,
            mant_bits, integer, scale, rb, seed, fe, f32):
    """mx_stochastic_f32's block loop (``rb``: a constant for the full draw)."""
    bits = src.view(np.int32)
    nb = (n + block - 1) // block
    z = 0.0 if integer else -0.0  # + z: MXINT8's integers have no -0
    z32 = np.float32(z)
    k = (f32[0], f32[1], np.int32(f32[2]), np.int32(f32[3]), np.float32(2.0 ** (rb - f32[4])))
    tiny64 = 2.0 ** (rb - (fe.EMIN - fe.M))
    fmax = np.float32(max_elem)
    r, col = first_block(lo, nb)
    for _ in range(lo, hi):
        start, end, amax_bits, r, col = next_block(bits, r, col, n, block, nb)
        if amax_bits >= _INF_BITS:
            fill_nan(dst, start, end)
            continue
        if two_level:
            d = block_divisor(amax_bits, tensor_scale, max_elem, scale)[0]
            if d == 0.0:  # the scale rounded to 0: signed zeros
                for i in range(start, end):
                    j = np.uint64(i)
                    dst[j] = np.float32(np.copysign(0.0, src[j]) + z)
                continue
            c = counter(seed, start)
            for i in range(start, end):
                j = np.uint64(i)
                el = _element_f64(np.float64(src[j]) / d, mix(c), rb, fe, tiny64)
                c += GOLDEN  # element i + 1's counter
                dst[j] = np.float32((el + z) * d)
        else:
            e = shared_exponent_bits(amax_bits, rule, emax, fmax, mant_bits)
            down = pow2_f32(-e)
            up = pow2_f32(e)  # element * 2^e rounds once to float32, as in float64
            c = counter(seed, start)
            for i in range(start, end):
                j = np.uint64(i)
                el = _element_f32(src[j] * down, mix(c), rb, k)
                c += GOLDEN
                dst[j] = (el + z32) * up


@njit(nogil=True, cache=True, error_model="numpy")
def nvfp4_stochastic_f32_whole(src, dst, amax, lo, hi, tensor_scale, max_elem, scale, rb, seed,
                               fe):
    """mx_stochastic_f32 for NVFP4 rows of whole blocks of 16 (block b is elements [16 b,
    16 b + 16) of the flat views, its amax ``amax[b]``): fpsim.kernels.mx_nvfp4's chunks,
    every block scale of a chunk first, then the elements as mx_stochastic_f32 rounds them."""
    if rb == RANDOM_BITS:
        _whole(src, dst, amax, lo, hi, tensor_scale, max_elem, scale, RANDOM_BITS, seed, fe)
    else:
        _whole(src, dst, amax, lo, hi, tensor_scale, max_elem, scale, rb, seed, fe)


@njit(inline="always")
def _whole(src, dst, amax, lo, hi, tensor_scale, max_elem, scale, rb, seed, fe):
    """nvfp4_stochastic_f32_whole's loops (``rb``: a constant for the full draw)."""
    ds, ss = chunk_scratch()
    tiny64 = 2.0 ** (rb - (fe.EMIN - fe.M))
    for b0 in range(lo, hi, CHUNK):
        count = min(CHUNK, hi - b0)
        whole_block_scales(amax, b0, count, tensor_scale, max_elem, scale, ds, ss)
        for k in range(count):
            start = (b0 + k) * WHOLE
            d = ds[k]
            nan = amax[np.uint64(b0 + k)] >= _INF_BITS
            if nan or d == 0.0:
                fill_special_block(src, dst, start, WHOLE, nan)
                continue
            c = counter(seed, start)
            for i in range(WHOLE):
                j = np.uint64(start + i)
                el = _element_f64(np.float64(src[j]) / d, mix(c), rb, fe, tiny64)
                c += GOLDEN
                dst[j] = np.float32(el * d)
