"""Shared hypothesis strategies: formats, values of a format, carrier floats, modes."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import fpsim
from fpsim import Format

SMALL_CATALOG = [f for f in fpsim.CATALOG if f.bits <= 16]
DETERMINISTIC_MODES = [m for m in fpsim.MODE_NAMES if m != "stochastic"]


@st.composite
def custom_formats(draw: st.DrawFn) -> Format:
    """Any valid IEEE-style or saturating custom format with E in 2..8 and M in 0..10."""
    e_bits = draw(st.integers(2, 8))
    m_bits = draw(st.integers(0, 10))
    default_bias = 2 ** (e_bits - 1) - 1
    bias = draw(st.integers(max(default_bias - 3, 1 - (2 ** e_bits) // 2), default_bias + 3))
    kind = draw(st.sampled_from(["ieee", "fn", "fnuz", "none"]))
    if kind == "fn" and m_bits == 0:
        kind = "ieee"
    subnormals = draw(st.booleans())
    try:
        return Format(f"E{e_bits}M{m_bits}b{bias}{kind}", e_bits, m_bits, bias=bias,
                      inf=kind == "ieee", nan=kind, subnormals=subnormals)
    except ValueError:
        return fpsim.FP16  # the drawn bias pushed the range outside float32


def formats(custom: bool = True) -> st.SearchStrategy[Format]:
    """A catalog format (or, with custom=True, sometimes a random custom one)."""
    catalog = st.sampled_from(list(fpsim.CATALOG))
    return st.one_of(catalog, custom_formats()) if custom else catalog


def float32s(allow_special: bool = False) -> st.SearchStrategy[float]:
    """Any float32 value (drawn from all bit patterns' worth of magnitudes)."""
    return st.floats(width=32, allow_nan=allow_special, allow_infinity=allow_special)


def finite_values(fmt: Format) -> st.SearchStrategy[float]:
    """Values exactly representable in fmt (rounded draws; magnitudes across its range)."""
    return st.floats(-fmt.max, fmt.max, width=32).map(
        lambda v: float(fpsim.round(np.float32(v), fmt))
    )


def modes(deterministic: bool = False) -> st.SearchStrategy[str]:
    return st.sampled_from(DETERMINISTIC_MODES if deterministic else list(fpsim.MODE_NAMES))


# --- values built from a format's fields, and arrays (emulated arithmetic, monitor) -----------
@st.composite
def representable(draw: st.DrawFn, fmt: Format, specials: bool = False) -> float:
    """A value of fmt made from drawn fields (sign, exponent, mantissa): no rounding involved.

    Exponent field 0 gives zero and the subnormals m * 2^(emin - M) (zero when the format has
    subnormals off); field e >= 1 gives (2^M + m) * 2^(e - bias - M). With specials=True,
    inf and NaN are drawn too where the format has them.
    """
    if specials:
        extra = ([np.inf, -np.inf] if fmt.inf else []) + ([np.nan] if fmt.has_nan else [])
        if extra and draw(st.integers(0, 9)) == 0:
            return draw(st.sampled_from(extra))
    m_bits = fmt.mantissa_bits
    e = draw(st.integers(0, fmt.max_exponent_field))
    m_top = fmt.max_mantissa_field if e == fmt.max_exponent_field else 2**m_bits - 1
    m = draw(st.integers(0, m_top))
    if e == 0:
        v = m * 2.0 ** (fmt.emin - m_bits) if fmt.subnormals else 0.0
    else:
        v = (2**m_bits + m) * 2.0 ** (e - fmt.bias - m_bits)
    negative = draw(st.booleans()) and (v != 0 or fmt.has_negative_zero)
    return -v if negative else v


def representable_arrays(
    fmt: Format, max_size: int = 40, specials: bool = False
) -> st.SearchStrategy[np.ndarray]:
    """1-D float32 arrays of values of fmt (see ``representable``)."""
    return st.lists(representable(fmt, specials), min_size=1, max_size=max_size).map(
        lambda xs: np.array(xs, dtype=np.float32)
    )


def float32_arrays(max_size: int = 60) -> st.SearchStrategy[np.ndarray]:
    """1-D float32 arrays mixing every magnitude with zeros, infs and NaNs."""
    element = st.one_of(
        st.floats(width=32),  # includes inf and NaN
        st.floats(-1e6, 1e6, width=32),
        st.floats(-2.0**-10, 2.0**-10, width=32),
        st.sampled_from([0.0, -0.0, 65504.0, 65520.0, 2.0**-24, 2.0**-25, 448.0, 464.0]),
    )
    return st.lists(element, min_size=0, max_size=max_size).map(
        lambda xs: np.array(xs, dtype=np.float32)
    )
