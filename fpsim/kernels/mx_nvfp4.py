"""The NVFP4 quantization kernels: float32 input, elements rounded to nearest even.

One pass per block of ``block`` consecutive elements of a row (the last block of a row may be
shorter; fpsim.kernels.mx.next_block walks them), the same decisions as
fpsim.kernels.mx_general (fpsim.mx's reference list):

1. amax from the float32 bits; a NaN or inf gives a NaN block;
2. the block scale ``amax / (max_elem * tensor_scale)`` rounded to E4M3 (saturating at 448),
   the divisor ``d = scale * tensor_scale`` (exact in float64);
3. each element ``x / d`` rounded to nearest even in the element format and saturated, times
   ``d``, stored as float32 (``nvfp4_quantize_f32``), or its code (``nvfp4_encode_f32``).

The block scale rounds with the addition trick on float64 (see fpsim.kernels.fast_f32 for the
float32 one): for ``a >= 0`` and ``B = 2^(e + 52 - M)`` (e: a's exponent, at least the
format's emin), ``(a + B) - B`` is ``a`` rounded to a multiple of ``2^(e - M)``, ties to even,
which is the format's spacing in a's binade (its subnormal spacing below the normal range):

    a = 0|EEEEEEEEEEE|MMMMMMMMM...      B's bits: a's exponent field + (52 - M) << 52
    min((a + B) - B, max) saturates

The elements round the same way: ``(|x| / d)`` in float64 (one correctly rounded division:
a quotient of a float32 by a 28-bit ``d`` is never within 2^-53 of an element midpoint unless
on it), then the trick with the element format's constants. ``min`` returns max for anything
above it, so no overflow reaches the output. The value ``element * d`` is exact in float64
and rounds once to float32; an element's code comes from its rounded magnitude's bits
(fpsim.kernels.mx.magnitude_code; the block scale's from fpsim.kernels.mx_general's
``code_of``). A scale that rounds to 0 gives ``d = 0`` and signed zeros.

Rows of whole blocks of 16 (NVFP4's block, n a multiple of 16) take ``nvfp4_*_f32_whole``:
block b is elements [16 b, 16 b + 16). Their block amaxes come from the pass that finds the
tensor amax (``whole_block_amax_f32``, which stores each block's), so the elements are read
once more, not twice; the blocks then go ``CHUNK`` at a time: every block scale and divisor
(independent iterations, so it vectorizes instead of one long dependent chain per block),
then the elements in loops of constant length 16, which LLVM turns into straight vector code
(the speed of both: docs/hardware.md); the same decisions (tests compare both with the
general kernel).

The scale rules "ceil" and "floor" take the general kernel. Kernels assume validated input
(fpsim.mx checks and packs the arguments).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fpsim.kernels.mx import (
    _ABS,
    _INF_BITS,
    code_constants,
    first_block,
    magnitude_code,
    nan_block_codes,
    next_block,
)
from fpsim.kernels.mx_general import code_of

_EXP64 = np.int64(0x7FF0000000000000)  # 0|11111111111|000...0: float64's exponent field
WHOLE = 16  # the block the *_whole kernels take
CHUNK = 64  # blocks whose scales those compute in one loop before their elements


@njit(inline="always")
def _nearest(a, shift, c_sub, top):
    """a >= 0 (float64) rounded to nearest even on the format's grid, saturated at top."""
    b = np.int64((np.float64(a).view(np.int64) & _EXP64) + shift).view(np.float64)
    b = b if b > c_sub else c_sub
    return min((a + b) - b, top)


@njit(inline="always")
def block_divisor(amax_bits, tensor_scale, e_max, scale):
    """(d, the block scale): the block scale ``amax / (e_max * tensor_scale)`` rounded to
    nearest even in E4M3 and saturated (``scale``: its (SHIFT, C_SUB, max) for ``_nearest``),
    and ``d = block scale * tensor_scale`` (exact in float64)."""
    q = np.float64(np.int32(amax_bits).view(np.float32)) / (e_max * tensor_scale)
    s = _nearest(q, scale[0], scale[1], scale[2])
    return s * tensor_scale, s


