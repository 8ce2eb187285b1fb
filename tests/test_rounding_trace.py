"""rounding.trace: the recorded steps reassemble the input, name where rounding ended, and
round_scalar (its result) agrees with fpsim.round and ml_dtypes on the sign of every NaN.

Oracles: Fraction arithmetic on the input for the steps; fpsim.next_up (bits.py, decoding codes)
for the neighbours; numpy float16 for the fp16 outcomes; ml_dtypes and fpsim.round for NaN signs.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import formats, modes

import fpsim
from fpsim import RoundingMode, round_scalar
from fpsim.rounding import Outcome, Why, trace

MODES = list(RoundingMode)


@given(fmt=formats(custom=True), mode=modes(deterministic=True),
       x=st.floats(allow_nan=False, allow_infinity=False).filter(lambda v: v != 0))
def test_trace_steps_reassemble_the_exact_input(fmt, mode, x):
    t = trace(x, fmt, mode)
    v = abs(Fraction(x))
    assert t.exact == Fraction(x) and t.negative == (x < 0)
    assert 2**t.e <= v < 2 ** (t.e + 1)  # Python's ** on ints and Fractions is exact
    assert 0 <= t.f < 1 and (t.k + t.f) * Fraction(2) ** t.q == v
    bits = (t.f * 2**64).numerator  # the first 64 bits of f, and whether any follow
    assert (t.guard, t.round_bit) == ((bits >> 63) & 1, (bits >> 62) & 1)
    assert t.sticky == int(t.f * 4 % 1 != 0)
    assert (t.why is Why.EXACT) == (t.f == 0) and t.pick == t.k + t.why.up


@given(fmt=formats(custom=False), x=st.floats(allow_nan=False, allow_infinity=False))
def test_trace_neighbours_k_and_k_plus_1_are_consecutive_values_of_the_format(fmt, x):
    t = trace(x, fmt)
    if x == 0 or not fmt.subnormals or t.f == 0 or (t.k + 1) * Fraction(2) ** t.q > fmt.max_exact:
        return
    lo, hi = float(t.k * Fraction(2) ** t.q), float((t.k + 1) * Fraction(2) ** t.q)
    assert float(fpsim.next_up(lo, fmt)) == hi


@pytest.mark.parametrize(("x", "mode", "options", "outcome"), [
    (1.0, "nearest_even", {}, Outcome.IN_RANGE),
    (1e-5, "nearest_even", {}, Outcome.IN_RANGE),
    (65520.0, "nearest_even", {}, Outcome.OVERFLOW),
    (-1e6, "toward_zero", {}, Outcome.CLAMPED),
    (1e6, "nearest_even", {"overflow": "saturate"}, Outcome.OVERFLOW),
    (2.0**-25, "nearest_even", {}, Outcome.UNDERFLOW),
    (3e-5, "nearest_even", {"subnormals": False}, Outcome.FLUSHED),
    (math.nan, "up", {}, Outcome.NAN),
    (-math.inf, "up", {}, Outcome.INFINITY),
    (-0.0, "up", {}, Outcome.ZERO),
])
def test_trace_outcome_names_where_rounding_ended(x, mode, options, outcome):
    t = trace(x, "fp16", mode, **options)
    assert t.outcome is outcome
    with np.errstate(over="ignore"):
        if mode == "nearest_even" and not options:  # numpy's float64 -> float16 is correct
            assert np.array_equal(np.float16(x), np.float16(t.result), equal_nan=True)


def test_trace_records_the_carry_out_of_the_subnormals_and_into_the_next_binade():
    assert trace(2.0**-14 - 2.0**-25, "fp16").carries  # largest subnormal + half: 2^-14
    assert trace(2.0 - 2.0**-12, "fp16").carries  # 1.1111111111|1 -> 2.0
    assert not trace(1 + 3 * 2**-11, "fp16").carries
    assert np.float16(2.0**-14 - 2.0**-25) == 2.0**-14 and np.float16(2.0 - 2.0**-12) == 2.0


def test_stochastic_trace_takes_k_plus_1_with_a_draw_below_f_given_as_fraction_or_float():
    t = trace(1e-5, "fp16", "stochastic", u=0.0)
    assert t.why is Why.DRAW_BELOW_F and t.pick == t.k + 1 == 168
    assert trace(1e-5, "fp16", "stochastic", u=t.f).pick == 167  # u = f exactly: not below f
    assert trace(1e-5, "fp16", "stochastic", u=float(t.f) / 2).pick == 168


# --- item: round_scalar and fpsim.round agree on the sign of NaN (overflow, inf and NaN input)
def nan_sign_cases() -> list[tuple[fpsim.Format, str | None]]:
    cases: list[tuple[fpsim.Format, str | None]] = []
    for fmt in fpsim.CATALOG:
        if not fmt.signed:  # negative input to an unsigned format is NaN: tests/test_p3109.py
            continue
        if fmt.overflow == "nan" or not fmt.inf:
            cases.append((fmt, None))
        if fmt.has_nan and fmt.overflow != "nan" and fmt.inf:
            cases.append((fmt, "nan"))
    return cases


def same_including_nan_sign(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (np.signbit(a) == np.signbit(b)) & ((a == b) | (np.isnan(a) & np.isnan(b)))


@pytest.mark.parametrize("mode", MODES, ids=str)
@pytest.mark.parametrize(("fmt", "overflow"), nan_sign_cases(),
                         ids=lambda c: c.name if isinstance(c, fpsim.Format) else str(c))
def test_round_scalar_and_round_give_nan_the_same_sign(fmt, overflow, mode):
    big = [fmt.max * 3, fmt.max * 4, math.inf, math.nan]  # beyond max whatever the draw
    for dtype in (np.float32, np.float64):
        with np.errstate(over="ignore"):  # float32's own max * 3 is inf
            x = np.array(big + [-v for v in big], dtype=dtype)
        x[-1] = -np.abs(x[-1])  # a NaN with its sign bit set
        got = fpsim.round(x, fmt, mode, rng=1, overflow=overflow)
        want = [round_scalar(v, fmt, mode, overflow=overflow, u=0.5) for v in x]
        assert same_including_nan_sign(got, want).all(), (dtype, x, got, want)
        assert np.isnan(want).any()  # the case is about NaN: NaN input at least
        assert list(np.signbit(want)) == list(np.signbit(x))  # every sign is the input's


def test_overflow_to_nan_keeps_the_sign_as_ml_dtypes_does():
    for x in (-500.0, 500.0, -1e30):
        theirs = np.float32(x).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
        ours = round_scalar(x, "e4m3fn")
        assert np.isnan(theirs) and math.isnan(ours)
        assert np.signbit(theirs) == np.signbit(ours) == (x < 0)


# --- exact inputs: ints, Fractions, Decimals and decimal strings are not rounded to float64 first
def test_exact_inputs_round_once_without_passing_through_float64():
    above_tie = Fraction(1) + Fraction(1, 2**11) + Fraction(1, 2**60)  # just above a fp16 tie
    assert float(above_tie) == 1 + 2**-11  # float64 rounds it onto the tie (then to even: 1.0)
    assert round_scalar(float(above_tie), "fp16") == 1.0
    assert round_scalar(above_tie, "fp16") == 1 + 2**-10  # more than half an ulp: up
    assert round_scalar(Decimal(above_tie.numerator) / Decimal(above_tie.denominator),
                        "fp16") == 1 + 2**-10  # Decimal division is exact here (dyadic)


@pytest.mark.parametrize(("x", "want"), [
    (10**400, math.inf), (-(10**400), -math.inf), ("1e400", math.inf), ("-1e-400", -0.0),
    (Decimal("-0"), -0.0), (0, 0.0), ("nan", math.nan), (" -inf ", -math.inf),
    (Fraction(-1, 10**500), -0.0), (Fraction(1, 3), float(np.float16(1 / 3))),
    ("0.1", float(np.float16(0.1))),
])
def test_exact_inputs_round_by_their_exact_value_even_beyond_float64_range(x, want):
    got = round_scalar(x, "fp16")
    assert (got == want or (math.isnan(got) and math.isnan(want)))
    assert math.copysign(1, got) == math.copysign(1, want)


def test_a_string_that_is_not_a_number_is_a_clear_error():
    with pytest.raises(ValueError, match="x must be a number, got 'abc'"):
        round_scalar("abc", "fp16")
