"""Bad or unusual input to the public API: clear errors naming the argument, or exact results."""

from __future__ import annotations

import re

import numpy as np
import pytest

import fpsim
from fpsim import bits


# --- out= ------------------------------------------------------------------------------------
def test_out_overlapping_the_input_gives_the_same_result_as_a_fresh_array():
    b = np.arange(1, 11, dtype=np.float32) * np.float32(1.1)
    expected = fpsim.round(b[:-1].copy(), "fp16")
    fpsim.round(b[:-1], "fp16", out=b[1:])
    np.testing.assert_array_equal(b[1:], expected)


@pytest.mark.parametrize("shift", [1, -1, 7])
@pytest.mark.parametrize("mode", ["nearest_even", "toward_zero"])
def test_out_overlapping_the_input_on_the_parallel_path_gives_the_fresh_result(shift, mode):
    n = 2**17
    rng = np.random.default_rng(3)
    buf = (rng.standard_normal(n + abs(shift)) * 100).astype(np.float32)
    x = buf[:n] if shift > 0 else buf[-shift:]
    out = buf[shift:] if shift > 0 else buf[:n]
    expected = fpsim.round(x.copy(), "fp16", mode)
    fpsim.round(x, "fp16", mode, out=out)
    np.testing.assert_array_equal(out, expected)


def test_out_overlapping_a_float64_input_gives_the_fresh_result():
    b = np.linspace(1, 2, 1001)
    expected = fpsim.round(b[1:].copy(), "bf16")
    fpsim.round(b[1:], "bf16", out=b[:-1])
    np.testing.assert_array_equal(b[:-1], expected)


def test_out_that_is_the_input_itself_rounds_in_place():
    x = np.float32([0.1, 65519.99, 1e-8]) * np.ones((2**16, 1), np.float32)
    expected = fpsim.round(x.copy(), "fp16")
    assert fpsim.round(x, "fp16", out=x) is x
    np.testing.assert_array_equal(x, expected)


def test_out_that_is_a_strided_view_of_the_input_itself_rounds_in_place():
    buf = np.float32([0.1, 5.0, 0.3, 7.0, 1e-8, 9.0])
    x = buf[::2]
    expected = fpsim.round(x.copy(), "fp16")
    fpsim.round(x, "fp16", out=x)
    np.testing.assert_array_equal(buf[::2], expected)
    np.testing.assert_array_equal(buf[1::2], [5.0, 7.0, 9.0])


def test_a_read_only_out_raises_a_value_error_naming_out():
    out = np.zeros(3, np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="out must be a writable array; got a read-only"):
        fpsim.round(np.ones(3, np.float32), "fp16", out=out)


# --- masked arrays -----------------------------------------------------------------------------
MASKED = np.ma.masked_array([1.0, 2.0, 3.0], mask=[False, True, False])


@pytest.mark.parametrize("call", [
    lambda x: fpsim.round(x, "fp16"),
    lambda x: fpsim.array(x, "fp16"),
    lambda x: fpsim.to_bits(x, "fp16"),
    lambda x: fpsim.classify(x, "fp16"),
    lambda x: fpsim.from_bits(np.ma.masked_array([0, 1], mask=[0, 1]), "fp16"),
])
def test_a_masked_array_is_refused_with_a_type_error_saying_what_to_pass(call):
    with pytest.raises(TypeError, match=r"masked array.*\.filled\(np\.nan\).*\.data"):
        call(MASKED)


def test_a_masked_array_filled_with_nan_rounds_its_masked_entries_to_nan():
    out = fpsim.round(MASKED.filled(np.nan), "fp16")
    assert np.isnan(out[1]) and out[0] == 1.0 and out[2] == 3.0


# --- subnormals= --------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["False", "no", "off", float("nan"), 0, 1, np.int64(1), 0.0])
def test_subnormals_other_than_a_bool_is_a_type_error_naming_subnormals(bad):
    with pytest.raises(TypeError, match=r"subnormals must be True, False or None.*got"):
        fpsim.round(np.float32([2**-20]), "fp16", subnormals=bad)
    with pytest.raises(TypeError, match=r"subnormals must be True, False or None.*got"):
        fpsim.round_scalar(2**-20, "fp16", subnormals=bad)


