"""The stochastic block-quantization kernel: float32 input, every MX format and NVFP4 (with
its default scale rule), elements rounded stochastically with the full random draw.

The same decisions as fpsim.kernels.mx_general (fpsim.mx's reference list) for
``mode="stochastic"`` without ``rng_bits``, element for element and with the same random
stream (element i of the flat array draws splitmix64 of its index, as every fpsim kernel), so
the two agree bit for bit. What makes it fast: the block amax from the float32 bits (an
integer max that vectorizes), and the rounding's mode switches compile-time constants
(``_STOCHASTIC``, frozen at compile time, so LLVM folds every branch of the other modes).
Kernels assume validated input (fpsim.mx checks and packs the arguments).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from fpsim.kernels.general import MODE_KERNELS, _round_bits
from fpsim.kernels.mx import shared_exponent
from fpsim.kernels.mx_nvfp4 import _ABS32, _INF32, _nearest
from fpsim.rounding import RoundingMode

_STOCHASTIC = MODE_KERNELS[RoundingMode.STOCHASTIC]


@njit(nogil=True, cache=True)
def mx_stochastic_f32(src, dst, lo, hi, n, block, two_level, tensor_scale, rule, emax,
                      max_elem, mant_bits, integer, scale, seed, c, fe):
    """dst = src (1-D float32 views of C rows of n elements) block-quantized with stochastic
    element rounding and dequantized, for the blocks lo..hi-1. MX: the divisor is ``2^e``
    (``shared_exponent``); two-level (NVFP4): ``block_scale * tensor_scale``, the block scale
    rounded to nearest even in E4M3 (``scale``: its (SHIFT, C_SUB, max) for ``_nearest``).
    ``c``: the float64 carrier, ``fe``: the element format's constants (saturating)."""
    s_shift, s_sub, s_max = scale
    bits = src.view(np.int32)
    nb = (n + block - 1) // block
    z = 0.0 if integer else -0.0  # + z: MXINT8's integers have no -0
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
        amax = np.float64(np.int32(amax_bits).view(np.float32))
        if two_level:
            d = _nearest(amax / (max_elem * tensor_scale), s_shift, s_sub, s_max) * tensor_scale
        else:
            d = math.ldexp(1.0, shared_exponent(amax, rule, emax, max_elem, mant_bits))
        if d == 0.0:  # the scale rounded to 0: signed zeros
            for i in range(start, end):
                j = np.uint64(i)
                dst[j] = np.float32(np.copysign(0.0, src[j]) + z)
            continue
        for i in range(start, end):
            j = np.uint64(i)
            q = np.float64(np.float64(src[j]) / d).view(np.int64)
            el = np.int64(_round_bits(q, _STOCHASTIC, True, seed, i, c, fe)).view(np.float64)
            dst[j] = np.float32((el + z) * d)
