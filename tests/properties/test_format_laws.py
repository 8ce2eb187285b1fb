"""Laws of the formats themselves: power-of-two scaling, bit round trips, ordering, nearness.

The same families of laws are checked on random inputs in tests/test_rounding_laws.py and
tests/test_bits.py; here they are stated for values drawn *from each format's own grid*
(``fpsim.testing.values_of``) and the edge where scaling stops being exact is located.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st

import fpsim
from fpsim.testing import catalog_formats, formats, modes, values_of

from ._law import broke


def _format_and_value(custom: bool = True, specials: bool = False):
    return formats(custom=custom).flatmap(
        lambda f: st.tuples(st.just(f), values_of(f, specials=specials)))


def _exact_in(fmt: fpsim.Format, v: Fraction) -> bool:
    """True if the exact number v is a finite value of fmt (from the format's fields alone)."""
    if v == 0:
        return True
    a = abs(v)
    if a > fmt.max_exact:
        return False
    quantum = Fraction(2) ** (fmt.emin - fmt.mantissa_bits)  # the smallest subnormal
    if a < Fraction(2) ** fmt.emin:
        return fmt.subnormals and (a / quantum).denominator == 1
    e = math.floor(math.log2(a))  # exact for these magnitudes: corrected below
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    return (a / Fraction(2) ** (e - fmt.mantissa_bits)).denominator == 1


@given(_format_and_value(), modes(deterministic=True))
def test_power_of_two_scaling_is_exact_until_the_result_leaves_the_formats_range(fv, mode):
    """round(x * 2^k) == x * 2^k for every k that keeps x * 2^k on the format's grid, and the
    first k (up and down) where it stops being exact is where the range says: up, the first k
    with |x| * 2^k > max; down, the first k where x * 2^k is no longer a multiple of the
    smallest subnormal (or, with subnormals off, falls below the smallest normal)."""
    fmt, x = fv
    assume(x != 0)
    xf = Fraction(x)
    # predicted edges, from the format's fields only
    k_up = 0
    while abs(xf) * 2**k_up <= fmt.max_exact:
        k_up += 1
    k_down = 0
    while _exact_in(fmt, xf * Fraction(2) ** (k_down - 1)):
        k_down -= 1
    k_down -= 1  # the first inexact k below
    ks = np.arange(k_down - 2, k_up + 3)
    scaled = np.array([x * 2.0 ** int(k) for k in ks])  # exact in float64
    got = fpsim.round(scaled, fmt, mode)
    exact = got == scaled
    first_up = next(int(k) for k, ok in zip(ks, exact, strict=True) if k >= 0 and not ok)
    first_down = next(int(k) for k, ok in zip(ks[::-1], exact[::-1], strict=True)
                      if k <= 0 and not ok)
    inside = (ks > k_down) & (ks < k_up)
    assert exact[inside].all(), broke(
        "power-of-two scaling is exact inside the range", format=fmt, mode=mode, x=x,
        k=int(ks[inside][~exact[inside]][0]), got=got[inside][~exact[inside]][0])
    assert (first_up, first_down) == (k_up, k_down), broke(
        "power-of-two scaling stops being exact exactly where the range ends", format=fmt,
        mode=mode, x=x, first_inexact_k_up=first_up, predicted_up=k_up,
        first_inexact_k_down=first_down, predicted_down=k_down, max=fmt.max,
        smallest_normal=fmt.smallest_normal, smallest_subnormal=fmt.smallest_subnormal)


@given(catalog_formats().flatmap(lambda f: st.tuples(st.just(f), values_of(f, specials=True))))
def test_from_bits_of_to_bits_is_the_identity_on_every_catalog_format(fv):
    """from_bits(to_bits(x)) == x bit for bit (the sign of zero included; NaN stays NaN)."""
    fmt, x = fv
    code = fpsim.to_bits(np.float32(x), fmt)
    back = fpsim.from_bits(code, fmt)
    same = (np.isnan(back) and np.isnan(x)) or np.float32(x).tobytes() == back.tobytes()
    assert same, broke("from_bits(to_bits(x)) == x", format=fmt, x=x, code=int(code),
                       back=float(back))


@st.composite
def _close_pair(draw: st.DrawFn):
    """A catalog format and two nearby reals a <= b around a value of it (ties included)."""
    fmt = draw(catalog_formats(max_bits=16))
    v = draw(values_of(fmt))
    step = float(fpsim.ulp(np.float64(v), fmt))
    quarters = st.integers(-6, 6).map(lambda q: q / 4)  # hits midpoints and the values
    fractions_ = st.one_of(quarters, st.floats(-1.5, 1.5))
    a = v + draw(fractions_) * step
    b = a + abs(draw(fractions_)) * step
    return fmt, a, b


@given(_close_pair(), modes(deterministic=True))
def test_round_is_monotone_on_every_catalog_format(pair, mode):
    """a <= b implies round(a) <= round(b), for neighbours of the format's own values."""
    fmt, a, b = pair
    ra, rb = (float(fpsim.round(np.float64(v), fmt, mode)) for v in (a, b))
    assume(not (math.isnan(ra) or math.isnan(rb)))  # beyond max into NaN: no order
    assert ra <= rb, broke("round is monotone", format=fmt, mode=mode, a=a, b=b,
                           round_a=ra, round_b=rb)


@given(_close_pair())
def test_round_to_nearest_is_within_half_an_ulp_and_no_value_is_nearer(pair):
    """|round(x) - x| <= ulp(round(x)) / 2 (exactly), and neither neighbour of round(x) in the
    format is nearer to x, for x within the format's finite range."""
    fmt, x, _ = pair
    assume(abs(x) <= fmt.max)
    r = float(fpsim.round(np.float64(x), fmt))
    err = abs(Fraction(r) - Fraction(x))
    half_ulp = Fraction(float(fpsim.ulp(np.float64(r), fmt))) / 2
    assert err <= half_ulp, broke("round to nearest is within half an ulp", format=fmt, x=x,
                                  rounded=r, error=float(err), half_ulp=float(half_ulp))
    for n in (fpsim.next_up(np.float64(r), fmt), fpsim.next_down(np.float64(r), fmt)):
        if np.isfinite(n):
            assert abs(Fraction(float(n)) - Fraction(x)) >= err, broke(
                "no value of the format is nearer than round(x)", format=fmt, x=x, rounded=r,
                nearer=float(n))