@pytest.mark.parametrize("flag", [False, np.bool_(False)])
def test_subnormals_accepts_bool_and_numpy_bool(flag):
    assert fpsim.round(np.float32([2**-20]), "fp16", subnormals=flag)[0] == 0.0
    assert fpsim.round(np.float32([2**-20]), "fp16", subnormals=not flag)[0] == 2**-20
    assert fpsim.round_scalar(2**-20, "fp16", subnormals=flag) == 0.0


# --- rng= -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad, error", [(-1, ValueError), (-(2**70), ValueError),
                                        (np.int64(-5), ValueError), (1.5, TypeError),
                                        ("7", TypeError), (True, TypeError)])
def test_a_bad_seed_names_rng_and_what_is_allowed(bad, error):
    with pytest.raises(error, match=r"rng must be None, a non-negative int seed or a "
                                    r"numpy.random.Generator, got"):
        fpsim.round(np.float32([0.1]), "fp16", "stochastic", rng=bad)


def test_a_bad_seed_is_refused_by_the_accumulating_sum_too():
    with pytest.raises(ValueError, match="rng must be"):
        fpsim.sum(np.ones(4), accumulate="fp16", mode="stochastic", rng=-1)


def test_large_non_negative_seeds_and_generators_are_accepted_and_reproducible():
    x = np.full(1000, 0.1, np.float32)
    a = fpsim.round(x, "fp16", "stochastic", rng=2**100)
    np.testing.assert_array_equal(a, fpsim.round(x, "fp16", "stochastic", rng=2**100))
    g1, g2 = np.random.default_rng(4), np.random.default_rng(4)
    np.testing.assert_array_equal(fpsim.round(x, "fp16", "stochastic", rng=g1),
                                  fpsim.round(x, "fp16", "stochastic", rng=g2))


# --- unknown names --------------------------------------------------------------------------------
def test_an_unknown_format_name_suggests_the_closest_and_lists_the_families():
    with pytest.raises(ValueError, match=r"unknown format 'fp8_e4m4'; did you mean 'fp8_e4m3'.*"
                                         r"formats: float32, .*float16"):
        fpsim.get_format("fp8_e4m4")


def test_an_unknown_mode_name_lists_the_known_modes_and_suggests_the_closest():
    with pytest.raises(ValueError, match=r"unknown rounding mode 'nearest_eve'; known modes: "
                                         r"nearest_even, .*; did you mean 'nearest_even'"):
        fpsim.round(1.0, "fp16", "nearest_eve")


def test_a_name_close_to_nothing_gets_no_suggestion():
    with pytest.raises(ValueError) as info:
        fpsim.get_format("zzzzzzzz")
    assert "did you mean" not in str(info.value)


# --- emulated arrays do not hand out writable views -------------------------------------------
def test_asarray_of_an_emulated_array_is_read_only_so_it_cannot_corrupt_it():
    a = fpsim.array([1.0, 2.0], "fp16")
    view = np.asarray(a)
    assert not view.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        view[0] = 0.1
    assert a.numpy().tolist() == [1.0, 2.0]


def test_asarray_with_copy_false_gives_a_read_only_view_and_copy_true_a_writable_copy():
    a = fpsim.array([1.0, 2.0], "fp16")
    no_copy = np.asarray(a, copy=False)
    assert not no_copy.flags.writeable and np.shares_memory(no_copy, a._data)
    copied = np.array(a, copy=True)
    copied[0] = 0.1
    assert copied.flags.writeable and a.numpy()[0] == 1.0


def test_np_array_of_an_emulated_array_is_a_writable_copy():
    a = fpsim.array([1.0, 2.0], "fp16")
    plain = np.array(a)
    plain[0] = 0.1
    assert a.numpy()[0] == 1.0


