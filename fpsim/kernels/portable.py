"""The general kernel's rounding in plain numpy: answers while a numba kernel compiles.

``round_bits`` is ``fpsim.kernels.general._round_bits_overflow`` line for line, on whole int64
arrays instead of one element: every mode, both carriers, flush-to-zero, each overflow policy,
unsigned formats, and stochastic rounding with the same splitmix64 bits for the same
``(seed, index)``. So its results are bit-identical to the numba kernels' (the tests compare
them on every code, midpoint and neighbour of several formats, in every mode), and a fresh
install can answer a small array at once instead of waiting a second or more for numba
(``fpsim.kernels.lazy`` decides when). It is 15 to 35 times slower per element than the
compiled kernel, which is why it is only a stand-in.

numpy's int64 and uint64 arithmetic wraps like numba's; shifts are taken only by amounts in
[0, 63], as in the kernel.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from fpsim.kernels.constants import Carrier, FormatBits
from fpsim.kernels.general import (
    _ABOVE_HALF,
    _HALF_OR_MORE,
    _MIX1,
    _MIX2,
    _NONZERO,
    GOLDEN,
    ModeBits,
)

# Arrays are processed this many elements at a time, so the temporaries stay in cache.
BLOCK = 1 << 14

_I64 = np.int64


def _tiny_threshold(rule: int, half_q_bits: int) -> int:
    """general._tiny_threshold: below 2^q, up to 2^q when the bits exceed this."""
    if rule == _ABOVE_HALF:
        return half_q_bits
    if rule == _HALF_OR_MORE:
        return half_q_bits - 1
    if rule == _NONZERO:
        return 0
    return 0x7FFFFFFFFFFFFFFF


def random_bits(seed: int, index: np.ndarray) -> np.ndarray:
    """The kernel's 56 uniform random bits (int64) for each element index under ``seed``."""
    z = np.uint64(seed % 2**64) + (index.astype(np.uint64) + np.uint64(1)) * GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return ((z ^ (z >> np.uint64(31))) >> np.uint64(8)).astype(np.int64)


def round_bits(
    bits: np.ndarray, m: ModeBits, seed: int, index: np.ndarray | None, c: Carrier,
    f: FormatBits,
) -> tuple[np.ndarray, np.ndarray]:
    """(rounded carrier bits as int64, overflowed) for the int64 array ``bits`` (a float32
    carrier's int32 bits sign-extended, or a float64 carrier's int64 bits); ``index`` holds
    each element's index in the stochastic stream (unused in the other modes)."""
    CM, CBIAS, INF_BITS = c.CM, c.CBIAS, c.INF_BITS
    M, EMIN, MAX_BITS = f.M, f.EMIN, f.MAX_BITS
    a_in = bits & c.ABS_MASK
    a = np.minimum(a_in, INF_BITS)
    sign = bits & _I64(c.SIGN_MASK)
    negative = sign != 0
    if m.STOCHASTIC:
        assert index is not None, "stochastic rounding needs the element indices"
        u = random_bits(seed, index)
    else:
        u = np.zeros(bits.shape, dtype=np.int64)
    eb = a >> CM
    below = np.maximum(EMIN + CBIAS - np.maximum(eb, 1), 0) if f.SUBNORMALS else 0
    s_full = np.broadcast_to(np.asarray(CM - M + below, dtype=np.int64), bits.shape)
    s = np.minimum(s_full, CM)
    mask = (_I64(1) << s) - 1
    parity_shift = (1 - EMIN - CBIAS) if M == 0 else 0
    lsb = (((a >> s) + parity_shift) | ((s >= CM) & (M > 0)).astype(np.int64)) & 1
    all_ones = np.where(negative, -m.ALL_NEG, -m.ALL_POS).astype(np.int64)
    rb = m.STOCHASTIC  # as general._round_bits_overflow: rb random bits, 56 the full draw
    v = u >> (56 - rb)
    rand = (u & mask) if rb >= 56 else (v << np.maximum(s - rb, 0)) >> np.maximum(rb - s, 0)
    add = ((((mask >> 1) & -m.HALF) + (lsb & -m.LSB) + m.ONE) & mask) + (mask & all_ones) + (
        rand)
    if m.ODD:
        r = (a & ~mask) + ((((a & mask) != 0) & (lsb == 0)).astype(np.int64) << s)
    else:
        r = (a + add) & ~mask

    if f.SUBNORMALS:
        tiny = a < f.Q_BITS
        if m.STOCHASTIC:
            sig = (a & ((_I64(1) << CM) - 1)) | ((eb > 0).astype(np.int64) << CM)
            up = v < ((sig << np.maximum(rb - s_full, 0))
                      >> np.minimum(np.maximum(s_full - rb, 0), 63))
        else:
            h = f.HALF_Q_BITS
            up = a > np.where(negative, _tiny_threshold(m.TINY_NEG, h),
                              _tiny_threshold(m.TINY_POS, h))
        r = np.where(tiny, np.where(up, _I64(f.Q_BITS), _I64(0)), r)
    else:
        r = np.where(r < f.MIN_NORMAL_BITS, _I64(0), r)
    if f.NO_NEG_ZERO:
        sign = np.where(r == 0, _I64(0), sign)
    res = sign | r
    over = r > MAX_BITS
    if over.any():
        toward_zero = np.where(negative, m.ZERO_NEG, m.ZERO_POS) != 0
        res_over = sign | np.where(toward_zero, _I64(MAX_BITS), _I64(f.OVER_BITS))
        special = a_in >= INF_BITS
        keep = (a_in > INF_BITS) | bool(f.HAS_INF)
        res_over = np.where(special, np.where(keep, bits, sign | f.OVER_BITS), res_over)
        res = np.where(over, res_over, res)
    if f.UNSIGNED:
        outside = negative & (a_in > 0) & (a_in <= INF_BITS)
        res = np.where(outside, _I64(f.NEGATIVE_BITS), res)
        over = over & ~outside
    return res, over


