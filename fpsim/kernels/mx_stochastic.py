"""The stochastic block-quantization kernel: float32 input, every MX format and NVFP4 (with
its default scale rule), elements rounded stochastically with ``rb`` random bits (56: the full
draw; fewer: ``rng_bits``).

The same decisions as fpsim.kernels.mx_general (fpsim.mx's reference list) for
``mode="stochastic"``, element for element and with the same random stream (element i of the
flat array draws splitmix64 of its index, as every fpsim kernel), so the two agree bit for bit.
What makes it fast: the block walk and amax from the float32 bits (fpsim.kernels.mx), an MX
block's quotient ``x / 2^e`` as the product ``x * 2^-e`` (both exact in float64, so the same
number), and the rounding's mode switches compile-time constants (every switch of the
stochastic mode but its random bits, so LLVM folds every branch of the other modes).
Kernels assume validated input (fpsim.mx checks and packs the arguments).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fpsim.kernels.general import MODE_KERNELS, RANDOM_BITS, ModeBits, _round_bits
from fpsim.kernels.mx import (
    _INF_BITS,
    fill_nan,
    first_block,
    next_block,
    pow2_f64,
    shared_exponent_bits,
)
from fpsim.kernels.mx_nvfp4 import block_divisor
from fpsim.rounding import RoundingMode

_S = MODE_KERNELS[RoundingMode.STOCHASTIC]


@njit(inline="always")
def _stochastic(rb):
    """The stochastic mode's switches with ``rb`` random bits: the others constants."""
    return ModeBits(_S.HALF, _S.LSB, _S.ONE, _S.ALL_POS, _S.ALL_NEG, _S.ODD, rb, _S.TINY_POS,
                    _S.TINY_NEG, _S.ZERO_POS, _S.ZERO_NEG)


@njit(inline="always")
def _value(q, z, d, m, seed, i, c, fe):
    """The float32 value of the quotient q (float64) rounded stochastically (+ z) times d."""
    el = np.int64(_round_bits(np.float64(q).view(np.int64), m, True, seed, i, c, fe))
    return np.float32((el.view(np.float64) + z) * d)


@njit(nogil=True, cache=True, error_model="numpy")
def mx_stochastic_f32(src, dst, lo, hi, n, block, two_level, tensor_scale, rule, emax,
                      max_elem, mant_bits, integer, scale, rb, seed, c, fe):
    """dst = src (1-D float32 views of C rows of n elements) block-quantized with stochastic
    element rounding (``rb`` random bits) and dequantized, for the blocks lo..hi-1. MX: the
    divisor is ``2^e`` (``shared_exponent_bits``); two-level (NVFP4): ``block_scale *
    tensor_scale``, the block scale rounded to nearest even in E4M3 (``scale``: its (SHIFT,
    C_SUB, max)). ``c``: the float64 carrier, ``fe``: the element format's constants
    (saturating)."""
    if rb == RANDOM_BITS:  # the full draw: rb a constant, so its shifts and selects fold
        _blocks(src, dst, lo, hi, n, block, two_level, tensor_scale, rule, emax, max_elem,
                mant_bits, integer, scale, _stochastic(RANDOM_BITS), seed, c, fe)
    else:
        _blocks(src, dst, lo, hi, n, block, two_level, tensor_scale, rule, emax, max_elem,
                mant_bits, integer, scale, _stochastic(rb), seed, c, fe)


@njit(inline="always")
def _blocks(src, dst, lo, hi, n, block, two_level, tensor_scale, rule, emax, max_elem,
            mant_bits, integer, scale, m, seed, c, fe):
    """mx_stochastic_f32's block loop with the mode's switches ``m``."""
    bits = src.view(np.int32)
    nb = (n + block - 1) // block
    z = 0.0 if integer else -0.0  # + z: MXINT8's integers have no -0
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
            for i in range(start, end):
                j = np.uint64(i)
                dst[j] = _value(np.float64(src[j]) / d, z, d, m, seed, i, c, fe)
        else:
            e = shared_exponent_bits(amax_bits, rule, emax, fmax, mant_bits)
            d = pow2_f64(e)
            down = pow2_f64(-e)  # x * 2^-e is x / 2^e: both exact in float64
            for i in range(start, end):
                j = np.uint64(i)
                dst[j] = _value(np.float64(src[j]) * down, z, d, m, seed, i, c, fe)
