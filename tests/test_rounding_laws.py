"""Laws of rounding, checked with hypothesis on catalog and random custom formats."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st
from strategies import float32s, formats, modes

import fpsim
from fpsim import round_scalar

SYMMETRIC = ["nearest_even", "nearest_away", "toward_zero", "odd"]


def r(x: float, fmt, mode: str = "nearest_even", **kw) -> float:
    return float(fpsim.round(np.float64(x), fmt, mode, **kw))


def finite_fmt_value(fmt, x: float) -> bool:
    return math.isfinite(x) and abs(x) <= fmt.max


def spacing_at(fmt, v: float) -> float:
    """The format's grid spacing 2^q at magnitude v (subnormal spacing below the normal range)."""
    e = math.frexp(abs(v))[1] - 1 if v else fmt.emin
    return 2.0 ** (max(e, fmt.emin) - fmt.mantissa_bits)


@given(formats(), float32s(), modes(deterministic=True))
def test_round_is_idempotent(fmt, x, mode):
    once = fpsim.round(np.float32(x), fmt, mode)
    twice = fpsim.round(once, fmt, mode)
    assert once.tobytes() == twice.tobytes() or (np.isnan(once) and np.isnan(twice)), (
        f"round({x}) = {once} but rounding that again in {fmt.name}/{mode} gives {twice}")


@given(formats(), float32s(), float32s(), modes(deterministic=True))
def test_round_is_monotone(fmt, x, y, mode):
    lo, hi = sorted([x, y])
    a, b = r(lo, fmt, mode), r(hi, fmt, mode)
    assume(not (math.isnan(a) or math.isnan(b)))  # overflow to NaN leaves the order
    assert a <= b, f"{lo} <= {hi} but round gives {a} > {b} in {fmt.name}/{mode}"


@given(formats(custom=True), float32s(), st.sampled_from(["nearest_even", "nearest_away"]))
def test_nearest_modes_are_within_half_a_spacing(fmt, x, mode):
    assume(fmt.subnormals and abs(x) <= fmt.max)
    err = abs(Fraction(r(x, fmt, mode)) - Fraction(x))  # exact: float64 would round it
    assert err <= Fraction(spacing_at(fmt, x)) / 2, f"|round({x}) - x| = {err} in {fmt.name}/{mode}"


@given(formats(custom=True), float32s(), st.sampled_from(["toward_zero", "up", "down", "odd"]))
def test_directed_modes_are_within_one_spacing(fmt, x, mode):
    assume(fmt.subnormals and abs(x) <= fmt.max)
    err = abs(Fraction(r(x, fmt, mode)) - Fraction(x))
    assert err < Fraction(spacing_at(fmt, x)), f"|round({x}) - x| = {err} in {fmt.name}/{mode}"


@given(formats(custom=True), float32s())
def test_down_is_at_most_x_and_up_at_least_x(fmt, x):
    assume(fmt.subnormals and (abs(x) <= fmt.max or fmt.overflow != "saturate"))
    down, up = r(x, fmt, "down"), r(x, fmt, "up")
    if not math.isnan(down):
        assert down <= x, f"down({x}) = {down} in {fmt.name}"
    if not math.isnan(up):
        assert up >= x, f"up({x}) = {up} in {fmt.name}"
    assert r(x, fmt, "toward_zero") in (down, up) or abs(x) > fmt.max


@given(formats(custom=True), float32s(allow_special=True), st.sampled_from(SYMMETRIC))
def test_symmetric_modes_commute_with_negation(fmt, x, mode):
    a, b = r(-x, fmt, mode), -r(x, fmt, mode)
    if not fmt.has_negative_zero and a == 0:
        assert b == 0
    else:
        assert np.array_equal(np.float64(a), np.float64(b), equal_nan=True) and (
            math.isnan(a) or math.copysign(1, a) == math.copysign(1, b)), (
            f"round(-{x}) = {a} but -round({x}) = {b} in {fmt.name}/{mode}")


