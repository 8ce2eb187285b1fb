"""The constants a rounding kernel takes, as named tuples (numba passes them by value).

``Carrier`` describes the float32 or float64 carrier; ``FormatBits`` a format as carrier bit
patterns (packed by ``fpsim.quantize.format_constants``); ``NearestEvenF32`` the float32
nearest-even fast path's constants (``fpsim.quantize.nearest_even_f32_constants``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Carrier(NamedTuple):
    """An IEEE binary carrier, seen as the signed integer of its width:

        S|EEEEEEEE|MMMMMMMMMMMMMMMMMMMMMMM      float32: 1 | 8 | 23 bits
        S|EEEEEEEEEEE|MMMM...MMMM               float64: 1 | 11 | 52 bits
    """

    CM: int  # mantissa bits
    CBIAS: int  # exponent bias, 2^(exponent bits - 1) - 1
    ABS_MASK: int  # 0|1..1|1..1: every bit but the sign
    INF_BITS: int  # 0|1..1|0..0
    NAN_BITS: int  # 0|1..1|10..0: the quiet NaN
    SIGN_MASK: int  # 1|0..0|0..0 (as the integer the kernel's ``&`` sees)


def _carrier(exponent_bits: int, mantissa_bits: int, sign_mask: int) -> Carrier:
    width = 1 + exponent_bits + mantissa_bits
    inf_bits = ((1 << exponent_bits) - 1) << mantissa_bits
    return Carrier(
        CM=mantissa_bits,
        CBIAS=(1 << (exponent_bits - 1)) - 1,
        ABS_MASK=(1 << (width - 1)) - 1,
        INF_BITS=inf_bits,
        NAN_BITS=inf_bits | (1 << (mantissa_bits - 1)),
        SIGN_MASK=sign_mask,
    )


# float32 bits are widened to int64 in the kernel (sign-extended), so its sign bit is the
# positive 2^31 there; float64's is int64's own sign bit, -2^63.
FLOAT32 = _carrier(8, 23, 1 << 31)
FLOAT64 = _carrier(11, 52, -(1 << 63))


def carrier_constants(dtype: np.dtype) -> Carrier:
    """The carrier constants for float32 or float64."""
    return FLOAT32 if dtype == np.float32 else FLOAT64


class FormatBits(NamedTuple):
    """A format for the general kernel, as carrier bit patterns and flags (ints)."""

    M: int  # mantissa bits
    EMIN: int  # smallest normal exponent
    SUBNORMALS: int  # 0: flush results below the smallest normal to zero
    MAX_BITS: int  # the largest finite value
    MIN_NORMAL_BITS: int  # the smallest normal
    OVER_BITS: int  # what an overflow becomes: inf, max or NaN
    HAS_INF: int
    NO_NEG_ZERO: int
    Q_BITS: int  # the smallest subnormal, 2^q, q = EMIN - M
    HALF_Q_BITS: int  # 2^(q-1) (at least 1: only 0 lies below it in a narrow carrier)
    UNSIGNED: int  # 1: no negative numbers
    NEGATIVE_BITS: int  # what a negative non-zero input becomes in an unsigned format: NaN, +0


class NearestEvenF32(NamedTuple):
    """The float32 nearest-even fast path's constants (see fpsim.kernels.fast_f32)."""

    SHIFT: np.uint32  # (23 - M) << 23: added to |x|'s exponent field to make B
    C_SUB: np.float32  # 2^(q + 23): the smallest B, whose ulp is the subnormal spacing 2^q
    MIN_NORMAL: np.float32
    THRESHOLD: np.float32  # the smallest float32 whose rounding exceeds max
    OVERFLOW: np.float32  # what an overflow becomes
    NO_NEG_ZERO: bool


class DirectedF32(NamedTuple):
    """The float32 directed modes' constants (see fpsim.kernels.directed_f32)."""

    SHIFT: np.uint32  # (23 - M) << 23: added to |x|'s exponent field to make B
    C_SUB: np.float32  # the smallest B (2^(q + 23); with flush-to-zero 2^(emin - 1 - M + 23))
    MAX: np.float32
    MIN_NORMAL: np.float32  # the smallest normal (the counting kernels' subnormal event)
    FLUSH_BELOW: np.float32  # the smallest normal with flush-to-zero, else 0
    OVERFLOW: np.float32  # what a finite overflow becomes (away from zero)
    INF_RESULT: np.float32  # what an infinite input becomes
    NO_NEG_ZERO: bool