@njit(inline="always")
def _value(x, d, elem):
    """The float32 ``x / d`` rounded to nearest even in the element format (``elem``: its
    (SHIFT, C_SUB, max)), saturated, times ``d``."""
    v = np.float64(x) / d
    return np.float32(np.copysign(_nearest(abs(v), elem[0], elem[1], elem[2]), v) * d)


@njit(inline="always")
def _code(x, negative, d, elem, k, sign_bit):
    """The element code of float32 ``x`` as _value rounds it: its rounded magnitude's code
    (fpsim.kernels.mx.magnitude_code, ``k``: the format's code_constants) with ``sign_bit``
    when x is ``negative`` (-0 too)."""
    ra = _nearest(abs(np.float64(x) / d), elem[0], elem[1], elem[2])
    return np.uint8(magnitude_code(ra, k) | (sign_bit if negative else 0))


@njit(inline="always")
def fill_special_block(src, dst, start, count, nan):
    """Elements start.. start+count-1 of a block that is NaN (it holds NaN or inf: ``nan``)
    or whose scale rounded to 0 (signed zeros)."""
    for i in range(count):
        j = np.uint64(start + i)
        dst[j] = np.nan if nan else np.float32(np.copysign(0.0, src[j]))


@njit(nogil=True, cache=True, error_model="numpy")
def nvfp4_quantize_f32(src, dst, lo, hi, n, block, tensor_scale, elem, scale):
    """dst = src (1-D float32 views of C rows of n elements) quantized to NVFP4 and
    dequantized, for the blocks lo..hi-1, the block scale rounded to nearest even (the
    format's default rule). ``elem`` and ``scale``: (SHIFT, C_SUB, max) of the element format
    and of E4M3 for ``_nearest``."""
    bits = src.view(np.int32)
    nb = (n + block - 1) // block
    r, c = first_block(lo, nb)
    for _ in range(lo, hi):
        start, end, amax_bits, r, c = next_block(bits, r, c, n, block, nb)
        d = block_divisor(amax_bits, tensor_scale, elem[2], scale)[0]
        if amax_bits >= _INF_BITS or d == 0.0:
            fill_special_block(src, dst, start, end - start, amax_bits >= _INF_BITS)
            continue
        for i in range(start, end):
            j = np.uint64(i)  # an unsigned index: no wraparound check, so it vectorizes
            dst[j] = _value(src[j], d, elem)


@njit(nogil=True, cache=True, error_model="numpy")
def nvfp4_encode_f32(src, ecodes, scodes, lo, hi, n, block, tensor_scale, elem, scale, layout):
    """(element codes, block scale codes) of src as nvfp4_quantize_f32 rounds it: each
    element's code (fpsim.kernels.mx.magnitude_code of its rounded magnitude, with the sign
    bit for negative x, -0 too) and the block scale's E4M3 code; a NaN block gets the
    scale's NaN code and element codes 0. ``layout``: (element mantissa bits, bias, emin,
    sign bit, E4M3 mantissa bits, bias, emin, NaN code)."""
    emant, ebias, eemin, esign, smant, sbias, semin, nan_code = layout
    k = code_constants(emant, ebias, eemin)
    bits = src.view(np.int32)
    nb = (n + block - 1) // block
    r, c = first_block(lo, nb)
    for b in range(lo, hi):
        start, end, amax_bits, r, c = next_block(bits, r, c, n, block, nb)
        if amax_bits >= _INF_BITS:
            nan_block_codes(ecodes, scodes, b, start, end, nan_code)
            continue
        d, s = block_divisor(amax_bits, tensor_scale, elem[2], scale)
        scodes[b] = code_of(s, smant, sbias, semin, 0)
        if d == 0.0:  # the scale rounded to 0: signed zeros
            for i in range(start, end):
                ecodes[np.uint64(i)] = esign if bits[np.uint64(i)] < 0 else 0
            continue
        for i in range(start, end):
            j = np.uint64(i)
            ecodes[j] = _code(src[j], bits[j] < 0, d, elem, k, esign)


