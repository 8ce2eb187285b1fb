"""A table oracle for rounding: enumerate a format's values, then round by neighbours.

Independent of both the kernels' bit tricks and round_scalar's quantum arithmetic: the values
come from decoding every code from its fields (sign, exponent, mantissa), and rounding picks
between the two enclosing values with exact float64 comparisons (float32 values and the
midpoints of float32-representable neighbours are exact in float64). Formats with subnormals
only (flush-to-zero rounds at unbounded precision and is checked against round_scalar instead).
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import numpy as np

from fpsim import Format


def decode(fmt: Format, code: int) -> float:
    """The value of one code, from the fields; NaN for NaN codes."""
    m_bits, e_bits = fmt.mantissa_bits, fmt.exponent_bits
    sign = -1.0 if code >> (m_bits + e_bits) else 1.0
    e = (code >> m_bits) & (2**e_bits - 1)
    m = code & (2**m_bits - 1)
    top = 2**e_bits - 1
    if fmt.nan == "ieee" and e == top:
        return sign * np.inf if m == 0 else np.nan
    if fmt.nan == "fn" and e == top and m == 2**m_bits - 1:
        return np.nan
    if fmt.nan == "fnuz" and code == 1 << (m_bits + e_bits):
        return np.nan
    if e == 0:
        return sign * float(Fraction(m, 2**m_bits) * Fraction(2) ** (1 - fmt.bias))
    return sign * float(Fraction(2**m_bits + m, 2**m_bits) * Fraction(2) ** (e - fmt.bias))


@lru_cache(maxsize=64)
def positive_table(fmt: Format) -> tuple[np.ndarray, np.ndarray]:
    """Sorted non-negative finite values and their mantissa lsb (the 'even' test for ties)."""
    n_pos = 2 ** (fmt.bits - 1)
    vals = np.array([decode(fmt, c) for c in range(n_pos)])
    lsb = np.arange(n_pos) & 1
    keep = np.isfinite(vals)
    vals, lsb = vals[keep], lsb[keep]
    order = np.argsort(vals, kind="stable")
    return vals[order], lsb[order]


def table_round(x: np.ndarray, fmt: Format, mode: str, overflow: str | None = None) -> np.ndarray:
    """Round float32/float64 x to fmt in a deterministic mode, by table look-up (float64 out)."""
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
    mid = (lo + hi) / 2
    if mode == "nearest_even":
        up = (a_c > mid) | ((a_c == mid) & (lsb[lo_i] == 1))
    elif mode == "nearest_away":
        up = a_c >= mid
    elif mode == "toward_zero":
        up = np.zeros_like(exact)
    elif mode == "up":
        up = ~neg
    elif mode == "down":
        up = neg
    elif mode == "odd":
        up = lsb[lo_i] == 0
    else:
        raise ValueError(mode)
    up = up & ~exact & (a <= vals[-1])
    mag = np.where(up, hi, lo)
    beyond = a > vals[-1]  # above the virtual neighbour: truncation lands there or above
    mag = np.where(beyond, vals[-1], mag)
    over = mag > fmt.max
    toward_zero = (mode == "toward_zero") | ((mode == "down") & ~neg) | ((mode == "up") & neg)
    clamp = over & (toward_zero | (policy == "saturate"))
    out = np.where(clamp, fmt.max, mag)
    out = np.where(over & ~clamp, np.inf if policy == "inf" else np.nan, out)
    out = np.where(neg, -out, out)
    if not fmt.has_negative_zero:
        out = np.where(out == 0, 0.0, out)
    # specials
    out = np.where(np.isnan(x), np.nan, out)
    if fmt.inf:
        out = np.where(np.isinf(x), x, out)
    else:
        sat = np.where(neg, -fmt.max, fmt.max)
        out = np.where(np.isinf(x), sat if policy == "saturate" else np.nan, out)
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