@given(formats(custom=True), st.data(), modes(deterministic=True))
def test_power_of_two_scaling_is_exact_without_overflow_or_underflow(fmt, data, mode):
    """round(v * 2^k) == v * 2^k for v in fmt and k keeping v * 2^k in the normal range;
    one binade further down the last mantissa bits fall off and exactness may end."""
    e = data.draw(st.integers(fmt.emin, fmt.emax), label="exponent")
    m = data.draw(st.integers(0, 2**fmt.mantissa_bits - 1), label="mantissa")
    v = (1 + m / 2**fmt.mantissa_bits) * 2.0**e
    assume(v <= fmt.max)
    k = data.draw(st.integers(fmt.emin - e, fmt.emax - e), label="k")
    scaled = v * 2.0**k
    assume(scaled <= fmt.max)
    assert r(scaled, fmt, mode) == scaled, f"{v} * 2^{k} = {scaled} is not exact in {fmt.name}"
    # first k below the range where it stops being exact: where the odd last bit falls off
    if m % 2 == 1 and fmt.subnormals:
        k_first = fmt.emin - e - 1
        assert r(v * 2.0**k_first, fmt, "toward_zero") != v * 2.0**k_first


@given(formats(custom=True), float32s())
def test_round_to_odd_leaves_exact_values_alone_and_sets_the_last_bit_otherwise(fmt, x):
    assume(fmt.subnormals and abs(x) <= fmt.max and fmt.mantissa_bits > 0)
    v = r(x, fmt, "nearest_even")
    assert r(v, fmt, "odd") == v
    got = r(x, fmt, "odd")
    if got != x and got != 0:
        code_lsb = round(abs(got) / spacing_at(fmt, got)) % 2
        assert code_lsb == 1, f"odd({x}) = {got} has an even last bit in {fmt.name}"


@given(formats(custom=True), float32s(), st.integers(0, 2**32))
def test_stochastic_rounding_leaves_exact_values_alone(fmt, x, seed):
    v = r(x, fmt, "nearest_even")
    assume(math.isfinite(v))
    assert r(v, fmt, "stochastic", rng=seed) == v


@given(formats(custom=True), float32s(), st.integers(0, 2**32))
def test_stochastic_rounding_returns_one_of_the_two_neighbours(fmt, x, seed):
    assume(fmt.subnormals and abs(x) < fmt.max)
    got = r(x, fmt, "stochastic", rng=seed)
    assert got in (r(x, fmt, "down"), r(x, fmt, "up"))


def test_stochastic_rounding_is_reproducible_from_a_seed():
    x = np.random.default_rng(0).standard_normal(10_000).astype(np.float32)
    a = fpsim.round(x, "fp16", "stochastic", rng=42)
    b = fpsim.round(x, "fp16", "stochastic", rng=np.random.default_rng(42))
    c = fpsim.round(x, "fp16", "stochastic", rng=43)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


@given(st.sampled_from(["fp16", "bf16", "e4m3fn", "e5m2"]), st.floats(0.01, 0.99),
       st.integers(-3, 3))
def test_stochastic_probability_of_rounding_up_is_the_distance_fraction(name, frac, k):
    fmt = fpsim.get_format(name)
    lo = 2.0**k
    step = spacing_at(fmt, lo)
    x = np.float64(lo + frac * step)
    frac = (x - lo) / step  # the fraction actually represented
    n = 20_000
    got = fpsim.round(np.full(n, x), fmt, "stochastic", rng=7)
    p_up = float(np.mean(got > lo))
    bound = 5 * math.sqrt(frac * (1 - frac) / n) + 1e-12  # five binomial standard deviations
    assert set(np.unique(got)) <= {lo, lo + step}
    assert abs(p_up - frac) <= bound, f"P(up) = {p_up}, expected {frac} +- {bound}"


@given(formats(custom=True), float32s(), modes(deterministic=True))
def test_round_equals_round_scalar_on_drawn_values(fmt, x, mode):
    got = r(x, fmt, mode)
    want = round_scalar(x, fmt, mode)
    assert np.array_equal(np.float64(got), np.float64(want), equal_nan=True) and (
        math.isnan(got) or math.copysign(1, got) == math.copysign(1, want)), (
        f"round({x}) = {got}, round_scalar = {want} in {fmt.name}/{mode}")