def events(
    b: np.ndarray, r: np.ndarray, overflowed: np.ndarray, c: Carrier, f: FormatBits
) -> np.ndarray:
    """general._events summed: the five event counts (int64) of inputs b, results r."""
    a = b & c.ABS_MASK
    ra = r & c.ABS_MASK
    finite_in = a < c.INF_BITS
    return np.array([
        np.count_nonzero(finite_in & (ra != a)),
        np.count_nonzero(finite_in & overflowed),
        np.count_nonzero(finite_in & (a != 0) & (ra == 0)),
        np.count_nonzero((ra != 0) & (ra < f.MIN_NORMAL_BITS)),
        np.count_nonzero((a <= c.INF_BITS) & (ra > c.INF_BITS)),
    ], dtype=np.int64)


def _rounded_blocks(
    src: np.ndarray, dst: np.ndarray, lo: int, hi: int, m: ModeBits, seed: int, c: Carrier,
    f: FormatBits,
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """dst[lo:hi] = src[lo:hi] rounded, BLOCK elements at a time; yields each block's (input
    bits, rounded bits, overflowed) after writing it."""
    for start in range(lo, hi, BLOCK):
        stop = min(hi, start + BLOCK)
        b = src[start:stop].astype(np.int64)
        index = np.arange(start, stop, dtype=np.int64) if m.STOCHASTIC else None
        r, over = round_bits(b, m, seed, index, c, f)
        dst[start:stop] = r.astype(dst.dtype, casting="unsafe")
        yield b, r, over


def round_count_range(
    src: np.ndarray, dst: np.ndarray, lo: int, hi: int, m: ModeBits, seed: int, c: Carrier,
    f: FormatBits,
) -> np.ndarray:
    """general.round_count_range in numpy: dst[lo:hi] = src[lo:hi] rounded (1-D int32 or
    int64 views; dst may be src); returns the five event counts."""
    counts = np.zeros(5, dtype=np.int64)
    for b, r, over in _rounded_blocks(src, dst, lo, hi, m, seed, c, f):
        counts += events(b, r, over, c, f)
    return counts


def round_range(
    src: np.ndarray, dst: np.ndarray, lo: int, hi: int, m: ModeBits, seed: int, c: Carrier,
    f: FormatBits,
) -> None:
    """general.round_range in numpy (see round_count_range; no counts)."""
    for _ in _rounded_blocks(src, dst, lo, hi, m, seed, c, f):
        pass