def test_an_emulated_array_stays_assignable_after_asarray_handed_out_a_view():
    a = fpsim.array([1.0, 2.0], "fp16")
    np.asarray(a)
    a[0] = 0.1
    assert a.numpy()[0] == np.float32(np.float16(0.1))


def test_bits_still_reads_emulated_arrays():
    a = fpsim.array([1.0, -2.0], "fp16")
    assert bits.to_bits(a, "fp16").tolist() == [0x3C00, 0xC000]



@pytest.mark.parametrize("flag", ["inf", "subnormals"])
def test_a_format_flag_that_is_not_a_bool_is_refused_naming_the_flag_and_value(flag):
    with pytest.raises(ValueError, match=rf"{flag} must be True or False, got 'False'"):
        fpsim.FP16.replace(**{flag: "False"})


def test_asarray_with_copy_false_and_another_dtype_raises_as_numpy_2_requires():
    a = fpsim.array([1.0, 2.0], "fp16")
    with pytest.raises(ValueError, match="without a copy"):
        np.asarray(a, dtype=np.float64, copy=False)
    wide = np.asarray(a, dtype=np.float64)
    wide[0] = 0.1
    assert wide.dtype == np.float64 and a.numpy()[0] == 1.0


# --- numpy integers and bools where Python ones are meant ------------------------------------
def test_p3109_accepts_numpy_integers_and_numpy_bools_as_python_ones():
    assert fpsim.p3109(np.int64(4)) == fpsim.p3109(4)
    assert fpsim.p3109(np.uint8(3), signed=np.bool_(False)) == fpsim.p3109(3, signed=False)
    assert type(fpsim.p3109(np.int64(4)).exponent_bits) is int  # stored as a Python int


@pytest.mark.parametrize("bad", [True, np.True_, 4.0, "4", 0, np.int64(8)])
def test_p3109_refuses_a_bool_or_non_integer_or_out_of_range_precision_naming_p(bad):
    with pytest.raises(ValueError, match=r"p must be an integer in 1\.\.7 \(significand bits"):
        fpsim.p3109(bad)


@pytest.mark.parametrize("bad", [1, "False", None])
def test_p3109_refuses_a_signed_flag_that_is_not_a_bool(bad):
    with pytest.raises(ValueError, match="signed must be True or False"):
        fpsim.p3109(4, signed=bad)


def test_format_fields_accept_numpy_integers_and_bools_stored_as_python_ones():
    f = fpsim.Format("h", np.int32(5), np.int64(10), bias=np.int16(15), subnormals=np.True_)
    assert f == fpsim.Format("h", 5, 10) and f.max == 65504.0
    assert {type(f.exponent_bits), type(f.mantissa_bits), type(f.bias)} == {int}
    assert type(f.subnormals) is bool


@pytest.mark.parametrize("bad", [np.True_, True, 5.0])
def test_format_refuses_a_bool_or_float_where_bits_are_meant(bad):
    with pytest.raises(ValueError, match=r"exponent_bits must be an integer in 1\.\.8"):
        fpsim.Format("x", bad, 3)


@pytest.mark.parametrize("name", ["fp8", "float8", "FP8", "f8", "8bit", "fp-8"])
def test_a_bare_width_suggests_the_formats_of_that_width(name):
    with pytest.raises(ValueError) as info:
        fpsim.get_format(name)
    message = str(info.value)
    hint = message.split("formats: float32")[0]
    for fmt in (fpsim.E4M3FN, fpsim.E5M2, fpsim.E4M3):  # the formats behind the names shown
        assert any(fpsim.get_format(n) is fmt for n in re.findall(r"'([^']+)'", hint)[1:])
    for wrong in ("fp4", "float32", "float16", "bfloat16"):
        assert f"'{wrong}'" not in hint


