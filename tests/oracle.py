"""A table oracle for rounding: enumerate a format's values, then round by neighbours.

Independent of both the kernels' bit tricks and round_scalar's quantum arithmetic: the values
come from decoding every code from its fields (sign, exponent, mantissa), and rounding picks
between the two enclosing values with exact float64 comparisons (float32 values and the
midpoints of float32-representable neighbours are exact in float64). Formats with subnormals
only (flush-to-zero rounds at unbounded precision and is checked against round_scalar instead).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

from fpsim import Format, RoundingMode


def decode(fmt: Format, code: int) -> float:
    """The value of one code, from the fields; NaN for NaN codes."""
    m_bits, e_bits = fmt.mantissa_bits, fmt.exponent_bits
    sign = -1.0 if fmt.signed and code >> (m_bits + e_bits) else 1.0
    e = (code >> m_bits) & (2**e_bits - 1)
    m = code & (2**m_bits - 1)
    top = 2**e_bits - 1
    magnitude = code & (2 ** (m_bits + e_bits) - 1)
    if fmt.nan == "ieee" and e == top:
        return sign * np.inf if m == 0 else np.nan
    if fmt.nan == "fn" and e == top and m == 2**m_bits - 1:
        return np.nan
    if fmt.nan == "fnuz" and code == 1 << (m_bits + e_bits):
        return np.nan
    # P3109 extended domain: inf is the largest magnitude code that is not NaN
    if fmt.inf and fmt.nan == "fn" and magnitude == 2 ** (m_bits + e_bits) - 2:
        return sign * np.inf
    if fmt.inf and fmt.nan in ("fnuz", "none") and magnitude == 2 ** (m_bits + e_bits) - 1:
        return sign * np.inf
    if e == 0 and not fmt.zero:  # exponent-only scale format: field 0 is 2^-bias
        return float(Fraction(2) ** -fmt.bias)
    if e == 0:
        return sign * float(Fraction(m, 2**m_bits) * Fraction(2) ** (1 - fmt.bias))
    return sign * float(Fraction(2**m_bits + m, 2**m_bits) * Fraction(2) ** (e - fmt.bias))


@lru_cache(maxsize=64)
def positive_table(fmt: Format) -> tuple[np.ndarray, np.ndarray]:
    """Sorted non-negative finite values and their mantissa lsb (the 'even' test for ties)."""
    n_pos = 2 ** (fmt.bits - 1) if fmt.signed else 2**fmt.bits
    vals = np.array([decode(fmt, c) for c in range(n_pos)])
    lsb = np.arange(n_pos) & 1
    keep = np.isfinite(vals)
    vals, lsb = vals[keep], lsb[keep]
    order = np.argsort(vals, kind="stable")
    return vals[order], lsb[order]


class Between(NamedTuple):
    """Where |x| lies: lo <= a < hi, consecutive (non-negative) values, with lo's mantissa lsb."""

    a: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    lo_odd: np.ndarray
    neg: np.ndarray
    u: np.ndarray | None


def _stochastic_up(b: Between) -> np.ndarray:
    if b.u is None:
        raise ValueError("the table oracle needs the draws u for stochastic rounding")
    # a - lo is exact (Sterbenz, or lo == 0) and hi - lo a power of two: the fraction is exact
    return b.u < (b.a - b.lo) / (b.hi - b.lo)


# each mode: (takes the upper neighbour hi?, rounds toward zero for this sign?) on inexact input
RULES: dict[RoundingMode, tuple[Callable[[Between], np.ndarray], Callable[[np.ndarray], Any]]] = {
    RoundingMode.NEAREST_EVEN: (
        lambda b: (b.a > (b.lo + b.hi) / 2) | ((b.a == (b.lo + b.hi) / 2) & b.lo_odd),
        lambda neg: False),
    RoundingMode.NEAREST_AWAY: (lambda b: b.a >= (b.lo + b.hi) / 2, lambda neg: False),
    RoundingMode.TOWARD_ZERO: (lambda b: np.zeros_like(b.neg), lambda neg: True),
    RoundingMode.UP: (lambda b: ~b.neg, lambda neg: neg),
    RoundingMode.DOWN: (lambda b: b.neg, lambda neg: ~neg),
    RoundingMode.ODD: (lambda b: ~b.lo_odd, lambda neg: False),
    RoundingMode.STOCHASTIC: (_stochastic_up, lambda neg: False),
}


