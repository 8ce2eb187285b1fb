"""The general rounding kernel: every mode, float32 or float64 carrier, on integer views.

A non-negative carrier value ``0|EEEEEEEE|MMMMMMMMMMMMMMMMMMMMMMM`` (float32) has magnitude bits
``a`` that are monotone in the value and, within one binade, linear in it. So rounding the value
to a multiple of the format's spacing ``2^q`` is rounding ``a`` to a multiple of ``2^s``, and a
carry out of the mantissa correctly bumps the exponent field:

    a = EEEEEEEE|MMMMMMMMMM|grrrrrrrrrrrr      s = CM - M (+ how far below the normal range)
                  kept      g = guard bit, r.. = round and sticky bits (the s dropped bits)

Each mode is then "add something below the kept bits, then clear them" (add half - 1 + lsb for
ties-to-even, half for ties-away, all ones for away-from-zero, uniform random bits for
stochastic). Below the smallest subnormal (``a < Q_BITS``) the result is 0 or 2^q.

The mode is a run-time argument: one compiled kernel serves every mode (a branch on a
loop-invariant value costs little per element, and compiling one kernel instead of one per mode
is what keeps a fresh install's first calls short). Kernels work on ``[lo, hi)`` of flat arrays
and release the GIL; ``fpsim.kernels.threads`` runs them on blocks of a large array in parallel.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba import njit

from fpsim.rounding import RoundingMode

GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # splitmix64's constants
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def stream_seed(seed: int, offset: int) -> int:
    """The seed whose element i draws what element ``offset + i`` draws under ``seed`` (as a
    signed 64-bit int, so the kernel's argument type never changes)."""
    z = (seed + offset * int(GOLDEN)) % 2**64
    return z - 2**64 if z >= 2**63 else z


class ModeBits(NamedTuple):
    """A mode as the loop-invariant 0/1 switches the branch-free per-element code reads.

    Round-to-nearest-even adds half - 1 + lsb below the kept bits, ties-away half, up (on the
    positive side) and down (on the negative side) all ones, stochastic uniform random bits,
    toward zero nothing; odd truncates and sets the last bit if anything was dropped. Below the
    smallest subnormal 2^q a value goes up to 2^q when its bits exceed a threshold (the tie
    at half goes to the even 0 under nearest-even).
    """

    HALF: int  # add (2^s - 1) >> 1
    LSB: int  # add the kept code's last bit
    ONE: int  # add 1
    ALL_POS: int  # add 2^s - 1 to a positive value
    ALL_NEG: int  # add 2^s - 1 to a negative value
    ODD: int
    STOCHASTIC: int  # 0, or the random bits per element: 1..56 (56: the full-precision draw)
    TINY_POS: int  # a positive value below 2^q goes up to 2^q when its bits are: _NONZERO,
    TINY_NEG: int  # _ABOVE_HALF (of 2^q), _HALF_OR_MORE, _NEVER; a negative one likewise
    ZERO_POS: int  # an overflow of a positive value goes to max (toward zero) instead
    ZERO_NEG: int


_NONZERO, _ABOVE_HALF, _HALF_OR_MORE, _NEVER = 0, 1, 2, 3
MODE_KERNELS: dict[RoundingMode, ModeBits] = {
    # mode:                                 HALF LSB ONE POS NEG ODD STO TINY+ TINY-  0+ 0-
    RoundingMode.NEAREST_EVEN: ModeBits(1, 1, 0, 0, 0, 0, 0, _ABOVE_HALF, _ABOVE_HALF, 0, 0),
    RoundingMode.NEAREST_AWAY: ModeBits(1, 0, 1, 0, 0, 0, 0, _HALF_OR_MORE, _HALF_OR_MORE, 0, 0),
    RoundingMode.TOWARD_ZERO: ModeBits(0, 0, 0, 0, 0, 0, 0, _NEVER, _NEVER, 1, 1),
    RoundingMode.UP: ModeBits(0, 0, 0, 1, 0, 0, 0, _NONZERO, _NEVER, 0, 1),
    RoundingMode.DOWN: ModeBits(0, 0, 0, 0, 1, 0, 0, _NEVER, _NONZERO, 1, 0),
    RoundingMode.ODD: ModeBits(0, 0, 0, 0, 0, 1, 0, _NONZERO, _NONZERO, 0, 0),
    RoundingMode.STOCHASTIC: ModeBits(0, 0, 0, 0, 0, 0, 56, _NEVER, _NEVER, 0, 0),
}
"""The general kernel's switches for each rounding mode: the one table from a RoundingMode to
its kernel (a test checks that every mode has an entry)."""


RANDOM_BITS = 56  # random bits drawn per element (splitmix64's top 56)


def mode_bits(mode: RoundingMode, rng_bits: int | None = None) -> ModeBits:
    """The kernel's switches for ``mode`` (MODE_KERNELS); a mode without an entry raises.
    ``rng_bits`` (stochastic only, validated by the caller) sets the random bits per element."""
    try:
        bits = MODE_KERNELS[mode]
    except KeyError:
        raise ValueError(f"rounding mode {mode!r} has no kernel entry; entries exist for "
                         f"{[m.value for m in MODE_KERNELS]}") from None
    return bits if rng_bits is None else bits._replace(STOCHASTIC=rng_bits)


@njit(inline="always")
def _tiny_threshold(rule, half_q_bits):
    """Below 2^q, the value goes up to 2^q when its bits exceed this (loop-invariant)."""
    if rule == _ABOVE_HALF:
        return half_q_bits  # the tie at 2^(q-1) goes to the even 0
    if rule == _HALF_OR_MORE:
        return half_q_bits - 1
    if rule == _NONZERO:
        return np.int64(0)
    return np.int64(0x7FFFFFFFFFFFFFFF)  # _NEVER


@njit(inline="always")
def draw(seed, i):
    """Element i's 56 uniform random bits (an int64): the top 56 bits of splitmix64 of the
    counter ``i + 1`` from ``seed``, the one stream of every stochastic kernel."""
    return mix(counter(seed, i))


@njit(inline="always")
def counter(seed, i):
    """splitmix64's state for element i: ``seed + (i + 1) * golden`` (uint64, wrapping).
    Element i + 1's is this plus ``GOLDEN``, so a loop over consecutive elements may step it
    by one addition instead of a multiplication per element (the same bits)."""
    return np.uint64(seed) + np.uint64(i + 1) * GOLDEN


@njit(inline="always")
def mix(z):
    """The top 56 bits (an int64) of splitmix64's output for the state ``z``."""
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return np.int64((z ^ (z >> np.uint64(31))) >> np.uint64(8))


@njit(inline="always")
def _round_bits_overflow(bits, m, stochastic, seed, i, c, f):
    """(carrier bit pattern of ``bits``'s value rounded to the format, overflowed): overflowed
    is True when the rounded magnitude exceeded max (before inf/NaN/clamping), or for inf/NaN
    input. ``m`` is the mode's ModeBits; ``stochastic`` is m.STOCHASTIC as a constant of the
    caller's loop, so that the random bits cost nothing in the other modes' loops.

    One flat, branch-light function: the mode's switches are loop-invariant, so the loop
    vectorizes for every mode, and one compiled kernel serves them all.
    """
    CM, CBIAS, INF_BITS = c.CM, c.CBIAS, c.INF_BITS
    M, EMIN, MAX_BITS = f.M, f.EMIN, f.MAX_BITS
    a_in = bits & c.ABS_MASK
    a = min(a_in, INF_BITS)  # NaN payloads must not carry out of the int64 when rounded
    sign = bits & c.SIGN_MASK
    negative = sign != 0
    u = draw(seed, i) if stochastic else np.int64(0)
    eb = a >> CM
    # s dropped bits: CM - M, plus the distance below the normal range (subnormal spacing)
    s_full = CM - M + (max(EMIN + CBIAS - max(eb, 1), 0) if f.SUBNORMALS else 0)
    s = min(s_full, CM)

    # a rounded to a multiple of 2^s. ``lsb`` is the last bit of the format's code for the kept
    # part: for s < CM the lowest kept carrier bit. At s == CM the kept bits are the carrier's
    # exponent field: with M > 0 the value lies in [2^q, 2^(q+1)) and its code is ...0001
    # (odd); with M == 0 the code's last bit is the format's exponent field's, eb - CBIAS + bias.
    mask = (np.int64(1) << s) - 1
    parity_shift = (1 - EMIN - CBIAS) if M == 0 else 0
    lsb = (((a >> s) + parity_shift) | np.int64(s >= CM and M > 0)) & 1
    # (-switch is 0 or all ones: an AND, where a multiplication would not vectorize cheaply)
    all_ones = -(m.ALL_NEG if negative else m.ALL_POS)
    # stochastic with rb < 56 random bits: v uniform in [0, 2^rb) added at the top of the s
    # dropped bits (below them when s < rb: then all s bits are random), so the value goes up
    # with probability floor(f * 2^rb) / 2^rb for its fraction f of 2^s; with 56 bits, u's low
    # s bits (s <= 52): probability f exactly
    rb = m.STOCHASTIC
    v = u >> (56 - rb)
    rand = (u & mask) if rb >= 56 else (v << max(s - rb, 0)) >> max(rb - s, 0)
    add = ((((mask >> 1) & -m.HALF) + (lsb & -m.LSB) + m.ONE) & mask) + (mask & all_ones) + (
        rand)
    r = (a + add) & ~mask
    # odd: truncate; if anything was dropped and the kept code is even, add 1
    r_odd = (a & ~mask) + (np.int64(((a & mask) != 0) & (lsb == 0)) << s)
    r = r_odd if m.ODD else r

    # 0 <= value < 2^q (the smallest subnormal) becomes 0 or 2^q: up when its bits pass the
    # mode's threshold; stochastic: value = sig * 2^(e - CM) and 2^q = 2^(s + e - CM), so
    # f = sig / 2^s. v is uniform in [0, 2^rb): up iff v < floor(sig * 2^rb / 2^s), that is
    # with probability floor(f * 2^rb) / 2^rb (f itself for s <= rb). sig < 2^s here, so
    # sig << (rb - s) stays below 2^56; the right shift is capped so it stays defined.
    # (Computed for every element, used for the tiny ones: no branch in the loop.)
    h = f.HALF_Q_BITS
    up = a > (_tiny_threshold(m.TINY_NEG, h) if negative else _tiny_threshold(m.TINY_POS, h))
    sig = (a & ((np.int64(1) << CM) - 1)) | (np.int64(eb > 0) << CM)
    up_random = v < ((sig << max(rb - s_full, 0)) >> min(max(s_full - rb, 0), 63))
    up = up_random if stochastic else up
    if f.SUBNORMALS:
        r = r if a >= f.Q_BITS else (f.Q_BITS if up else 0)
    elif not f.SUBNORMALS:
        r = 0 if r < f.MIN_NORMAL_BITS else r  # flush to zero after rounding
    if f.NO_NEG_ZERO:
        sign = 0 if r == 0 else sign
    res = sign | r
    if r > MAX_BITS:  # overflow, or an inf/NaN input
        toward_zero = m.ZERO_NEG if negative else m.ZERO_POS
        res = sign | (MAX_BITS if toward_zero else f.OVER_BITS)
        if a_in >= INF_BITS:  # NaN stays NaN; inf stays inf if the format has inf, else policy
            res = bits if (a_in > INF_BITS or f.HAS_INF) else sign | f.OVER_BITS
    outside = f.UNSIGNED and negative and 0 < a_in <= INF_BITS
    if outside:  # a negative number lies outside an unsigned format: NaN (+0 without NaN)
        res = f.NEGATIVE_BITS
    return res, r > MAX_BITS and not outside


@njit(inline="always")
def _round_bits(bits, m, stochastic, seed, i, c, f):
    """The carrier bit pattern (int64) of ``bits``'s value rounded to the format."""
    return _round_bits_overflow(bits, m, stochastic, seed, i, c, f)[0]


# The counting kernels count in chunks, each with int32 counters LLVM keeps in registers.
CHUNK = 1 << 14


@njit(nogil=True, cache=True)
def round_range(src, dst, lo, hi, m, seed, c, f):
    """dst[lo:hi] = bits of src[lo:hi] rounded to the format (1-D int32 views of a float32
    carrier or int64 views of a float64 one; dst may be src; m: the mode's ModeBits)."""
    if m.STOCHASTIC:
        for i in range(lo, hi):
            j = np.uint64(i)  # an unsigned index: no wraparound check, so the loop vectorizes
            dst[j] = _round_bits(np.int64(src[j]), m, True, seed, i, c, f)
    else:
        for i in range(lo, hi):
            j = np.uint64(i)
            dst[j] = _round_bits(np.int64(src[j]), m, False, seed, i, c, f)


def _named(fn: Any, name: str) -> Any:
    """``fn`` renamed ``name`` (its qualified name too), then compiled and cached.

    Each mode's kernel is a closure of the same code, and numba names a compiled function's
    symbols (its Environment, which holds a returned array's dtype) from the qualified name and
    a counter of the process that compiled it. Two modes compiled in two processes (test
    workers, a pool) could get the same name; loaded together from the cache, one found the
    other's Environment or none ("'descr' is NULL" on return). A name per mode keeps them
    apart, and gives each mode its own cache files."""
    fn.__name__ = fn.__qualname__ = name
    return njit(nogil=True, cache=True)(fn)


def _specialised_range(mode: RoundingMode, bits: ModeBits) -> Any:
    """round_range for one mode, with its switches compile-time constants (numba freezes the
    closure's values), so LLVM folds them away: about twice as fast per element as the run-time
    switches, for one more compilation per mode and carrier (cached like every kernel)."""
    stochastic = bool(bits.STOCHASTIC)

    def round_mode_range(src, dst, lo, hi, seed, c, f):
        for i in range(lo, hi):
            j = np.uint64(i)  # an unsigned index: no wraparound check, so the loop vectorizes
            dst[j] = _round_bits(np.int64(src[j]), bits, stochastic, seed, i, c, f)

    return _named(round_mode_range, f"round_range_{mode.name.lower()}")


def _specialised_count_range(mode: RoundingMode, bits: ModeBits) -> Any:
    """round_count_range for one mode (see _specialised_range)."""
    stochastic = bool(bits.STOCHASTIC)

    def count_mode_range(src, dst, lo, hi, seed, c, f):
        return _round_count_loop(src, dst, lo, hi, bits, stochastic, seed, c, f)

    return _named(count_mode_range, f"round_count_range_{mode.name.lower()}")


SPECIALISED_RANGE: dict[RoundingMode, Any] = {
    mode: _specialised_range(mode, bits) for mode, bits in MODE_KERNELS.items()
}
SPECIALISED_COUNT_RANGE: dict[RoundingMode, Any] = {
    mode: _specialised_count_range(mode, bits) for mode, bits in MODE_KERNELS.items()
}
"""``SPECIALISED_RANGE[mode](src, dst, lo, hi, seed, c, f)``: round_range for one mode (and
``SPECIALISED_COUNT_RANGE``: round_count_range for one mode). Arrays
of ``SPECIALISE_MIN`` elements or more take it (float32 in a directed mode takes
``fpsim.kernels.directed_f32`` instead where that applies, unless counting): there its speed
(milliseconds per call) is worth its one-time compile (about a second per mode and carrier);
smaller ones share the general kernel, compiled once for every mode, so a fresh install answers
them at once."""

SPECIALISE_MIN = 1 << 20


def specialised_range(mode: RoundingMode, counting: bool = False) -> Any:
    """The one-mode round_range (counting: round_count_range) for ``mode``; a mode without one
    raises."""
    mode_bits(mode)  # the table's own error for a mode it lacks
    return (SPECIALISED_COUNT_RANGE if counting else SPECIALISED_RANGE)[mode]


@njit(inline="always")
def _events(b, r, overflowed, c, f):
    """The five events of one rounding (input bits b, result bits r) as 0/1 int32s.

    Non-short-circuit boolean operators keep it branch-free, so the loop vectorizes.
    """
    a = b & c.ABS_MASK
    ra = r & c.ABS_MASK
    finite_in = a < c.INF_BITS
    return (
        np.int32(finite_in & (ra != a)),
        np.int32(finite_in & overflowed),
        np.int32(finite_in & (a != 0) & (ra == 0)),
        np.int32((ra != 0) & (ra < f.MIN_NORMAL_BITS)),
        np.int32((a <= c.INF_BITS) & (ra > c.INF_BITS)),
    )


@njit(inline="always")
def _round_count_loop(src, dst, lo, hi, m, stochastic, seed, c, f):
    """The counting loop of round_count_range and of the one-mode counting kernels."""
    counts = np.zeros(5, dtype=np.int64)
    for start in range(lo, hi, CHUNK):
        t0 = np.int32(0)
        t1 = np.int32(0)
        t2 = np.int32(0)
        t3 = np.int32(0)
        t4 = np.int32(0)
        for i in range(start, min(hi, start + CHUNK)):
            j = np.uint64(i)  # an unsigned index: no wraparound check, so the loop vectorizes
            b = np.int64(src[j])
            r, overflowed = _round_bits_overflow(b, m, stochastic, seed, i, c, f)
            dst[j] = r
            e = _events(b, r, overflowed, c, f)
            t0 = np.int32(t0 + e[0])  # (numba widens int32 sums to int64; keep them narrow)
            t1 = np.int32(t1 + e[1])
            t2 = np.int32(t2 + e[2])
            t3 = np.int32(t3 + e[3])
            t4 = np.int32(t4 + e[4])
        counts[0] += t0
        counts[1] += t1
        counts[2] += t2
        counts[3] += t3
        counts[4] += t4
    return counts


@njit(nogil=True, cache=True)
def round_count_range(src, dst, lo, hi, m, seed, c, f):
    """round_range that also returns the five event counts of src[lo:hi] (int64s):
    (inexact, overflow, underflow, subnormal, nan_created).

    overflow: a finite input whose rounded magnitude exceeded max (it became inf, NaN, or was
    clamped to max; a value just above max that rounds down to max is only inexact). underflow:
    a non-zero finite input whose result is zero. subnormal: a non-zero result below the
    smallest normal. nan_created: a non-NaN input whose result is NaN.
    """
    return _round_count_loop(src, dst, lo, hi, m, m.STOCHASTIC, seed, c, f)