def test_every_format_a_width_hint_suggests_has_that_width():
    for width in (4, 6, 8):  # (fp4 itself is an alias of float4_e2m1fn)
        with pytest.raises(ValueError) as info:
            fpsim.get_format(f"float{width}")
        names = re.findall(r"'([^']+)'", str(info.value).split("formats: float32")[0])[1:]
        assert names and all(fpsim.get_format(n).bits == width for n in names)


@pytest.mark.parametrize("name", ["fp8", "e4m3fnx", "fp8_e4m4", "fp99", "float8_e4m3x"])
def test_an_unknown_format_message_lists_families_not_every_alias(name):
    with pytest.raises(ValueError) as info:
        fpsim.get_format(name)
    message = str(info.value)
    assert len(message) < 600  # was 1,263 characters listing 97 names
    assert "p3109_k8" not in message and "binary8p1se" not in message
    assert "float8_{e4m3fn,e5m2,e4m3," in message and "binary8p{1..7}{s|u}{e|f}" in message


@pytest.mark.parametrize("name", ["fp8", "e4m3fnx", "fp8_e4m4"])
def test_an_unknown_name_near_e4m3_says_fp8_e4m3_is_e4m3fn_and_e4m3_another_format(name):
    with pytest.raises(ValueError, match=r"note: fp8_e4m3 is float8_e4m3fn \(no inf, max 448\); "
                                         r"e4m3 is float8_e4m3 \(inf, max 240\)"):
        fpsim.get_format(name)
    # the facts of the note, from the formats themselves
    assert fpsim.get_format("fp8_e4m3") is fpsim.E4M3FN and fpsim.E4M3FN.max == 448
    assert fpsim.get_format("e4m3") is fpsim.E4M3 and fpsim.E4M3.max == 240


def test_the_format_table_notes_that_fp8_e4m3_and_e4m3_are_different_formats():
    from fpsim.tables import format_table

    notes = format_table().split("\nnotes:\n")[1]
    assert "float8_e4m3fn: the alias fp8_e4m3 means this format" in notes and "max 448" in notes
    assert "float8_e4m3: IEEE-style E4M3 with inf (max 240)" in notes


# --- numpy scalars in the specification and in explain ---------------------------------------
_WIDE_LONGDOUBLE = pytest.mark.skipif(np.finfo(np.longdouble).nmant <= 52,
                                      reason="np.longdouble is float64 here")


@pytest.mark.parametrize("mode", ["up", "down", "nearest_even", "toward_zero"])
def test_round_scalar_takes_numpy_integers_at_their_exact_value(mode):
    from fractions import Fraction

    for x in (np.int64(2**62 + 1), np.uint64(2**64 - 1), np.int64(-(2**62) - 1)):
        exact = fpsim.round_scalar(Fraction(int(x)), "fp32", mode)  # oracle: the exact integer
        assert fpsim.round_scalar(x, "fp32", mode) == exact
        assert float(fpsim.round(x, "fp32", mode)) == exact  # the spec and round agree


@_WIDE_LONGDOUBLE
@pytest.mark.parametrize("mode", ["up", "down", "nearest_even"])
def test_round_scalar_takes_a_longdouble_at_its_exact_value(mode):
    from fractions import Fraction

    x = np.longdouble(1) + np.longdouble(2) ** -60  # not a float64
    exact = fpsim.round_scalar(Fraction(1) + Fraction(1, 2**60), "fp32", mode)
    assert fpsim.round_scalar(x, "fp32", mode) == exact == float(fpsim.round(x, "fp32", mode))


def test_round_scalar_keeps_the_sign_of_a_numpy_negative_zero():
    for z in (np.float32(-0.0), np.float16(-0.0), np.longdouble(-0.0)):
        assert np.signbit(fpsim.round_scalar(z, "fp16"))


@pytest.mark.parametrize("bad", [np.array([1.0, 2.0]), [1.0], None, 1 + 2j])
def test_round_scalar_refuses_what_is_not_one_real_number_naming_x(bad):
    with pytest.raises(TypeError, match="x must be one real number"):
        fpsim.round_scalar(bad, "fp16")