def table_round(
    x: np.ndarray, fmt: Format, mode: str, overflow: str | None = None,
    u: np.ndarray | None = None,
) -> np.ndarray:
    """Round float32/float64 x to fmt by table look-up (float64 out); stochastic rounding takes
    the draws ``u`` (one per element, in [0, 1)) and goes up where ``u < f``."""
    takes_hi, toward_zero_for = RULES[RoundingMode(mode)]
    vals, lsb = positive_table(fmt)
    policy = overflow or fmt.overflow
    ulp_max = 2.0 ** (fmt.emax - fmt.mantissa_bits)
    # the grid continues above max: a virtual neighbour with the opposite parity
    vals = np.append(vals, vals[-1] + ulp_max)
    lsb = np.append(lsb, 1 - lsb[-1])
    x = np.asarray(x, dtype=np.float64)
    neg = np.signbit(x)
    a = np.abs(x)
    a_c = np.where(np.isnan(a), 0.0, np.minimum(a, vals[-1]))  # NaN: patched in at the end
    hi_i = np.searchsorted(vals, a_c, side="left")
    exact = vals[np.minimum(hi_i, len(vals) - 1)] == a_c
    lo_i = np.where(exact, hi_i, hi_i - 1)
    lo, hi = vals[lo_i], vals[hi_i]
    draws = None if u is None else np.broadcast_to(np.asarray(u, np.float64), x.shape)
    with np.errstate(invalid="ignore"):  # exact points (lo == hi) are masked out below
        up = takes_hi(Between(a_c, lo, hi, lsb[lo_i] == 1, neg, draws))
    up = up & ~exact & (a <= vals[-1])
    mag = np.where(up, hi, lo)
    beyond = a > vals[-1]  # above the virtual neighbour: truncation lands there or above
    mag = np.where(beyond, vals[-1], mag)
    over = mag > fmt.max
    clamp = over & (toward_zero_for(neg) | (policy == "saturate"))
    out = np.where(clamp, fmt.max, mag)
    out = np.where(over & ~clamp, np.inf if policy == "inf" else np.nan, out)
    out = np.where(neg, -out, out)
    if not fmt.has_negative_zero:
        out = np.where(out == 0, 0.0, out)
    # specials (NaN keeps its sign, as fpsim.round and ml_dtypes keep it in the carrier)
    out = np.where(np.isnan(x), x, out)
    if fmt.inf:
        out = np.where(np.isinf(x), x, out)
    else:
        sat = np.where(neg, -fmt.max, fmt.max)
        out = np.where(np.isinf(x), sat if policy == "saturate" else np.copysign(np.nan, x), out)
    if not fmt.signed:  # a negative number lies outside an unsigned format
        out = np.where(neg & (x != 0), np.nan if fmt.has_nan else 0.0, out)
    return out


def sample_points(fmt: Format, dtype: type = np.float32) -> np.ndarray:
    """Every finite value, every midpoint between neighbours and one carrier ulp either side,
    both signs, +-0, +-inf, NaN, and values beyond max (the overflow threshold and above)."""
    vals, _ = positive_table(fmt)
    ulp_max = 2.0 ** (fmt.emax - fmt.mantissa_bits)
    grid = np.append(vals, [vals[-1] + ulp_max, vals[-1] + 2 * ulp_max])
    with np.errstate(over="ignore"):  # bf16/fp32-range grids end beyond float32: inf
        mids = ((grid[:-1] + grid[1:]) / 2).astype(dtype)
        below = np.nextafter(mids, dtype(0))
        above = np.nextafter(mids, dtype(np.inf))
        big = np.array([fmt.max * 4, 3.0e38 if dtype == np.float32 else 1e300], dtype=dtype)
        pos = np.concatenate([vals.astype(dtype), mids, below, above,
                              grid[-2:].astype(dtype), big])
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype=dtype)
    return np.concatenate([pos, -pos, specials]).astype(dtype)
