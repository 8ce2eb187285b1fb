"""The exact reference for accumulator models (fpsim.accumulators): Fractions for every sum,
fpsim.round_scalar (the pure-Python rounding spec) for every rounding, and the telemetry's
events counted as the models define them (``counts``: [additions, swamped terms], or None)."""

from __future__ import annotations

from fractions import Fraction

import fpsim
from fpsim import accumulators as A

Counts = list[int] | None


def ref_round(v: Fraction, fmt, mode) -> Fraction:
    return Fraction(fpsim.round_scalar(v, fmt, str(mode)))


def lost(a: Fraction, b: Fraction, r: Fraction) -> int:
    """1 when a + b rounded to r dropped a non-zero operand whole (a swamped term)."""
    return int((b != 0 and r == a) or (a != 0 and r == b))


def _add(s: Fraction, t: Fraction, fmt, mode, counts: Counts) -> Fraction:
    r = ref_round(s + t, fmt, mode)
    if counts is not None:
        counts[0] += 1
        counts[1] += lost(s, t, r)
    return r


def ref_ieee(terms: list[Fraction], fmt, mode, counts: Counts = None) -> Fraction:
    """s = rnd(x0); s = rnd(s + xk), left to right."""
    if not terms:
        return Fraction(0)
    s = ref_round(terms[0], fmt, mode)
    for t in terms[1:]:
        s = _add(s, t, fmt, mode, counts)
    return s


def ref_pairwise(terms: list[Fraction], fmt, mode, counts: Counts = None) -> Fraction:
    """Adjacent pairs level by level; an odd element out moves up unchanged."""
    level = [ref_round(t, fmt, mode) for t in terms]
    while len(level) > 1:
        pairs = [_add(a, b, fmt, mode, counts) for a, b in zip(level[::2], level[1::2],
                                                               strict=False)]
        level = pairs + level[-1:] if len(level) % 2 else pairs
    return level[0] if level else Fraction(0)


def trunc_to(v: Fraction, unit: Fraction) -> Fraction:
    """v truncated toward zero to a multiple of unit."""
    q = abs(v) // unit
    return q * unit if v >= 0 else -q * unit


def ref_aligned(terms: list[Fraction], m: A.AlignedGroups, counts: Counts = None) -> Fraction:
    """Per group: the running sum and the terms truncated to m.bits bits below the largest
    magnitude's leading bit, added exactly, rounded; a non-zero term truncated to zero is
    swamped."""
    s = Fraction(0)
    for g in range(0, len(terms), m.group):
        group = terms[g:g + m.group]
        if counts is not None:
            counts[0] += len(group)
        big = max(abs(t) for t in [s, *group])
        if big == 0:
            s = ref_round(Fraction(0), m.fmt, m.mode)
            continue
        e = 0  # 2^(e - 1) <= big < 2^e
        while Fraction(2) ** e <= big:
            e += 1
        while Fraction(2) ** (e - 1) > big:
            e -= 1
        unit = Fraction(2) ** (e - m.bits)
        if counts is not None:
            counts[1] += sum(t != 0 and trunc_to(t, unit) == 0 for t in group)
        s = ref_round(trunc_to(s, unit) + sum(trunc_to(t, unit) for t in group), m.fmt, m.mode)
    return s


def ref_inner(terms: list[Fraction], m, counts: Counts = None) -> Fraction:
    if isinstance(m, A.IEEE):
        return ref_ieee(terms, m.fmt, m.mode, counts)
    return ref_aligned(terms, m, counts)


def ref_model(terms: list[Fraction], m, counts: Counts = None) -> Fraction:
    """The model's sum: its inner model, or chunks of it added into the outer accumulator."""
    if not isinstance(m, A.Chunked):
        return ref_inner(terms, m, counts)
    total = None
    for c in range(0, len(terms), m.chunk):
        part = ref_inner(terms[c:c + m.chunk], m.inner, counts)
        total = (ref_round(part, m.outer, m.outer_mode) if total is None
                 else _add(total, part, m.outer, m.outer_mode, counts))
    return total if total is not None else Fraction(0)
