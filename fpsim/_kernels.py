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
        t0 = np.int32(t0 + e[0])  # (numba widens int32 sums to int64; keep them narrow)
        t1 = np.int32(t1 + e[1])
        t2 = np.int32(t2 + e[2])
        t3 = np.int32(t3 + e[3])
        t4 = np.int32(t4 + e[4])
    return t0, t1, t2, t3, t4


@njit(inline="always")
def _round_loop_counting(src, dst, mode, seed, c, f, threads):
    """_round_loop that also counts events in the same pass (see ROUND_COUNTING): one
    contiguous block of the array a thread, counted in chunks of _CHUNK elements with int32
    counters LLVM keeps in vector registers."""
    n = src.size
    blocks = threads if n >= PARALLEL_MIN else 1
    per = (n + blocks - 1) // blocks
    counts = np.zeros((blocks, 5), dtype=np.int64)
    for k in prange(blocks):
        hi = min(n, (k + 1) * per)
        for lo in range(k * per, hi, _CHUNK):
            t = _round_count_range(src, dst, lo, min(hi, lo + _CHUNK), mode, seed, c, f)
            for j in range(5):
                counts[k, j] += t[j]
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
def _count_nearest_even(src, dst, seed, c, f, threads):
    return _round_loop_counting(src, dst, NEAREST_EVEN, seed, c, f, threads)


@njit(parallel=True, cache=True)
def _count_nearest_away(src, dst, seed, c, f, threads):
    return _round_loop_counting(src, dst, NEAREST_AWAY, seed, c, f, threads)


@njit(parallel=True, cache=True)
def _count_toward_zero(src, dst, seed, c, f, threads):
    return _round_loop_counting(src, dst, TOWARD_ZERO, seed, c, f, threads)


@njit(parallel=True, cache=True)
def _count_up(src, dst, seed, c, f, threads):
    return _round_loop_counting(src, dst, UP, seed, c, f, threads)


@njit(parallel=True, cache=True)
def _count_down(src, dst, seed, c, f, threads):
    return _round_loop_counting(src, dst, DOWN, seed, c, f, threads)


@njit(parallel=True, cache=True)
def _count_odd(src, dst, seed, c, f, threads):
    return _round_loop_counting(src, dst, ODD, seed, c, f, threads)


@njit(parallel=True, cache=True)
def _count_stochastic(src, dst, seed, c, f, threads):
    return _round_loop_counting(src, dst, STOCHASTIC, seed, c, f, threads)


ROUND = (
    _round_nearest_even, _round_nearest_away, _round_toward_zero, _round_up, _round_down,
    _round_odd, _round_stochastic,
)
"""ROUND[mode](src, dst, seed, c, f): dst = bits of src rounded to the format."""

ROUND_COUNTING = (
    _count_nearest_even, _count_nearest_away, _count_toward_zero, _count_up, _count_down,
    _count_odd, _count_stochastic,
)
"""ROUND_COUNTING[mode](src, dst, seed, c, f, threads), threads = numba.get_num_threads(),
also returns (inexact, overflow, underflow, subnormal, nan_created).
overflow: a finite input whose rounded magnitude exceeded max (it became inf, NaN, or was
clamped to max; a value just above max that rounds down to max is only inexact). underflow: a
non-zero finite input whose result is zero. subnormal: a non-zero result below the smallest
normal. nan_created: a non-NaN input whose result is NaN."""


# --- the float32 nearest-even fast path ---------------------------------------------------------
# fpsim.round's most common call, and the one nn's fused kernels inline. Valid for a float32
# carrier, a format with subnormals, 0 < M < 23, emin <= 0 and a normal range inside float32's,
# and p = (SHIFT, C_SUB, MIN_NORMAL, THRESHOLD, OVERFLOW, NO_NEG_ZERO) (fpsim.quantize packs it).
# The general kernel above computes the same function; this one is float32 arithmetic only, so
# it runs eight lanes wide, cheap enough that counting events beside it costs little.
#
# Rounding |x| to the format's grid is one float32 addition. The grid spacing in |x|'s binade
# [2^e, 2^(e+1)) is 2^(e-M) (2^q, q = emin - M, below the normal range). Take the power of two
# B = max(2^(e+23-M), C_SUB), C_SUB = 2^(q+23): its float32 ulp is that spacing, and |x| < B,
# so |x| + B lies in [B, 2B) where float32's own round-to-nearest-even works on exactly the
# format's grid (B is an even multiple of the spacing, so "even" means the same thing), and
# (|x| + B) - B is exact (Sterbenz). B's bits are |x|'s exponent field plus (23 - M) << 23.
# Where 2^(e+23-M) would pass float32's range (e >= 64), |x| is first scaled by 2^-64 and the
# result back by 2^64, both exact. Overflow is a comparison: THRESHOLD is the smallest float32
# whose rounding exceeds max (max plus half its spacing, plus one ulp where max's code is even,
# as the tie then goes down to max).


