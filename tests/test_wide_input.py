"""Input wider than float64 (int64/uint64 beyond 2^53, Python ints, Fractions, np.longdouble) is
rounded once, exactly: checked against the specification's rounding steps applied to the exact
rational value (round_scalar takes a Fraction exactly)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import DETERMINISTIC_MODES, formats

import fpsim
from fpsim import rounding
from fpsim._validate import fraction_to_odd

WIDE_FORMATS = [fpsim.FP32, fpsim.BF16, fpsim.TF32, fpsim.FP16, fpsim.E4M3FN,
                fpsim.FP32.replace(name="fp32_ftz", subnormals=False)]


def exact_round(v: Fraction, fmt: fpsim.Format, mode: str) -> float:
    """The specification on the exact rational ``v``: round_scalar takes a Fraction at its
    exact value (no float conversion)."""
    return rounding.round_scalar(v, fmt, mode)


def test_the_issue_example_rounds_once():
    assert int(fpsim.round(np.int64(2**62 + 2**38 + 1), "fp32")) == 2**62 + 2**39


def _points_near(base: int, fmt: fpsim.Format) -> list[int]:
    """Integers at and around the grid points and midpoints of fmt near ``base``, including
    the float64 neighbours that double rounding through float64 would land on."""
    q = max(base.bit_length() - 1 - fmt.mantissa_bits, 0)
    f64 = 2 ** max(base.bit_length() - 53, 0)  # float64's spacing there
    offsets = {0, 1, 2, f64 // 2, f64 // 2 + 1, f64, f64 + 1}
    points = set()
    for k in range((base >> q) - 1, (base >> q) + 2):
        for anchor in (k << q, (k << q) + (1 << q) // 2):
            for d in offsets:
                points |= {anchor + d, anchor - d}
    return sorted(p for p in points if p > 0)


BASES = [2**53 + 1, 2**62, 3 * 2**60 + 5, 2**63 - 1, 2**64 - 1]


def _as_dtypes(points: list[int]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {"object": np.array(points + [-p for p in points], dtype=object)}
    small = [p for p in points if p < 2**63]
    out["int64"] = np.array(small + [-p for p in small] + [-(2**63)], dtype=np.int64)
    fits = [p for p in points if p < 2**64]
    out["uint64"] = np.array(fits, dtype=np.uint64)
    out["longdouble"] = np.concatenate([out["uint64"].astype(np.longdouble),
                                        -out["uint64"].astype(np.longdouble)])
    return out


def _exact(x: object) -> Fraction:
    if isinstance(x, np.floating):
        return Fraction(*x.as_integer_ratio())
    return Fraction(int(x))  # type: ignore[call-overload]


@pytest.mark.parametrize("fmt", WIDE_FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize("mode", DETERMINISTIC_MODES)
@pytest.mark.parametrize("base", BASES)
def test_wide_integers_near_ties_round_once_in_every_deterministic_mode(base, mode, fmt):
    for dtype, arr in _as_dtypes(_points_near(base, fmt)).items():
        got = fpsim.round(arr, fmt, mode)
        assert got.dtype == np.float64
        for value, r in zip(arr.tolist() if dtype != "longdouble" else arr, got, strict=True):
            want = exact_round(_exact(value), fmt, mode)
            assert r == want or (np.isnan(r) and np.isnan(want)), (dtype, value, r, want)


@given(st.integers(-(2**63), 2**63 - 1), formats(), st.sampled_from(DETERMINISTIC_MODES))
def test_any_int64_rounds_once(v, fmt, mode):
    got = fpsim.round(np.int64(v), fmt, mode)
    want = exact_round(Fraction(v), fmt, mode)
    assert got == want or (np.isnan(got) and np.isnan(want))


@given(st.integers(0, 2**64 - 1), st.sampled_from(DETERMINISTIC_MODES))
def test_any_uint64_and_its_longdouble_round_once(v, mode):
    want = exact_round(Fraction(v), fpsim.BF16, mode)
    assert fpsim.round(np.uint64(v), fpsim.BF16, mode) == want
    assert fpsim.round(np.uint64(v).astype(np.longdouble), fpsim.BF16, mode) == want


@pytest.mark.parametrize("mode", DETERMINISTIC_MODES)
def test_longdouble_fractions_near_fp32_ties_round_once(mode):
    one, tiny = np.longdouble(1), np.longdouble(2) ** -60
    tie = one + np.longdouble(2) ** -24  # midpoint of 1 and its fp32 successor
    values = [tie, tie + tiny, tie - tiny, one + tiny, one - tiny,
              np.longdouble(2) ** -149 * np.longdouble(1.5) + tiny * 2**-100]
    arr = np.array(values + [-v for v in values], dtype=np.longdouble)
    got = fpsim.round(arr, "fp32", mode)
    for v, r in zip(arr, got, strict=True):
        assert r == exact_round(_exact(v), fpsim.FP32, mode), (v, mode)


@pytest.mark.parametrize("mode", DETERMINISTIC_MODES)
def test_longdouble_beyond_float64s_range_rounds_as_its_exact_value(mode):
    huge = np.longdouble(2) ** 2000 * np.longdouble(1.25)
    tiny = np.longdouble(2) ** -2000 * np.longdouble(1.25)
    arr = np.array([huge, -huge, tiny, -tiny], dtype=np.longdouble)
    got = fpsim.round(arr, "fp16", mode)
    for v, r in zip(arr, got, strict=True):
        want = exact_round(_exact(v), fpsim.FP16, mode)
        assert r == want and math.copysign(1, r) == math.copysign(1, want), (v, mode, r)


def test_python_ints_beyond_uint64_and_fractions_in_object_arrays_round_once():
    values = [2**70 + 2**46 + 1, -(2**100) - 1, Fraction(1, 3), Fraction(2**24 + 1, 2**25)]
    got = fpsim.round(np.array(values, dtype=object), "fp32", "nearest_even")
    assert got.tolist() == [exact_round(Fraction(v), fpsim.FP32, "nearest_even") for v in values]
    assert got[0] == 2.0**70 + 2.0**47


def test_stochastic_rounding_of_wide_integers_gives_one_of_the_two_neighbours():
    v = np.array([2**62 + 2**38 + 1] * 200 + [2**62], dtype=np.int64)
    got = fpsim.round(v, "fp32", "stochastic", rng=1)
    down = exact_round(Fraction(2**62 + 2**38 + 1), fpsim.FP32, "down")
    up = exact_round(Fraction(2**62 + 2**38 + 1), fpsim.FP32, "up")
    assert set(got[:-1].tolist()) == {down, up}  # p(up) is about 1/2
    assert got[-1] == 2.0**62  # exact values never move


@given(st.fractions(), st.integers(-1100, 1100))
def test_round_to_odd_into_float64_lies_between_the_float64_neighbours_and_marks_inexact(f, e):
    v = f * Fraction(2) ** e
    r = fraction_to_odd(v)
    if Fraction(r) == v:
        return
    assert int(np.float64(r).view(np.int64)) & 1 == 1  # inexact: last bit set
    if abs(v) > Fraction(np.finfo(np.float64).max):
        assert abs(r) == np.finfo(np.float64).max and (r < 0) == (v < 0)
        return
    other = float(np.nextafter(r, np.inf if v > r else -np.inf))
    lo, hi = sorted((Fraction(r), Fraction(other)))
    assert lo < v < hi


def test_a_non_numeric_object_array_names_its_bad_element():
    with pytest.raises(TypeError, match=r"x must be numeric .* it holds 'a'"):
        fpsim.round(np.array([1, "a"], dtype=object), "fp16")


def test_object_arrays_keep_nan_inf_and_numpy_scalars():
    arr = np.array([float("nan"), -np.inf, np.uint64(2**64 - 1), np.longdouble(1) / 3, True],
                   dtype=object)
    got = fpsim.round(arr, "fp32", "toward_zero")
    assert np.isnan(got[0]) and got[1] == -np.inf and got[4] == 1.0
    assert got[2] == exact_round(Fraction(2**64 - 1), fpsim.FP32, "toward_zero")
    assert got[3] == exact_round(_exact(np.longdouble(1) / 3), fpsim.FP32, "toward_zero")
