"""The NVFP4 quantization kernel: float32 input, elements rounded to nearest even.

One pass per block of ``block`` consecutive elements of a row (the last block of a row may be
shorter), the same decisions as fpsim.kernels.mx_general (fpsim.mx's reference list):

1. amax from the float32 bits (``|x|`` as integers is monotone, and NaN sorts above inf, so
   the integer max vectorizes); a NaN or inf gives a NaN block;
2. the block scale ``amax / (max_elem * tensor_scale)`` rounded to E4M3 (saturating at 448),
   the divisor ``scale * tensor_scale`` (exact in float64);
3. each element ``x / divisor`` (one float64 division, correctly rounded) rounded to nearest
   even in E2M1 and saturated, times the divisor, stored as float32.

Both roundings to nearest even use the addition trick on float64 (see fpsim.kernels.fast_f32
for the float32 one): for ``a >= 0`` and ``B = 2^(e + 52 - M)`` (e: a's exponent, at least the
format's emin), ``(a + B) - B`` is ``a`` rounded to a multiple of ``2^(e - M)``, ties to even,
which is the format's spacing in a's binade (its subnormal spacing below the normal range):

    a = 0|EEEEEEEEEEE|MMMMMMMMM...      B's bits: a's exponent field + (52 - M) << 52
    min((a + B) - B, max) saturates

``min`` returns max for anything above it, so no overflow reaches the output. The scale rules
"ceil" and "floor" take the general kernel.
Kernels assume validated input (fpsim.mx checks and packs the arguments).
"""

from __future__ import annotations

import numpy as np
from numba import njit

_ABS32 = np.int32(0x7FFFFFFF)  # every bit of a float32 but the sign
_INF32 = np.int32(0x7F800000)
_EXP64 = np.int64(0x7FF0000000000000)  # 0|11111111111|000...0: float64's exponent field


@njit(inline="always")
def _nearest(a, shift, c_sub, top):
    """a >= 0 (float64) rounded to nearest even on the format's grid, saturated at top."""
    b = np.int64((np.float64(a).view(np.int64) & _EXP64) + shift).view(np.float64)
    b = b if b > c_sub else c_sub
    return min((a + b) - b, top)


@njit(nogil=True, cache=True)
def nvfp4_quantize_f32(src, dst, lo, hi, n, block, tensor_scale, elem, scale):
    """dst = src (1-D float32 views of C rows of n elements) quantized to NVFP4 and
    dequantized, for the blocks lo..hi-1, the block scale rounded to nearest even (the
    format's default rule). ``elem`` and ``scale``: (SHIFT, C_SUB, max) of the element format
    and of E4M3 for ``_nearest``."""
    e_shift, e_sub, e_max = elem
    s_shift, s_sub, s_max = scale
    bits = src.view(np.int32)
    nb = (n + block - 1) // block
    r = lo // nb
    col = lo - r * nb
    for _ in range(lo, hi):
        start = r * n + col * block
        end = min(r * n + n, start + block)
        col += 1
        if col == nb:
            r += 1
            col = 0
        amax_bits = np.int32(0)
        for i in range(start, end):
            amax_bits = max(amax_bits, bits[np.uint64(i)] & _ABS32)
        if amax_bits >= _INF32:
            for i in range(start, end):
                dst[np.uint64(i)] = np.float32(np.nan)
            continue
        q = np.float64(np.int32(amax_bits).view(np.float32)) / (e_max * tensor_scale)
        s = _nearest(q, s_shift, s_sub, s_max)
        d = s * tensor_scale
        if d == 0.0:  # the scale rounded to 0: signed zeros
            for i in range(start, end):
                j = np.uint64(i)
                dst[j] = np.float32(np.copysign(0.0, src[j]))
            continue
        for i in range(start, end):
            j = np.uint64(i)  # an unsigned index: no wraparound check, so it vectorizes
            v = np.float64(src[j]) / d
            dst[j] = np.float32(np.copysign(_nearest(abs(v), e_shift, e_sub, e_max), v) * d)
