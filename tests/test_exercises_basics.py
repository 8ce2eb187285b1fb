"""The checks of exercises 06 (decode by hand) and 07 (double rounding): right answers pass,
deliberate mistakes fail on a named input with expected versus got and the right hint, and a
raising or malformed answer is reported, never raised. (The notebooks themselves run in
tests/test_exercises.py, which finds them by glob.)"""

from __future__ import annotations

import importlib.util
import math
import pathlib
import sys

import numpy as np
import pytest

import fpsim

EXERCISES = pathlib.Path(__file__).resolve().parent.parent / "tutorials" / "exercises"


def _load(name: str):
    sys.path.insert(0, str(EXERCISES))  # checks_basics imports checks
    try:
        spec = importlib.util.spec_from_file_location(name, EXERCISES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(EXERCISES))


basics = _load("checks_basics")
FAIL = "❌ FAIL"


# --- exercise 06 --------------------------------------------------------------------------------
def _decoder(*, bias_from_format=True, implicit_one=True, subnormal_exponent=1, signed=True):
    """The formula of the exercise, with one switch per classic mistake."""

    def decode(code, fmt):
        m_bits, e_bits = fmt.mantissa_bits, fmt.exponent_bits
        bias = fmt.bias if bias_from_format else 2 ** (e_bits - 1) - 1
        sign = -1.0 if signed and code >> (e_bits + m_bits) & 1 else 1.0
        e, m = (code >> m_bits) & (2**e_bits - 1), code & (2**m_bits - 1)
        if e == 2**e_bits - 1:
            return sign * math.inf if m == 0 else math.nan
        if e == 0:
            return sign * 2.0 ** (subnormal_exponent - bias) * (m / 2**m_bits)
        return sign * 2.0 ** (e - bias) * (int(implicit_one) + m / 2**m_bits)

    return decode


def test_the_field_formula_decodes_every_code_like_numpy_float16():
    decode = _decoder()
    codes = np.arange(2**16, dtype=np.uint16)
    want = codes.view(np.float16).astype(np.float64)  # independent of fpsim
    got = np.array([decode(int(c), fpsim.FP16) for c in codes])
    assert np.array_equal(got, want, equal_nan=True)
    numbers = ~np.isnan(want)
    assert np.array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))  # -0.0 too


def test_check_decode_passes_the_field_formula(capsys):
    assert basics.check_decode(_decoder()) is True
    assert capsys.readouterr().out.startswith("✅ PASS check_decode:")


@pytest.mark.parametrize(("mistake", "where", "hint"), [
    ({"bias_from_format": False}, "code 0x01 of e5m2b11", "this format's bias, 11"),
    ({"implicit_one": False}, "code 0x04 of float8_e5m2", "implicit leading 1"),
    ({"subnormal_exponent": 0}, "code 0x01 of float8_e5m2", "2^(1 - bias)"),
    ({"signed": False}, "code 0x80 of float8_e5m2", "the sign"),
])
def test_each_classic_decoding_mistake_is_named_with_its_hint(mistake, where, hint, capsys):
    assert basics.check_decode(_decoder(**mistake)) is False
    out = capsys.readouterr().out
    assert out.startswith(f"{FAIL} check_decode:") and where in out, out
    assert "expected" in out and "got" in out and hint in out, out


def test_a_nan_for_inf_mistake_gets_the_special_values_hint(capsys):
    def no_inf(code, fmt):
        value = _decoder()(code, fmt)
        return math.nan if math.isinf(value) else value

    assert basics.check_decode(no_inf) is False
    out = capsys.readouterr().out
    assert "code 0x7C of float8_e5m2" in out and "expected inf" in out and "all-ones" in out


# --- exercise 07 --------------------------------------------------------------------------------
def _round_bits(m: int, drop: int) -> int:
    kept, tail, half = m >> drop, m & ((1 << drop) - 1), 1 << (drop - 1)
    return kept + (tail > half or (tail == half and kept & 1))


def _differs(x) -> bool:
    mantissa = int(x.view(np.uint64)) & (2**52 - 1)
    return _round_bits(mantissa, 45) != _round_bits(_round_bits(mantissa, 29), 16)


def test_the_cases_hold_double_rounding_errors_in_both_directions():
    cases = basics.double_rounding_cases()
    direct = fpsim.round(cases, fpsim.BF16)
    # ml_dtypes converts float64 to bf16 through float32: an independent double-rounder
    import ml_dtypes

    twice = cases.astype(ml_dtypes.bfloat16).astype(np.float64)
    wrong = twice != direct
    assert np.array_equal(wrong, [basics.double_rounding_oracle(x) for x in cases])
    assert (twice[wrong] > direct[wrong]).any() and (twice[wrong] < direct[wrong]).any()
    assert 0.05 < wrong.mean() < 0.5  # enough of each kind for a wrong rule to fail


def test_check_double_rounding_passes_the_bit_rule_and_rejects_constant_answers(capsys):
    assert basics.check_double_rounding(_differs) is True
    capsys.readouterr()
    assert basics.check_double_rounding(lambda x: False) is False
    out = capsys.readouterr().out
    assert "x = 1.0039062500009095" in out and "expected True" in out
    assert "got      False" in out and "exactly half a bf16 ulp" in out
    assert basics.check_double_rounding(lambda x: True) is False
    assert "no double-rounding error here" in capsys.readouterr().out


def test_predicting_from_a_float_is_refused_as_not_integer_only(capsys):
    assert basics.check_double_rounding(lambda x: float(x) > 1) is False
    assert "integer operations only" in capsys.readouterr().out


def _to_odd(x, *, sticky=True) -> int:
    b = int(x.view(np.uint64))
    sign, e, mantissa = b >> 63, (b >> 52) & 0x7FF, b & (2**52 - 1)
    kept = mantissa >> 29
    if sticky and mantissa & (2**29 - 1):
        kept |= 1
    return (sign << 31) | ((e - 1023 + 127) << 23) | kept


def test_check_round_to_odd_passes_the_sticky_rule_and_rejects_truncation(capsys):
    assert basics.check_round_to_odd(_to_odd) is True
    capsys.readouterr()
    assert basics.check_round_to_odd(lambda x: _to_odd(x, sticky=False)) is False
    out = capsys.readouterr().out
    assert "expected 0x3F800001" in out and "got      0x3F800000" in out
    assert "off by the last bit" in out


def test_round_to_odd_in_between_makes_bf16_right_on_every_case():
    cases = basics.double_rounding_cases()
    odd = np.array([_to_odd(np.float64(x)) for x in cases], np.uint32).view(np.float32)
    assert np.array_equal(fpsim.round(odd, fpsim.BF16), fpsim.round(cases, fpsim.BF16))



# --- an exponent or bias off by one: the "exactly twice / half" hint --------------------------
def test_a_bias_one_too_large_gets_the_half_hint_not_a_subnormal_hint(capsys):
    def decode(code, fmt):
        value = _decoder()(code, fmt)
        return value / 2 if math.isfinite(value) else value  # bias + 1 halves every number

    assert basics.check_decode(decode) is False
    out = capsys.readouterr().out
    assert "code 0x01 of float8_e5m2" in out and "exactly half the right one" in out
    assert "bias 15" in out and "2^(1 - bias)" in out


def test_a_round_to_odd_exponent_one_too_large_gets_the_twice_hint(capsys):
    assert basics.check_round_to_odd(lambda x: _to_odd(x) + (1 << 23)) is False
    out = capsys.readouterr().out
    assert "exactly twice the right one" in out and "- 1023 + 127" in out