@pytest.mark.parametrize("x", [np.int64(2**62 + 1), 10**400, "fraction"])
def test_explain_refuses_a_number_that_is_not_a_float64_instead_of_explaining_another(x):
    from fractions import Fraction

    x = Fraction(1, 3) if x == "fraction" else x
    with pytest.raises(ValueError, match=r"x = .* (is not a float64|is beyond float64's range)"):
        fpsim.explain(x, "fp16", "up")


@_WIDE_LONGDOUBLE
def test_explain_refuses_a_longdouble_with_more_bits_than_float64():
    with pytest.raises(ValueError, match="is not a float64"):
        fpsim.explain(np.longdouble(1) + np.longdouble(2) ** -60, "fp32", "up")


def test_explain_takes_numbers_that_are_float64_values_as_those_values():
    from fractions import Fraction

    assert fpsim.explain(Fraction(1, 2), "fp16") == fpsim.explain(0.5, "fp16")
    assert fpsim.explain(np.int64(3), "fp16") == fpsim.explain(3.0, "fp16")
    assert fpsim.explain(np.float32(0.1), "fp16") == fpsim.explain(float(np.float32(0.1)),
                                                                    "fp16")
    assert fpsim.explain(np.array(2.5), "fp16") == fpsim.explain(2.5, "fp16")


def test_explain_refuses_an_array_naming_x():
    with pytest.raises(TypeError, match=r"x must be one real number, got array\(\[1\., 2\.\]\)"):
        fpsim.explain(np.array([1.0, 2.0]), "fp16")


# --- codes given as Python ints, empty lists; wide input without warnings ---------------------
def test_from_bits_names_a_python_int_code_beyond_int64_as_out_of_range():
    with pytest.raises(ValueError, match=r"code 1180591620717411303424 is out of range for "
                                         r"float16: codes are 0\.\.65535"):
        fpsim.from_bits(2**70, "fp16")


def test_from_bits_of_an_object_array_of_ints_decodes_them():
    codes = np.array([0x3C00, 1, 0x7BFF], dtype=object)
    np.testing.assert_array_equal(fpsim.from_bits(codes, "fp16"),
                                  np.array([0x3C00, 1, 0x7BFF], np.uint16).view(np.float16))


def test_from_bits_of_an_empty_list_is_empty():
    out = fpsim.from_bits([], "fp16")
    assert out.shape == (0,) and out.dtype == np.float32


@pytest.mark.parametrize("bad", [[1, "a"], np.array([1.5], dtype=object),
                                 np.array([True], dtype=object)])
def test_from_bits_refuses_non_integer_codes_naming_them(bad):
    with pytest.raises(TypeError, match="codes must be integers"):
        fpsim.from_bits(bad, "fp16")


@_WIDE_LONGDOUBLE
def test_a_longdouble_beyond_float64_rounds_without_a_runtime_warning():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = fpsim.round(np.array([np.longdouble("1e4000"), 1.0], dtype=np.longdouble), "fp16")
    np.testing.assert_array_equal(out, [np.inf, 1.0])


def test_to_bits_of_an_int_beyond_float64_refuses_without_a_runtime_warning():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="exceeds max"):
            fpsim.to_bits(10**400, "fp32")


# --- Format --------------------------------------------------------------------------------
def test_contains_takes_a_format_name_as_every_other_format_argument_does():
    assert fpsim.FP32.contains("fp16") is True and fpsim.FP16.contains("bf16") is False
    with pytest.raises(ValueError, match="cannot make a format from 3"):
        fpsim.FP32.contains(3)  # type: ignore[arg-type]


def test_format_text_fields_given_as_numpy_strings_are_stored_as_str():
    f = fpsim.Format(np.str_("h"), 5, 10, nan=np.str_("ieee"), overflow=np.str_("saturate"))
    assert (type(f.name), type(f.nan), type(f.overflow)) == (str, str, str)
    assert repr(f) == repr(fpsim.Format("h", 5, 10, overflow="saturate"))
