"""numba kernels: rounding on the integer view of the float32 / float64 carrier.

Kernels only: no validation, no API logic. The caller (fpsim.quantize) validates, picks the
carrier, and packs the format's constants into two tuples:

- carrier ``c = (CM, CBIAS, ABS_MASK, INF_BITS, NAN_BITS, SIGN_MASK)``: float32 is
  ``(23, 127, 0x7FFFFFFF, 0x7F800000, ...)``, float64 ``(52, 1023, ...)``;
- format ``f = (M, EMIN, SUBNORMALS, MAX_BITS, MIN_NORMAL_BITS, OVERFLOW, HAS_INF, NO_NEG_ZERO)``
  where MAX_BITS and MIN_NORMAL_BITS are the carrier bit patterns of the format's max and
  smallest normal, and OVERFLOW is 0 = inf, 1 = saturate, 2 = nan.

A non-negative carrier value is ``S|EEEEEEEE|MMMMMMMMMMMMMMMMMMMMMMM`` (float32); its magnitude
bits ``a`` are monotone in the value and, within one binade, linear in it. So rounding the value
to a multiple of ``2^q`` is rounding ``a`` to a multiple of ``2^s``, ``s = q - (e - CM)``, and a
carry out of the mantissa correctly bumps the exponent field:

    a = EEEEEEEE|MMMMMMMMMMMM|rrrrrrrrrrr     kept = a >> s, rem = a & (2^s - 1)
                 kept bits    s dropped bits  guard = top bit of rem, sticky = the rest

When ``s > CM`` the value lies below half the target quantum's binade (deep under the smallest
subnormal); then ``kept = 0`` and ``rem`` is the significand with its hidden bit.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

# Mode codes: the order of fpsim.rounding.RoundingMode.
NEAREST_EVEN, NEAREST_AWAY, TOWARD_ZERO, UP, DOWN, ODD, STOCHASTIC = range(7)
OVERFLOW_INF, OVERFLOW_SATURATE, OVERFLOW_NAN = range(3)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@njit(inline="always")
def _splitmix64(seed, i):
    """A counter-based uniform 64-bit draw for element i: reproducible whatever the threads."""
    z = seed + np.uint64(i + 1) * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@njit(inline="always")
def _round_up(kept, rem, half, s, negative, mode, seed, i):
    """1 if the magnitude kept + rem/2^s goes up to kept + 1 under the mode, else 0."""
    if mode == NEAREST_EVEN:
        return 1 if (rem > half or (rem == half and (kept & 1) == 1)) and rem != 0 else 0
    if mode == NEAREST_AWAY:
        return 1 if rem >= half and rem != 0 else 0
    if mode == TOWARD_ZERO:
        return 0
    if mode == UP:
        return 1 if rem != 0 and not negative else 0
    if mode == DOWN:
        return 1 if rem != 0 and negative else 0
    if mode == ODD:
        return 1 if rem != 0 and (kept & 1) == 0 else 0
    # STOCHASTIC: draw u uniformly from [0, 2^s); P(u < rem) = rem / 2^s exactly.
    if rem == 0:
        return 0
    u = np.int64(_splitmix64(seed, i) >> np.uint64(64 - s))
    return 1 if u < rem else 0


@njit(inline="always")
def _round_bits(bits, mode, seed, i, c, f):
    """The carrier bit pattern of ``bits``'s value rounded to the format (all cases)."""
    CM, CBIAS, ABS_MASK, INF_BITS, NAN_BITS, SIGN_MASK = c
    M, EMIN, SUBNORMALS, MAX_BITS, MIN_NORMAL_BITS, OVERFLOW, HAS_INF, NO_NEG_ZERO = f
    a = bits & ABS_MASK
    sign = bits & SIGN_MASK
    negative = sign != 0
    if a >= INF_BITS:
        if a > INF_BITS or HAS_INF:  # NaN stays NaN; inf stays inf where the format has it
            return bits
        return NAN_BITS if OVERFLOW == OVERFLOW_NAN else sign | MAX_BITS

    eb = a >> CM
    e = max(eb, 1) - CBIAS
    q = (max(e, EMIN) if SUBNORMALS else e) - M
    s = q - e + CM
    if s <= CM:
        rem = a & ((np.int64(1) << s) - 1)
        kept = a >> s
        half = (np.int64(1) << s) >> 1
        r = (kept + _round_up(kept, rem, half, s, negative, mode, seed, i)) << s
    else:
        s = min(s, CM + 2)
        sig = (a & ((np.int64(1) << CM) - 1)) | (np.int64(eb > 0) << CM)
        up = _round_up(0, sig, np.int64(1) << (s - 1), s, negative, mode, seed, i)
        # the carrier bits of 2^q, which may be a carrier subnormal
        quantum = (q + CBIAS) << CM if q >= 1 - CBIAS else np.int64(1) << (q - 1 + CBIAS + CM)
        r = quantum if up else 0

    if r > MAX_BITS:
        toward_zero = mode == TOWARD_ZERO or (mode == DOWN and not negative) or (
            mode == UP and negative
        )
        if toward_zero or OVERFLOW == OVERFLOW_SATURATE:
            r = MAX_BITS
        elif OVERFLOW == OVERFLOW_NAN:
            return NAN_BITS
        else:
            r = INF_BITS
    if not SUBNORMALS and r < MIN_NORMAL_BITS:
        r = 0
    if r == 0 and NO_NEG_ZERO:
        return r
    return sign | r


@njit(parallel=True, cache=True)
def round_into(src, dst, mode, seed, c, f):
    """dst[i] = bits of src[i] rounded to the format; src and dst are 1-D int32/int64 views."""
    for i in prange(src.size):
        dst[i] = _round_bits(np.int64(src[i]), mode, seed, i, c, f)


@njit(parallel=True, cache=True)
def round_into_counting(src, dst, mode, seed, c, f):
    """round_into, also counting events in the same pass.

    Returns (inexact, overflow, underflow, subnormal, nan_created): overflow is a finite input
    whose result is inf, NaN or a clamped max; underflow a non-zero finite input whose result is
    zero; subnormal a non-zero result below the smallest normal; nan_created a non-NaN input
    whose result is NaN.
    """
    CM, CBIAS, ABS_MASK, INF_BITS, NAN_BITS, SIGN_MASK = c
    MAX_BITS = f[3]
    MIN_NORMAL_BITS = f[4]
    inexact = 0
    overflow = 0
    underflow = 0
    subnormal = 0
    nan_created = 0
    for i in prange(src.size):
        b = np.int64(src[i])
        r = _round_bits(b, mode, seed, i, c, f)
        dst[i] = r
        a = b & ABS_MASK
        ra = r & ABS_MASK
        finite_in = a < INF_BITS
        if finite_in and ra != a:
            inexact += 1
        if finite_in and (ra >= INF_BITS or (ra == MAX_BITS and a > MAX_BITS)):
            overflow += 1
        if finite_in and a != 0 and ra == 0:
            underflow += 1
        if ra != 0 and ra < MIN_NORMAL_BITS:
            subnormal += 1
        if a <= INF_BITS and ra > INF_BITS:
            nan_created += 1
    return inexact, overflow, underflow, subnormal, nan_created


def carrier_constants(dtype: np.dtype) -> tuple[int, ...]:
    """The carrier tuple ``c`` for float32 or float64."""
    if dtype == np.float32:
        return (23, 127, 0x7FFFFFFF, 0x7F800000, 0x7FC00000, 0x80000000)
    return (52, 1023, 0x7FFFFFFFFFFFFFFF, 0x7FF0000000000000, 0x7FF8000000000000, -(2**63))