@njit(nogil=True, cache=True, error_model="numpy")
def whole_block_amax_f32(bits, amax, lo, hi):
    """For the whole blocks lo..hi-1 of 16 (``bits``: the int32 view of the float32 input):
    each block's largest ``|x|`` as bits into ``amax[b]`` (NaN and inf sort above every
    finite value, marking a NaN block), and the return value: the largest finite ``|x|``
    among them as bits (0 if none), fpsim.kernels.mx_general.finite_amax_f32's answer."""
    top = np.int32(0)
    for b in range(lo, hi):
        a = np.int32(0)
        f = np.int32(0)
        start = b * WHOLE
        for i in range(WHOLE):
            v = np.int32(bits[np.uint64(start + i)] & _ABS)
            a = np.int32(max(a, v))
            f = np.int32(max(f, np.int32(v if v < _INF_BITS else 0)))
        amax[np.uint64(b)] = a
        top = np.int32(max(top, f))
    return top


@njit(inline="always")
def whole_block_scales(amax, b0, count, tensor_scale, e_max, scale, ds, ss):
    """For the ``count`` whole blocks from block b0 on (``amax``: every block's, from
    ``whole_block_amax_f32``): each block's divisor and scale into ``ds``, ``ss`` [0, count),
    in a loop of independent iterations (also fpsim.kernels.mx_stochastic's, for NVFP4's
    stochastic elements)."""
    for k in range(count):
        d, s = block_divisor(amax[np.uint64(b0 + k)], tensor_scale, e_max, scale)
        ds[k] = d
        ss[k] = s


@njit(inline="always")
def chunk_scratch():
    """whole_block_scales's outputs for a chunk: (divisors, scales)."""
    return np.empty(CHUNK, np.float64), np.empty(CHUNK, np.float64)


@njit(nogil=True, cache=True, error_model="numpy")
def nvfp4_quantize_f32_whole(src, dst, amax, lo, hi, tensor_scale, elem, scale):
    """nvfp4_quantize_f32 for rows of whole blocks of 16: block b is elements [16 b, 16 b +
    16) of the flat views, its amax ``amax[b]`` (whole_block_amax_f32)."""
    ds, ss = chunk_scratch()
    for b0 in range(lo, hi, CHUNK):
        count = min(CHUNK, hi - b0)
        whole_block_scales(amax, b0, count, tensor_scale, elem[2], scale, ds, ss)
        for k in range(count):
            start = (b0 + k) * WHOLE
            d = ds[k]
            nan = amax[np.uint64(b0 + k)] >= _INF_BITS
            if nan or d == 0.0:
                fill_special_block(src, dst, start, WHOLE, nan)
                continue
            for i in range(WHOLE):
                j = np.uint64(start + i)
                dst[j] = _value(src[j], d, elem)


@njit(nogil=True, cache=True, error_model="numpy")
def nvfp4_encode_f32_whole(src, ecodes, scodes, amax, lo, hi, tensor_scale, elem, scale,
                           layout):
    """nvfp4_encode_f32 for rows of whole blocks of 16: block b is elements [16 b, 16 b + 16)
    of the flat views, its amax ``amax[b]`` (whole_block_amax_f32)."""
    emant, ebias, eemin, esign, smant, sbias, semin, nan_code = layout
    kc = code_constants(emant, ebias, eemin)
    bits = src.view(np.int32)
    ds, ss = chunk_scratch()
    for b0 in range(lo, hi, CHUNK):
        count = min(CHUNK, hi - b0)
        whole_block_scales(amax, b0, count, tensor_scale, elem[2], scale, ds, ss)
        for k in range(count):
            b = b0 + k
            start = b * WHOLE
            d = ds[k]
            if amax[np.uint64(b)] >= _INF_BITS:
                nan_block_codes(ecodes, scodes, b, start, start + WHOLE, nan_code)
                continue
            scodes[b] = code_of(ss[k], smant, sbias, semin, 0)
            if d == 0.0:  # the scale rounded to 0: signed zeros
                for i in range(WHOLE):
                    j = np.uint64(start + i)
                    ecodes[j] = esign if bits[j] < 0 else 0
                continue
            for i in range(WHOLE):
                j = np.uint64(start + i)
                ecodes[j] = _code(src[j], bits[j] < 0, d, elem, kc, esign)