@njit(inline="always")
def _nearest_even_f32_parts(v, p):
    """(v rounded, |v|, |v| rounded before the overflow and NaN cases, |v| >= THRESHOLD)."""
    SHIFT, C_SUB, _, THRESHOLD, OVERFLOW, NO_NEG_ZERO = p
    av = abs(v)
    big = av >= np.float32(2.0**64)
    avs = av * (np.float32(2.0**-64) if big else np.float32(1.0))
    b = np.uint32((np.float32(avs).view(np.uint32) & np.uint32(0x7F800000)) + SHIFT)
    b = b.view(np.float32)
    b = b if b > C_SUB else C_SUB
    ra = ((avs + b) - b) * (np.float32(2.0**64) if big else np.float32(1.0))
    r = np.copysign(ra, v)
    if NO_NEG_ZERO:
        r = ra if ra == 0 else r
    over = av >= THRESHOLD
    r = np.copysign(OVERFLOW, v) if over else r  # finite overflow and inf input
    return (v if v != v else r), av, ra, over  # NaN stays NaN, payload and all


@njit(inline="always")
def round_nearest_even_f32_value(v, p):
    """The float32 ``v`` rounded to nearest-even in the format described by ``p``."""
    return _nearest_even_f32_parts(v, p)[0]


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


@njit(cache=True)
def round_nearest_even_f32_serial(src, dst, p):
    """round_nearest_even_f32 on the calling thread only."""
    for i in range(src.size):
        dst[i] = round_nearest_even_f32_value(src[i], p)


@njit(inline="always")
def _round_count_nearest_even_f32(src, dst, lo, hi, p):
    """dst[lo:hi] = nearest-even(src[lo:hi]) and six counts (int32: a chunk) from which
    round_nearest_even_f32_counting derives the five events.

    Each count is one float32 comparison, most of them shared with the rounding itself; the
    np.int32 casts keep the counters 32-bit (numba widens int32 sums to int64), so the loop
    stays eight lanes wide.
    """
    MIN_NORMAL = p[2]
    inexact = np.int32(0)
    overflow = np.int32(0)
    over = np.int32(0)
    zero = np.int32(0)
    small = np.int32(0)
    zero_in = np.int32(0)
    for i in range(lo, hi):
        j = np.uint64(i)  # an unsigned index: no wraparound check, so the loop vectorizes
        v = src[j]
        r, av, ra, o = _nearest_even_f32_parts(v, p)
        dst[j] = r
        finite = av < np.float32(np.inf)
        inexact = np.int32(inexact + np.int32(finite & (r != v)))
        overflow = np.int32(overflow + np.int32(finite & o))
        over = np.int32(over + np.int32(o))  # with inf input
        zero = np.int32(zero + np.int32(ra == 0))  # (NaN and overflow never have ra == 0)
        small = np.int32(small + np.int32(ra < MIN_NORMAL))  # zero or subnormal
        zero_in = np.int32(zero_in + np.int32(v == 0))
    return inexact, overflow, over, zero, small, zero_in


@njit(parallel=True, cache=True)
def round_nearest_even_f32_counting(src, dst, p, threads):
    """round_nearest_even_f32 that also returns the five event counts of ROUND_COUNTING;
    ``threads``: numba.get_num_threads() (one contiguous block of the array each).

    Zero input gives zero output, so underflow = zero results - zero inputs; subnormal = results
    below the smallest normal - zero results; the fast path makes NaN from non-NaN input only
    by overflowing (finite or inf) into a format whose overflow is NaN.
    """
    n = src.size
    blocks = threads if n >= PARALLEL_MIN else 1
    per = (n + blocks - 1) // blocks
    counts = np.zeros((blocks, 6), dtype=np.int64)
    for k in prange(blocks):  # counted chunk by chunk: int32 counters in registers
        hi = min(n, (k + 1) * per)
        for lo in range(k * per, hi, _CHUNK):
            t = _round_count_nearest_even_f32(src, dst, lo, min(hi, lo + _CHUNK), p)
            for j in range(6):
                counts[k, j] += t[j]
    inexact, overflow, over, zero, small, zero_in = counts.sum(axis=0)
    overflow_value = p[4]
    nan_created = over if overflow_value != overflow_value else 0
    return inexact, overflow, zero - zero_in, small - zero, nan_created


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
