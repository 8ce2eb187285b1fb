"""The float32 directed modes in float32 arithmetic: nearest_away, toward_zero, up, down, odd.

The general kernel's one-mode specialisations widen float32 bits to int64 (four lanes, about
thirty integer operations an element). This path works like ``fast_f32``: float32 arithmetic and
comparisons only, so the loop runs eight lanes wide. It computes the general kernel's function
bit for bit for a float32 carrier and a format with 0 < M < 23, emin <= 0, a sign, and a range
whose normal part (with flush-to-zero: and the binade below it) lies inside float32's normals
(``fpsim.quantize.directed_f32_constants`` packs ``p``, a ``DirectedF32``), with every overflow
policy and with or without subnormals.

Every mode starts from ``fast_f32``'s nearest-even rounding ``n = (|x| + B) - B`` on the grid
of spacing ``g = B * 2^-23`` (the format's spacing in |x|'s binade, 2^q below the normal range),
and moves at most one step of ``g``; every sum below is exact (a multiple of g inside the binade
or at its top):

- toward zero: ``t = n - g`` where ``n > |x|``, else ``n``;
- away from zero (up for x > 0, down for x < 0): ``n + g`` where ``n < |x|``, else ``n``;
- nearest, ties away: ``n + g`` where ``|x| - n == g / 2`` (a tie nearest-even sent down);
- odd: ``t``, or ``t + g`` where |x| is inexact and ``t``'s code is even. The bits of the
  non-negative floats are linear in the value within a binade and carry into the exponent at
  its top, so bits(t + g) - bits(t) is the one bit that is the code's last at t: OR it in
  (except at t = g, code 1: odd already, and its binade is g's, so the step is not a bit of t).

Values below 2^q follow from the same sums (the grid holds 0 and 2^q). With flush-to-zero the
grid does not reach below the binade under the smallest normal (``C_SUB`` is that binade's B:
everything below rounds to at most 2^(emin-1) and is flushed anyway), and results below the
smallest normal become signed zero. Then, as in the general kernel: a rounded magnitude above
max overflows to max where the mode rounds toward zero on that side, else to the policy's value;
an infinite input stays inf where the format has inf, else takes the policy's value; NaN stays
NaN, payload and all.

One kernel per mode, the mode a compile-time constant, made and compiled on first use
(``directed_f32_range``): a fresh install compiles only the modes it uses. Each has a counting
twin for an active ``fpsim.monitor`` (``directed_f32_range(mode, counting=True)``), which
returns the general kernel's five event counts, each a float32 comparison summed in int32
counters per chunk (so the loop stays one vector body); it too is compiled only when a
monitored call first needs it.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba import njit

from fpsim.kernels.general import CHUNK
from fpsim.rounding import RoundingMode

_EXPONENT_FIELD = np.uint32(((1 << 8) - 1) << 23)  # 0|11111111|000...0
_TOWARD_ZERO, _UP, _DOWN, _AWAY, _ODD = 0, 1, 2, 3, 4
_KIND = {
    RoundingMode.TOWARD_ZERO: _TOWARD_ZERO,
    RoundingMode.UP: _UP,
    RoundingMode.DOWN: _DOWN,
    RoundingMode.NEAREST_AWAY: _AWAY,
    RoundingMode.ODD: _ODD,
}
DIRECTED_F32_MODES = frozenset(_KIND)
"""The modes this path serves (nearest-even has ``fast_f32``; stochastic the general kernel)."""


@njit(inline="always")
def _directed_f32_parts(v, kind, p):
    """(``v`` rounded in mode ``kind``, a compile-time constant, to ``p``'s format; whether
    its rounded magnitude exceeded max, the general kernel's "overflowed")."""
    av = abs(v)
    negative = v < np.float32(0.0)  # (-0 rounds to itself either way)
    big = av >= np.float32(2.0**64)
    avs = av * (np.float32(2.0**-64) if big else np.float32(1.0))
    b = np.uint32((np.float32(avs).view(np.uint32) & _EXPONENT_FIELD) + p.SHIFT)
    b = b.view(np.float32)
    b = b if b > p.C_SUB else p.C_SUB
    g = b * np.float32(2.0**-23)
    n = (avs + b) - b
    t = n - g if n > avs else n  # toward zero
    if kind == _AWAY:
        r = n + g if avs - n == g * np.float32(0.5) else n
    elif kind == _ODD:  # t's code made odd: OR in the bit that is one code step there
        tb = np.float32(t).view(np.uint32)
        step = np.uint32(np.float32(t + g).view(np.uint32) - tb)
        # (t == g, code 1, is odd already; there the step is an exponent bit, not the code's)
        r = np.uint32(tb | (step if (t != avs) & (t != g) else np.uint32(0))).view(np.float32)
    elif kind == _UP:
        r = t if negative else (n + g if n < avs else n)
    elif kind == _DOWN:
        r = (n + g if n < avs else n) if negative else t
    else:
        r = t
    ra = r * (np.float32(2.0**64) if big else np.float32(1.0))
    # (selects, not branches on p's flags: LLVM keeps the loop one straight vector body)
    ra = np.float32(0.0) if ra < p.FLUSH_BELOW else ra
    res = ra if (ra == 0) & p.NO_NEG_ZERO else np.copysign(ra, v)
    if kind == _UP:
        over = -p.MAX if negative else p.OVERFLOW
    elif kind == _DOWN:
        over = -p.OVERFLOW if negative else p.MAX
    else:
        over = np.copysign(p.MAX if kind == _TOWARD_ZERO else p.OVERFLOW, v)
    overflowed = ra > p.MAX
    res = over if overflowed else res  # (inf input has ra = inf or NaN: it is decided below)
    res = np.copysign(p.INF_RESULT, v) if av == np.float32(np.inf) else res
    return (v if v != v else res), overflowed  # NaN stays NaN, payload and all


@njit(inline="always")
def _directed_f32_value(v, kind, p):
    """The float32 ``v`` rounded in mode ``kind`` (a compile-time constant) to ``p``'s format."""
    return _directed_f32_parts(v, kind, p)[0]


@njit(inline="always")
def _count_directed_f32(src, dst, lo, hi, kind, p):
    """dst[lo:hi] = src[lo:hi] rounded in mode ``kind``; returns the general kernel's five
    event counts (int64s): inexact, overflow, underflow, subnormal, NaN created."""
    counts = np.zeros(5, dtype=np.int64)
    for start in range(lo, hi, CHUNK):
        inexact = np.int32(0)
        overflow = np.int32(0)
        underflow = np.int32(0)
        subnormal = np.int32(0)
        nan_created = np.int32(0)
        for i in range(start, min(hi, start + CHUNK)):
            j = np.uint64(i)  # an unsigned index: no wraparound check, so the loop vectorizes
            v = src[j]
            r, overflowed = _directed_f32_parts(v, kind, p)
            dst[j] = r
            ar = abs(r)
            finite = abs(v) < np.float32(np.inf)
            # (the np.int32 casts keep the counters 32-bit: numba would widen them to int64)
            inexact = np.int32(inexact + np.int32(finite & (ar != abs(v))))
            overflow = np.int32(overflow + np.int32(finite & overflowed))
            underflow = np.int32(underflow + np.int32(finite & (v != 0) & (r == 0)))
            subnormal = np.int32(subnormal + np.int32((r != 0) & (ar < p.MIN_NORMAL)))
            nan_created = np.int32(nan_created + np.int32((v == v) & (r != r)))
        counts[0] += inexact
        counts[1] += overflow
        counts[2] += underflow
        counts[3] += subnormal
        counts[4] += nan_created
    return counts


def directed_f32_range(mode: RoundingMode, counting: bool = False) -> Any:
    """``kernel(src, dst, lo, hi, p)``: dst[lo:hi] = src[lo:hi] rounded in ``mode`` (1-D
    float32 arrays; dst may be src), returning the five event counts when ``counting``; made on
    first use (one kernel per mode and counting, however the arguments are spelled); a mode
    outside DIRECTED_F32_MODES raises."""
    return _directed_f32_range(mode, bool(counting))


@functools.cache
def _directed_f32_range(mode: RoundingMode, counting: bool) -> Any:
    try:
        kind = _KIND[mode]
    except KeyError:
        raise ValueError(f"mode {mode!r} has no float32 directed kernel; it serves "
                         f"{sorted(m.value for m in _KIND)}") from None

    if counting:
        @njit(nogil=True, cache=True)
        def count_directed_f32_range(src, dst, lo, hi, p):
            return _count_directed_f32(src, dst, lo, hi, kind, p)

        return count_directed_f32_range

    @njit(nogil=True, cache=True)
    def round_directed_f32_range(src, dst, lo, hi, p):
        for i in range(lo, hi):
            j = np.uint64(i)  # an unsigned index: no wraparound check, so the loop vectorizes
            dst[j] = _directed_f32_value(src[j], kind, p)

    return round_directed_f32_range
