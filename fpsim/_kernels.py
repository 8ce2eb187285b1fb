"""numba kernels: rounding on the integer view of the float32 / float64 carrier.

Kernels only: no validation, no API logic. The caller (fpsim.quantize) validates, picks the
carrier, and packs the format's constants into two tuples of ints:

- carrier ``c = (CM, CBIAS, ABS_MASK, INF_BITS, NAN_BITS, SIGN_MASK)``: float32 is
  ``(23, 127, 0x7FFFFFFF, 0x7F800000, ...)``, float64 ``(52, 1023, ...)``;
- format ``f = (M, EMIN, SUBNORMALS, MAX_BITS, MIN_NORMAL_BITS, OVER_BITS, HAS_INF,
  NO_NEG_ZERO, Q_BITS, HALF_Q_BITS)``: the mantissa bits, smallest normal exponent and flags of
  the format, and the carrier bit patterns of its max, smallest normal, of what an overflow
  becomes (inf, max or NaN), of the smallest subnormal 2^q and of half of it.

A non-negative carrier value ``0|EEEEEEEE|MMMMMMMMMMMMMMMMMMMMMMM`` (float32) has magnitude bits
``a`` that are monotone in the value and, within one binade, linear in it. So rounding the value
to a multiple of the format's spacing ``2^q`` is rounding ``a`` to a multiple of ``2^s``, and a
carry out of the mantissa correctly bumps the exponent field:

    a = EEEEEEEE|MMMMMMMMMM|grrrrrrrrrrrr      s = CM - M (+ how far below the normal range)
                  kept      g = guard bit, r.. = round and sticky bits (the s dropped bits)

Each mode is then "add something below the kept bits, then clear them" (add half - 1 + lsb for
ties-to-even, half for ties-away, all ones for away-from-zero, uniform random bits for
stochastic). Below the smallest subnormal (``a < Q_BITS``) the result is 0 or 2^q.

One kernel per mode: the mode is a compile-time constant there, so the per-element code is
branch-free and LLVM vectorizes it.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

# Mode codes: the order of fpsim.rounding.RoundingMode.
NEAREST_EVEN, NEAREST_AWAY, TOWARD_ZERO, UP, DOWN, ODD, STOCHASTIC = range(7)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@njit(inline="always")
def _uniform_bits(seed, i):
    """56 uniform random bits for element i (splitmix64 of a counter): thread-independent."""
    z = np.uint64(seed) + np.uint64(i + 1) * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return np.int64((z ^ (z >> np.uint64(31))) >> np.uint64(8))


@njit(inline="always")
def _round_magnitude(a, s, negative, mode, u, CM, M, EMIN, CBIAS):
    """The magnitude bits ``a`` rounded to a multiple of 2^s (0 <= s <= CM) under the mode.

    ``lsb`` is the last bit of the format's code for the kept part. For s < CM it is the
    lowest kept carrier bit. At s == CM the kept bits are the carrier's exponent field: with
    M > 0 the value lies in [2^q, 2^(q+1)) and its code is ...0001 (odd); with M == 0 the
    code's last bit is the format's exponent field's, eb - CBIAS + bias.
    """
    mask = (np.int64(1) << s) - 1
    parity_shift = (1 - EMIN - CBIAS) if M == 0 else 0
    lsb = (((a >> s) + parity_shift) | np.int64(s >= CM and M > 0)) & 1
    if mode == NEAREST_EVEN:  # add half - 1, plus 1 if the kept significand is odd
        return (a + (((mask >> 1) + lsb) & mask)) & ~mask
    if mode == NEAREST_AWAY:  # add half
        return (a + (((mask >> 1) + 1) & mask)) & ~mask
    if mode == TOWARD_ZERO:
        return a & ~mask
    if mode == UP:
        return (a + (0 if negative else mask)) & ~mask
    if mode == DOWN:
        return (a + (mask if negative else 0)) & ~mask
    if mode == ODD:  # truncate; if anything was dropped and the kept code is even, add 1
        return (a & ~mask) + (np.int64(((a & mask) != 0) and lsb == 0) << s)
    return (a + (u & mask)) & ~mask  # stochastic: carries with probability rem / 2^s


@njit(inline="always")
def _tiny_goes_up(a, eb, s, negative, mode, u, half_q_bits, CM):
    """For 0 <= value < 2^q (smallest subnormal): does it round up to 2^q?"""
    if mode == NEAREST_EVEN:
        return a > half_q_bits  # the tie at 2^(q-1) goes to the even 0
    if mode == NEAREST_AWAY:
        return a >= half_q_bits
    if mode == TOWARD_ZERO:
        return False
    if mode == UP:
        return a != 0 and not negative
    if mode == DOWN:
        return a != 0 and negative
    if mode == ODD:
        return a != 0
    # stochastic: value = sig * 2^(e - CM) and 2^q = 2^(s + e - CM), so P(up) = sig / 2^s.
    # u is uniform in [0, 2^56): up iff u < sig * 2^(56 - s), exact for s <= 56; beyond that
    # the threshold is truncated (a bias below 2^-56). sig < 2^(CM + 1) and s > CM keep
    # sig << (56 - st) below 2^56; the right shift is capped so it stays defined.
    sig = (a & ((np.int64(1) << CM) - 1)) | (np.int64(eb > 0) << CM)
    st = min(s, 56)
    threshold = (sig << (56 - st)) >> min(s - st, 63)
    return u < threshold


@njit(inline="always")
def _round_bits_overflow(bits, mode, seed, i, c, f):
    """(carrier bit pattern of ``bits``'s value rounded to the format, overflowed): overflowed
    is True when the rounded magnitude exceeded max (before inf/NaN/clamping), or for inf/NaN
    input."""
    CM, CBIAS, ABS_MASK, INF_BITS, NAN_BITS, SIGN_MASK = c
    (M, EMIN, SUBNORMALS, MAX_BITS, MIN_NORMAL_BITS, OVER_BITS, HAS_INF, NO_NEG_ZERO,
     Q_BITS, HALF_Q_BITS) = f
    a_in = bits & ABS_MASK
    a = min(a_in, INF_BITS)  # NaN payloads must not carry out of the int64 when rounded
    sign = bits & SIGN_MASK
    negative = sign != 0
    u = _uniform_bits(seed, i) if mode == STOCHASTIC else np.int64(0)
    eb = a >> CM
    # dropped bits: CM - M, plus the distance below the normal range (subnormal spacing)
    s = CM - M + (max(EMIN + CBIAS - max(eb, 1), 0) if SUBNORMALS else 0)
    r = _round_magnitude(a, min(s, CM), negative, mode, u, CM, M, EMIN, CBIAS)
    if SUBNORMALS:
        up = _tiny_goes_up(a, eb, s, negative, mode, u, HALF_Q_BITS, CM)
        r = r if a >= Q_BITS else (Q_BITS if up else 0)
    else:
        r = 0 if r < MIN_NORMAL_BITS else r  # flush to zero after rounding
    if NO_NEG_ZERO:
        sign = 0 if r == 0 else sign
    res = sign | r
    if r > MAX_BITS:  # overflow, or an inf/NaN input
        toward_zero = (
            mode == TOWARD_ZERO or (mode == DOWN and not negative) or (mode == UP and negative)
        )
        res = sign | (MAX_BITS if toward_zero else OVER_BITS)
        if a_in >= INF_BITS:  # NaN stays NaN; inf stays inf if the format has inf, else policy
            res = bits if (a_in > INF_BITS or HAS_INF) else sign | OVER_BITS
    return res, r > MAX_BITS


@njit(inline="always")
def _round_bits(bits, mode, seed, i, c, f):
    """The carrier bit pattern (int64) of ``bits``'s value rounded to the format."""
    return _round_bits_overflow(bits, mode, seed, i, c, f)[0]


# Below this many elements a kernel runs serially: starting the thread pool costs more.
PARALLEL_MIN = 1 << 15
# The counting kernels work in chunks, each with local counters LLVM can keep in registers.
_CHUNK = 1 << 14


@njit(inline="always")
def _round_loop(src, dst, mode, seed, c, f):
    n = src.size
    if n < PARALLEL_MIN:
        for i in range(n):
            dst[i] = _round_bits(np.int64(src[i]), mode, seed, i, c, f)
    else:
        for i in prange(n):
            dst[i] = _round_bits(np.int64(src[i]), mode, seed, i, c, f)


@njit(inline="always")
def _events(b, r, overflowed, c, f):
    """The five events of one rounding (input bits b, result bits r) as 0/1 int32s.

    Non-short-circuit boolean operators keep it branch-free, so the loop vectorizes.
    """
    INF_BITS, ABS_MASK, MIN_NORMAL_BITS = c[3], c[2], f[4]
    a = b & ABS_MASK
    ra = r & ABS_MASK
    finite_in = a < INF_BITS
    return (
        np.int32(finite_in & (ra != a)),
        np.int32(finite_in & overflowed),
        np.int32(finite_in & (a != 0) & (ra == 0)),
        np.int32((ra != 0) & (ra < MIN_NORMAL_BITS)),
        np.int32((a <= INF_BITS) & (ra > INF_BITS)),
    )


@njit(inline="always")
def _round_count_range(src, dst, lo, hi, mode, seed, c, f):
    """Round src[lo:hi] into dst; return its five event counts (int32: hi - lo <= _CHUNK)."""
    t0 = np.int32(0)
    t1 = np.int32(0)
    t2 = np.int32(0)
    t3 = np.int32(0)
    t4 = np.int32(0)
    for i in range(lo, hi):
        j = np.uint64(i)  # an unsigned index: no wraparound check, so the loop vectorizes
        b = np.int64(src[j])
        r, overflowed = _round_bits_overflow(b, mode, seed, i, c, f)
        dst[j] = r
        e = _events(b, r, overflowed, c, f)
        t0 += e[0]
        t1 += e[1]
        t2 += e[2]
        t3 += e[3]
        t4 += e[4]
    return t0, t1, t2, t3, t4


@njit(inline="always")
def _round_loop_counting(src, dst, mode, seed, c, f):
    """_round_loop that also counts events in the same pass (see ROUND_COUNTING), in chunks
    of _CHUNK elements, each with its own counters."""
    n = src.size
    chunks = max((n + _CHUNK - 1) // _CHUNK, 1)
    counts = np.zeros((chunks, 5), dtype=np.int64)
    if n < PARALLEL_MIN:
        for k in range(chunks):
            t = _round_count_range(src, dst, k * _CHUNK, min(n, (k + 1) * _CHUNK), mode, seed,
                                   c, f)
            for j in range(5):
                counts[k, j] = t[j]
    else:
        for k in prange(chunks):
            t = _round_count_range(src, dst, k * _CHUNK, min(n, (k + 1) * _CHUNK), mode, seed,
                                   c, f)
            for j in range(5):
                counts[k, j] = t[j]
    total = counts.sum(axis=0)
    return total[0], total[1], total[2], total[3], total[4]


# One plain and one counting kernel per mode, indexed by the mode code.
# src and dst are 1-D int32 (float32 carrier) or int64 (float64 carrier) views.


@njit(parallel=True, cache=True)
def _round_nearest_even(src, dst, seed, c, f):
    _round_loop(src, dst, NEAREST_EVEN, seed, c, f)


@njit(parallel=True, cache=True)
def _round_nearest_away(src, dst, seed, c, f):
    _round_loop(src, dst, NEAREST_AWAY, seed, c, f)


@njit(parallel=True, cache=True)
def _round_toward_zero(src, dst, seed, c, f):
    _round_loop(src, dst, TOWARD_ZERO, seed, c, f)


@njit(parallel=True, cache=True)
def _round_up(src, dst, seed, c, f):
    _round_loop(src, dst, UP, seed, c, f)


@njit(parallel=True, cache=True)
def _round_down(src, dst, seed, c, f):
    _round_loop(src, dst, DOWN, seed, c, f)


@njit(parallel=True, cache=True)
def _round_odd(src, dst, seed, c, f):
    _round_loop(src, dst, ODD, seed, c, f)


@njit(parallel=True, cache=True)
def _round_stochastic(src, dst, seed, c, f):
    _round_loop(src, dst, STOCHASTIC, seed, c, f)


@njit(parallel=True, cache=True)
def _count_nearest_even(src, dst, seed, c, f):
    return _round_loop_counting(src, dst, NEAREST_EVEN, seed, c, f)


@njit(parallel=True, cache=True)
def _count_nearest_away(src, dst, seed, c, f):
    return _round_loop_counting(src, dst, NEAREST_AWAY, seed, c, f)


@njit(parallel=True, cache=True)
def _count_toward_zero(src, dst, seed, c, f):
    return _round_loop_counting(src, dst, TOWARD_ZERO, seed, c, f)


@njit(parallel=True, cache=True)
def _count_up(src, dst, seed, c, f):
    return _round_loop_counting(src, dst, UP, seed, c, f)


@njit(parallel=True, cache=True)
def _count_down(src, dst, seed, c, f):
    return _round_loop_counting(src, dst, DOWN, seed, c, f)


@njit(parallel=True, cache=True)
def _count_odd(src, dst, seed, c, f):
    return _round_loop_counting(src, dst, ODD, seed, c, f)


@njit(parallel=True, cache=True)
def _count_stochastic(src, dst, seed, c, f):
    return _round_loop_counting(src, dst, STOCHASTIC, seed, c, f)


ROUND = (
    _round_nearest_even, _round_nearest_away, _round_toward_zero, _round_up, _round_down,
    _round_odd, _round_stochastic,
)
"""ROUND[mode](src, dst, seed, c, f): dst = bits of src rounded to the format."""

ROUND_COUNTING = (
    _count_nearest_even, _count_nearest_away, _count_toward_zero, _count_up, _count_down,
    _count_odd, _count_stochastic,
)
"""ROUND_COUNTING[mode](...) also returns (inexact, overflow, underflow, subnormal, nan_created).
overflow: a finite input whose rounded magnitude exceeded max (it became inf, NaN, or was
clamped to max; a value just above max that rounds down to max is only inexact). underflow: a
non-zero finite input whose result is zero. subnormal: a non-zero result below the smallest
normal. nan_created: a non-NaN input whose result is NaN."""


# --- the float32 nearest-even fast path ---------------------------------------------------------
# fpsim.round's most common call, and the one nn's fused kernels inline. Valid for a float32
# carrier, a format with subnormals, M < 23 and a normal range inside float32's, and
# p = (M, MIN_NORMAL_BITS, C_SUB, MAX_BITS, OVF_BITS, NO_NEG_ZERO) (fpsim.quantize packs it).
# The general kernel above computes the same function; this one is cheaper per element:
#
# - normal region, |x| >= 2^emin: drop d = 23 - M bits of the magnitude with ties-to-even,
#       a = 0|EEEEEEEE|MMMMMMMMMM|ddddddddddddd     rounded = (a + 2^(d-1) - 1 + lsb) & ~(2^d - 1)
#   (the carry out of the mantissa bumps the exponent);
# - subnormal region, |x| < 2^emin: the spacing is the fixed 2^q, q = emin - M. Adding
#   C_SUB = 2^(q+23) moves |x| into the float32 binade whose ulp is exactly 2^q, so the float32
#   addition itself rounds to nearest-even on that grid, and (|x| + C_SUB) - C_SUB is exact.
#
# Both regions are computed and one is selected, without branches: values straddle the
# subnormal boundary at random and a mispredicted branch costs more than the other path.


@njit(inline="always")
def round_nearest_even_f32_value(v, p):
    """The float32 ``v`` rounded to nearest-even in the format described by ``p``."""
    M, MIN_NORMAL_BITS, C_SUB, MAX_BITS, OVF_BITS, NO_NEG_ZERO = p
    u = np.int64(np.float32(v).view(np.uint32))
    a = u & 0x7FFFFFFF
    sign = u & 0x80000000
    sub = np.int64(np.float32((abs(v) + C_SUB) - C_SUB).view(np.uint32))
    sub = sub | (sign if (sub != 0 or NO_NEG_ZERO == 0) else 0)
    d = 23 - M
    rb = (a + ((1 << d) >> 1) - 1 + ((a >> d) & 1)) & ~((1 << d) - 1)
    rb = OVF_BITS if rb > MAX_BITS else rb  # overflow, and inf input: the format's policy
    res = sub if a < MIN_NORMAL_BITS else (sign | rb)
    res = u if a > 0x7F800000 else res  # NaN stays NaN
    return np.uint32(res).view(np.float32)


@njit(parallel=True, cache=True)
def round_nearest_even_f32(src, dst, p):
    """dst = src rounded to nearest-even (1-D float32 arrays; dst may be src)."""
    n = src.size
    if n < PARALLEL_MIN:
        for i in range(n):
            dst[i] = round_nearest_even_f32_value(src[i], p)
    else:
        for i in prange(n):
            dst[i] = round_nearest_even_f32_value(src[i], p)


@njit(inline="always")
def _round_count_nearest_even_f32(src, dst, lo, hi, p):
    """dst[lo:hi] = nearest-even(src[lo:hi]) and its five event counts."""
    M, MIN_NORMAL_BITS, MAX_BITS = p[0], p[1], p[3]
    d = 23 - M
    t0 = np.int64(0)
    t1 = np.int64(0)
    t2 = np.int64(0)
    t3 = np.int64(0)
    t4 = np.int64(0)
    for i in range(lo, hi):
        j = np.uint64(i)  # an unsigned index: no wraparound check, so the loop vectorizes
        r = round_nearest_even_f32_value(src[j], p)
        dst[j] = r
        a = np.int64(np.float32(src[j]).view(np.uint32)) & 0x7FFFFFFF
        ra = np.int64(np.float32(r).view(np.uint32)) & 0x7FFFFFFF
        finite_in = a < 0x7F800000
        rb = (a + ((1 << d) >> 1) - 1 + ((a >> d) & 1)) & ~((1 << d) - 1)  # as the kernel does
        t0 += np.int64(finite_in & (ra != a))
        t1 += np.int64(finite_in & (a >= MIN_NORMAL_BITS) & (rb > MAX_BITS))
        t2 += np.int64(finite_in & (a != 0) & (ra == 0))
        t3 += np.int64((ra != 0) & (ra < MIN_NORMAL_BITS))
        t4 += np.int64((a <= 0x7F800000) & (ra > 0x7F800000))
    return t0, t1, t2, t3, t4


@njit(parallel=True, cache=True)
def round_nearest_even_f32_counting(src, dst, p):
    """round_nearest_even_f32 that also returns the five event counts of ROUND_COUNTING."""
    n = src.size
    chunks = max((n + _CHUNK - 1) // _CHUNK, 1)
    counts = np.zeros((chunks, 5), dtype=np.int64)
    for k in prange(chunks):
        t = _round_count_nearest_even_f32(src, dst, k * _CHUNK, min(n, (k + 1) * _CHUNK), p)
        for j in range(5):
            counts[k, j] = t[j]
    total = counts.sum(axis=0)
    return total[0], total[1], total[2], total[3], total[4]


def carrier_constants(dtype: np.dtype) -> tuple[int, ...]:
    """The carrier tuple ``c`` for float32 or float64."""
    if dtype == np.float32:
        return (23, 127, 0x7FFFFFFF, 0x7F800000, 0x7FC00000, 0x80000000)
    return (52, 1023, 0x7FFFFFFFFFFFFFFF, 0x7FF0000000000000, 0x7FF8000000000000, -(2**63))


# --- accumulation kernels (fpsim.accumulate) -------------------------------------------------
# The accumulator is a float64 holding a value of the accumulation format. Each step adds one
# term exactly in spirit: TwoSum gives hi + lo == s + x exactly; when lo != 0, hi is moved to the
# odd neighbour on lo's side (round-to-odd into float64), which keeps the "inexact" information
# so that the one rounding to a format of p <= 24 bits (53 >= p + 2) is the correct rounding of
# the exact s + x. Products of two float32-representable values (<= 24-bit significands, at most
# 48 bits, exponents far inside float64's range) are exact in float64.


@njit(inline="always")
def _odd_sum(s, x):
    """s + x rounded to odd in float64 (exactly s + x when that fits float64)."""
    hi = s + x
    bb = hi - s
    lo = (s - (hi - bb)) + (x - bb)  # TwoSum: hi + lo == s + x exactly (no overflow here)
    if lo != 0.0 and np.isfinite(hi):
        b = np.float64(hi).view(np.int64)
        if (b & 1) == 0:
            # sign-magnitude bits: +1 grows |hi|, -1 shrinks it; step toward the exact value
            b = b + 1 if (lo > 0.0) == (hi > 0.0) else b - 1
            hi = np.int64(b).view(np.float64)
    return hi


@njit(cache=True)
def _round_f64(x, mode, seed, i, c, f):
    """A float64 value rounded to the format (c must be the float64 carrier tuple)."""
    b = np.float64(x).view(np.int64)
    return np.int64(_round_bits(b, mode, seed, i, c, f)).view(np.float64)


@njit(cache=True)
def _reduce_row(x, buf, pairwise, mode, seed, base, c, f):
    """One row's sum, the accumulator rounded to the format after every addition.

    sequential: s = x[0]; s = rnd(s + x[k]) for k = 1..n-1.
    pairwise: adjacent pairs level by level, rnd(buf[2i] + buf[2i+1]) (a balanced tree);
    an odd element out moves up a level unchanged. ``buf`` has room for n values.
    """
    n = x.size
    if n == 0:
        return 0.0
    if not pairwise:
        s = _round_f64(x[0], mode, seed, base, c, f)
        for k in range(1, n):
            s = _round_f64(_odd_sum(s, x[k]), mode, seed, base + k, c, f)
        return s
    for k in range(n):
        buf[k] = _round_f64(x[k], mode, seed, base + k, c, f)
    step = n
    m = n
    while m > 1:
        half = m // 2
        for k in range(half):
            buf[k] = _round_f64(
                _odd_sum(buf[2 * k], buf[2 * k + 1]), mode, seed, base + step + k, c, f
            )
        if m % 2 == 1:
            buf[half] = buf[m - 1]
        step += half
        m = m - half
    return buf[0]


@njit(parallel=True, cache=True)
def accumulate_rows(x, out, pairwise, mode, seed, c, f):
    """out[r] = sum of the float64 row x[r, :] with the accumulator rounded every addition."""
    rows, n = x.shape
    for r in prange(rows):
        buf = np.empty(n if pairwise else 0, dtype=np.float64)
        out[r] = _reduce_row(x[r], buf, pairwise, mode, seed, r * 2 * n, c, f)


@njit(parallel=True, cache=True)
def matmul_accumulate(a, bt, out, pairwise, mode, seed, c, f):
    """out[i, j] = sum_k a[i, k] * bt[j, k]: exact float64 products, rounded accumulation.

    ``bt`` is the right operand transposed (rows are its columns), both C-contiguous float64.
    """
    m, k = a.shape
    n = bt.shape[0]
    for i in prange(m):
        prods = np.empty(k, dtype=np.float64)
        buf = np.empty(k if pairwise else 0, dtype=np.float64)
        for j in range(n):
            for t in range(k):
                prods[t] = a[i, t] * bt[j, t]  # exact: <= 48-bit significand
            out[i, j] = _reduce_row(prods, buf, pairwise, mode, seed, (i * n + j) * 2 * k, c, f)
