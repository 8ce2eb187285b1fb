"""explain(): the text of known cases line by line, and its result always equal to fpsim.round.

Oracles: numpy float16 and ml_dtypes conversions (results, neighbours, bit patterns), Fraction
arithmetic for errors, and fpsim.round for the result of every explanation.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from helpers import all_same as same
from hypothesis import given
from hypothesis import strategies as st
from oracle import sample_points
from strategies import formats, modes

import fpsim
from fpsim import Format
from fpsim.explain import explain, explanation

DETERMINISTIC = [m for m in fpsim.MODE_NAMES if m != "stochastic"]


def line(text: str, label: str) -> str:
    """The one line of an explanation that starts with ``label``."""
    found = [ln for ln in text.splitlines() if ln.startswith(label)]
    assert len(found) == 1, (label, text)
    return found[0]


def fp16_bits(v: float) -> str:
    code = int(np.float16(v).view(np.uint16))
    s = f"{code:016b}"
    return f"{s[0]} {s[1:6]} {s[6:]}"


def test_explain_1e5_in_fp16_shows_exact_input_neighbours_grs_bits_and_errors():
    text = explain(1e-5, "fp16")
    result = np.float16(1e-5)  # numpy's float64 -> float16 is correctly rounded
    lower = np.nextafter(result, np.float16(0))
    assert float(result) > 1e-5 > float(lower)
    assert text.splitlines()[0] == (
        "1e-05 -> float16 (S|EEEEE|MMMMMMMMMM, bias 15), rounding nearest_even"
    )
    assert f"(exact decimal {Decimal(1e-5)})" in line(text, "input:")
    assert f"= {(1e-5).hex()}" in text
    assert line(text, "neighbours:") == (
        f"neighbours: {float(lower)!r} [{fp16_bits(lower)}] < x < "
        f"{float(result)!r} [{fp16_bits(result)}]"
    )
    # 1e-5 / 2^-24 = 167.77216... = 10100111.11000101...: guard 1, round 1, sticky 1
    assert line(text, "bits:").endswith("kept k = 10100111 (= 167), guard 1, round 1, sticky 1")
    assert line(text, "decision:") == (
        "decision:   guard 1, round/sticky not all 0: more than half an ulp -> "
        "k + 1 = 168 (away from zero)"
    )
    assert line(text, "result:") == f"result:     {float(result)!r}"
    assert line(text, "  bits:") == f"  bits:     {fp16_bits(result)} (0x00a8)"
    assert line(text, "  value:") == (
        "  value:    +1 × 2^-14 × 0.1640625 (significand 0.0010101000 in binary)"
    )
    assert 0.1640625 * 2.0**-14 == result
    assert line(text, "  class:") == "  class:    subnormal"
    err = abs(Fraction(float(result)) - Fraction(1e-5))
    assert line(text, "error:") == (
        f"error:      absolute {float(err):.6g}, relative {float(err / Fraction(1e-5)):.6g}, "
        f"{float(err * 2**24):.6g} ulp (ulp = 2^-24 at x)"
    )


def test_explain_65520_in_fp16_overflows_at_max_plus_half_an_ulp():
    text = explain(65520.0, "fp16")
    with np.errstate(over="ignore"):
        assert np.float16(65520.0) == np.inf and np.float16(65519.99) == 65504.0
    assert line(text, "overflow:") == (
        "overflow:   65520 is at least max + ulp/2 = 65504 + 32/2 = 65520 -> overflows to inf "
        "(overflow policy 'inf')"
    )
    assert line(text, "decision:") == (
        "decision:   tie (guard 1, round 0, sticky 0), kept significand 2047 is odd -> "
        "k + 1 = 2048 (away from zero, to even)"
    )
    assert line(text, "result:") == "result:     inf"
    assert line(text, "  bits:") == f"  bits:     {fp16_bits(np.inf)} (0x7c00)"


@pytest.mark.parametrize(
    ("x", "parity", "decision_end", "result"),
    [(1 + 2**-11, "1024 is even", "keep k = 1024 (toward zero)", "1"),
     (1 + 3 * 2**-11, "1025 is odd", "k + 1 = 1026 (away from zero, to even)", "1.001953125")],
)
def test_explain_a_tie_goes_to_the_even_significand(x, parity, decision_end, result):
    text = explain(x, "fp16")
    assert line(text, "decision:") == (
        f"decision:   tie (guard 1, round 0, sticky 0), kept significand {parity} -> "
        f"{decision_end}"
    )
    assert line(text, "result:") == f"result:     {result}"
    assert np.float16(x) == float(result)


def test_explain_half_the_smallest_subnormal_underflows_to_zero():
    text = explain(2.0**-25, "fp16")
    assert np.float16(2.0**-25) == 0
    assert line(text, "underflow:") == (
        "underflow:  2.9802322387695312e-08 is below the smallest subnormal "
        "5.960464477539063e-08 and rounds to zero -> 0"
    )
    assert line(text, "result:") == "result:     0"
    assert line(text, "  class:") == "  class:    zero"


def test_explain_negative_underflow_keeps_the_sign_except_in_fnuz():
    assert line(explain(-2.0**-30, "fp16"), "result:") == "result:     -0"
    text = explain(-2.0**-30, "e4m3fnuz")
    assert line(text, "result:") == "result:     0"
    assert "(float8_e4m3fnuz has no -0)" in line(text, "underflow:")


def test_explain_the_largest_subnormal_carries_into_the_smallest_normal():
    x = 2.0**-14 - 2.0**-25  # halfway between the largest subnormal and 2^-14
    text = explain(x, "fp16")
    assert np.float16(x) == 2.0**-14
    assert line(text, "carry:") == (
        "carry:      k + 1 = 1024 is a power of two: the significand carries out of the "
        "subnormals into the smallest normal, 6.103515625e-05"
    )
    assert line(text, "  class:") == "  class:    normal"


def test_explain_464_in_e4m3fn_ties_to_the_even_max_and_465_overflows_to_nan():
    e4m3fn = ml_dtypes.float8_e4m3fn
    assert float(np.float32(464).astype(e4m3fn)) == 448.0
    assert np.isnan(float(np.float32(465).astype(e4m3fn)))
    text = explain(464.0, "e4m3fn")
    assert line(text, "neighbours:") == (
        "neighbours: 448 [0 1111 110] < x < 480 (k + 1: beyond max = 448, not in float8_e4m3fn)"
    )
    assert line(text, "decision:") == (
        "decision:   tie (guard 1, round 0, sticky 0), kept significand 14 is even -> "
        "keep k = 14 (toward zero)"
    )
    assert line(text, "result:") == "result:     448"
    text = explain(465.0, "e4m3fn")
    assert line(text, "overflow:") == (
        "overflow:   465 is at least max + ulp/2 = 448 + 32/2 = 464 -> becomes NaN "
        "(overflow policy 'nan': float8_e4m3fn has no inf)"
    )
    assert line(text, "  bits:") == "  bits:     0 1111 111 (0x7f)"


def test_explain_directed_rounding_clamps_to_max_instead_of_overflowing():
    text = explain(-1e6, "fp16", "toward_zero")
    assert line(text, "overflow:") == (
        "overflow:   |x| = 1000000 rounds past max = 65504, but toward_zero rounds toward zero "
        "here -> clamps to -65504"
    )
    assert line(text, "result:") == "result:     -65504"


def test_explain_nan_stays_nan_with_the_format_nan_code():
    text = explain(float("nan"), "fp16")
    assert line(text, "decision:") == "decision:   NaN stays NaN"
    assert line(text, "  bits:") == f"  bits:     {fp16_bits(np.nan)} (0x7e00)"
    text = explain(float("nan"), "e2m1fn")
    assert line(text, "  bits:") == "  bits:     none (float4_e2m1fn has no NaN code)"


def test_explain_inf_in_a_format_without_inf_follows_the_overflow_policy():
    assert line(explain(float("-inf"), "e4m3fn"), "decision:") == (
        "decision:   float8_e4m3fn has no inf: overflow policy 'nan' -> NaN"
    )
    assert line(explain(float("inf"), "e2m1fn"), "result:") == "result:     6"


def test_explain_an_exact_value_needs_no_rounding():
    text = explain(1.0, "fp16")
    assert line(text, "decision:") == (
        "decision:   exact: guard, round and sticky are all 0 -> no rounding"
    )
    assert line(text, "error:") == "error:      0 (exact)"


def test_explain_stochastic_shows_both_outcomes_with_their_probabilities():
    ex = explanation(1e-5, "fp16", "stochastic")
    lo, hi = 167 * 2.0**-24, 168 * 2.0**-24
    assert ex.results == (lo, hi)
    f = float(Fraction(1e-5) * 2**24 - 167)
    assert ex.probabilities == pytest.approx((1 - f, f), abs=1e-15)
    drawn = {float(fpsim.round(1e-5, "fp16", "stochastic", rng=seed)) for seed in range(64)}
    assert drawn == {lo, hi}


CASES = [fpsim.FP16, fpsim.BF16, fpsim.E4M3FN, fpsim.E5M2FNUZ, fpsim.E2M1FN,
         Format("fp16_ftz", 5, 10, subnormals=False), Format("e4m0", 4, 0)]


@pytest.mark.parametrize("fmt", CASES, ids=lambda f: f.name)
def test_explanation_result_equals_fpsim_round_in_every_mode(fmt):
    rng = np.random.default_rng(6)
    pts = sample_points(fmt, np.float64) if fmt.subnormals else sample_points(fpsim.FP16)
    pts = np.concatenate([rng.choice(pts, min(150, pts.size), replace=False), pts[-5:]])
    for mode in DETERMINISTIC:
        expected = fpsim.round(pts, fmt, mode)
        for x, want in zip(pts, expected, strict=True):
            got = explanation(float(x), fmt, mode).result
            assert same(got, want), (float(x), mode, got, want)


def test_explanation_follows_subnormal_and_overflow_overrides():
    ex = explanation(3e-5, "fp16", subnormals=False)
    assert ex.result == float(fpsim.round(3e-5, "fp16", subnormals=False)) == 0.0
    assert "subnormals are off" in line(str(ex), "underflow:")
    ex = explanation(1e6, "fp16", overflow="saturate")
    assert ex.result == 65504.0 and "saturates to 65504" in line(str(ex), "overflow:")


def test_explain_rejects_unknown_formats_modes_and_non_numbers():
    with pytest.raises(ValueError, match="unknown format 'fp99'; formats: .*float16"):
        explain(1.0, "fp99")
    with pytest.raises(ValueError, match="unknown rounding mode 'sideways'; known modes: "
                                         "nearest_even"):
        explain(1.0, "fp16", "sideways")
    with pytest.raises(TypeError, match="x must be a real number, got '1e-5'"):
        explain("1e-5", "fp16")


@given(fmt=formats(custom=True), mode=modes(deterministic=True),
       x=st.one_of(st.floats(), st.floats(-1e5, 1e5), st.floats(-1e-3, 1e-3)))
def test_explanation_result_equals_round_scalar_for_any_float64_and_format(fmt, mode, x):
    # the specification; fpsim.round equals it (tests/test_rounding_*), and is compared with
    # explanation directly above for catalog, flush-to-zero and M = 0 formats
    assert same(explanation(x, fmt, mode).result, fpsim.round_scalar(x, fmt, mode))


def test_explain_states_the_mode_rule_in_one_line_from_the_spec_table():
    from fpsim.rounding import MODE_RULES
    text = explain(1e-5, "fp16", "odd")
    assert line(text, "rule:") == f"rule:       odd: {MODE_RULES[fpsim.RoundingMode.ODD].math}"
    assert "k if k is odd, else k + 1" in line(text, "rule:")


def test_explain_negative_overflow_to_nan_shows_the_negative_nan_code_as_ml_dtypes():
    e4m3fn = ml_dtypes.float8_e4m3fn
    code = int(np.float32(-465).astype(e4m3fn).view(np.uint8))
    assert code == 0xFF
    text = explain(-465.0, "e4m3fn")
    assert line(text, "  bits:") == f"  bits:     1 1111 111 (0x{code:02x})"
    assert np.signbit(explanation(-465.0, "e4m3fn").result)


def test_explain_returns_text_that_a_repl_shows_as_lines_and_that_equals_the_string():
    text = fpsim.explain(0.1, "fp16")
    plain = str(explanation(0.1, "fp16"))
    assert text == plain and isinstance(text, str) and hash(text) == hash(plain)
    assert repr(text) == plain and "\\n" not in repr(text)  # no escaped newlines
    assert "\n" in repr(text) and repr(text).startswith("0.1 -> float16")
    assert type(text.upper()) is str and text.splitlines() == plain.splitlines()


def test_explain_text_is_shown_as_lines_by_ipython():
    pretty = pytest.importorskip("IPython.lib.pretty")
    text = fpsim.explain(1.0, "fp16")
    assert pretty.pretty(text) == str.__str__(text)
