"""Laws of fpsim.bits: codes <-> values, classes, the grid (values, ulp, next_up, next_down).

Oracles: ml_dtypes / numpy (bit patterns of every code), tests/oracle.py's ``decode`` (values
from the fields with Fraction arithmetic), counting formulas from the format fields, and
numpy.nextafter for float32.
"""

from __future__ import annotations

import functools
import re

import ml_dtypes
import numpy as np
import pytest
from helpers import all_same as same
from hypothesis import assume, given
from hypothesis import strategies as st
from oracle import decode
from strategies import formats, representable

import fpsim
from fpsim import Format
from fpsim.bits import classify, code_dtype, decompose, from_bits, nan_code, to_bits
from fpsim.grid import next_down, next_up, ulp, values

CUSTOM = [
    Format("e3m2", 3, 2),
    Format("e4m0", 4, 0),
    Format("e3m3fnuz_b5", 3, 3, bias=5, inf=False, nan="fnuz"),
    Format("e2m2fn", 2, 2, inf=False, nan="fn"),
    Format("fp16_ftz", 5, 10, subnormals=False),
    Format("e5m4_sat", 5, 4, inf=False, nan="none"),
]
SMALL = [f for f in fpsim.CATALOG if f.bits <= 16] + CUSTOM
SMALL_IDS = [f.name for f in SMALL]


def ml_dtype(fmt: Format):
    """The numpy / ml_dtypes dtype of a catalog format, or None."""
    if fmt.name in ("float16", "float32"):
        return np.dtype(fmt.name)
    return np.dtype(getattr(ml_dtypes, fmt.name)) if hasattr(ml_dtypes, fmt.name) else None


# formats symmetric about zero (unsigned and zero-less ones are checked in test_e8m0/test_p3109)
SIGNED = [f for f in SMALL if f.signed and f.zero]
ML_FORMATS = [f for f in fpsim.CATALOG if f.bits <= 16 and ml_dtype(f) is not None]


def all_codes(fmt: Format) -> np.ndarray:
    return np.arange(2**fmt.bits, dtype=np.int64).astype(code_dtype(fmt))


@functools.cache
def _oracle_values(fmt: Format) -> np.ndarray:
    return np.array([decode(fmt, c) for c in range(2**fmt.bits)])


def oracle_values(fmt: Format) -> np.ndarray:
    """float64 value of every code, from the fields (tests/oracle.py)."""
    return _oracle_values(fmt).copy()


# --- codes <-> values ------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", SMALL, ids=SMALL_IDS)
def test_from_bits_equals_the_value_of_the_fields_for_every_code(fmt):
    assert same(from_bits(all_codes(fmt), fmt), oracle_values(fmt))


@pytest.mark.parametrize("fmt", SMALL, ids=SMALL_IDS)
def test_to_bits_inverts_from_bits_for_every_non_nan_code(fmt):
    codes = all_codes(fmt)
    v = from_bits(codes, fmt)
    keep = ~np.isnan(v)
    assert np.array_equal(to_bits(v[keep], fmt), codes[keep])


@pytest.mark.parametrize("fmt", SMALL, ids=SMALL_IDS)
def test_from_bits_inverts_to_bits_for_every_value(fmt):
    v = from_bits(all_codes(fmt), fmt)
    v = v[~np.isnan(v)]
    assert same(from_bits(to_bits(v, fmt), fmt), v)


@pytest.mark.parametrize("fmt", SMALL, ids=SMALL_IDS)
def test_nan_codes_decode_to_nan_and_their_number_follows_the_nan_rule(fmt):
    m_bits = fmt.mantissa_bits
    signs = 2 if fmt.signed else 1
    expected = {"ieee": 2 * (2**m_bits - 1), "fn": signs, "fnuz": 1, "none": 0}[fmt.nan]
    v = from_bits(all_codes(fmt), fmt)
    assert int(np.isnan(v).sum()) == expected
    assert np.array_equal(np.isnan(v), np.isnan(oracle_values(fmt)))


@pytest.mark.parametrize("fmt", ML_FORMATS, ids=[f.name for f in ML_FORMATS])
def test_from_bits_matches_ml_dtypes_for_every_code(fmt):
    codes = all_codes(fmt)
    ref = codes.view(ml_dtype(fmt)).astype(np.float32)
    assert same(from_bits(codes, fmt), ref)


@pytest.mark.parametrize("fmt", ML_FORMATS, ids=[f.name for f in ML_FORMATS])
def test_to_bits_matches_ml_dtypes_for_every_non_nan_value(fmt):
    codes = all_codes(fmt)
    ref = codes.view(ml_dtype(fmt)).astype(np.float32)
    keep = ~np.isnan(ref)
    back = ref[keep].astype(ml_dtype(fmt)).view(codes.dtype)
    assert np.array_equal(to_bits(ref[keep], fmt), back)


@pytest.mark.parametrize(
    "fmt", [f for f in ML_FORMATS if f.nan != "none"], ids=lambda f: f.name
)
def test_to_bits_of_nan_is_the_code_numpy_and_ml_dtypes_convert_nan_to(fmt):
    nans = np.array([np.nan, -np.nan], dtype=np.float32)
    ref = nans.astype(ml_dtype(fmt)).view(code_dtype(fmt))
    assert np.array_equal(to_bits(nans, fmt), ref)


def test_fp32_codes_are_the_float32_bit_patterns():
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 2**32, size=20000, dtype=np.uint64).astype(np.uint32)
    ref = codes.view(np.float32)
    assert same(from_bits(codes, fpsim.FP32), ref)
    keep = ~np.isnan(ref)
    assert np.array_equal(to_bits(ref[keep], fpsim.FP32), codes[keep])


def test_tf32_codes_are_float32_bit_patterns_without_the_low_13_mantissa_bits():
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 2**19, size=20000).astype(np.uint32)
    ref = (codes << np.uint32(13)).view(np.float32)
    assert same(from_bits(codes, fpsim.TF32), ref)
    keep = ~np.isnan(ref)
    assert np.array_equal(to_bits(ref[keep], fpsim.TF32), codes[keep])


@pytest.mark.parametrize(
    ("fmt", "dtype"),
    [(fpsim.E2M1FN, np.uint8), (fpsim.E4M3FN, np.uint8), (fpsim.FP16, np.uint16),
     (fpsim.BF16, np.uint16), (fpsim.TF32, np.uint32), (fpsim.FP32, np.uint32)],
    ids=lambda p: getattr(p, "name", None) or np.dtype(p).name,
)
def test_codes_come_in_the_narrowest_unsigned_dtype(fmt, dtype):
    assert to_bits(np.float32([1.0]), fmt).dtype == dtype
    assert to_bits(1.0, fmt).dtype == dtype


def test_negative_zero_encodes_as_plus_zero_in_formats_without_negative_zero():
    assert to_bits(-0.0, fpsim.E4M3FNUZ) == 0
    assert to_bits(-0.0, fpsim.E4M3FN) == 0x80
    assert to_bits(-0.0, fpsim.FP16) == 0x8000


@pytest.mark.parametrize(
    ("x", "fmt", "needle"),
    [(0.1, "fp16", "0.1 is not a value of float16 (it lies between 0.0999755859375 and "
                   "0.10003662109375)"),
     (65520.0, "fp16", "exceeds max = 65504.0"),
     (2.0**-25, "fp16", "between 0.0 and 5.960464477539063e-08"),
     (np.inf, "e4m3fn", "has no inf"),
     (np.nan, "e2m1fn", "has no NaN code"),
     (1 + 2.0**-30, "fp32", "not a value of float32")],
)
def test_to_bits_rejects_a_value_the_format_does_not_hold_and_names_it(x, fmt, needle):
    with pytest.raises(ValueError) as err:
        to_bits(np.array([1.0, x]), fmt)
    assert needle in str(err.value)


def test_to_bits_rejects_non_numeric_input():
    with pytest.raises(TypeError, match="numeric"):
        to_bits(np.array(["1.0"]), "fp16")


def test_from_bits_rejects_codes_out_of_range_and_non_integers():
    with pytest.raises(ValueError, match=r"code 256 is out of range for float8_e4m3fn: codes "
                                         r"are 0\.\.255"):
        from_bits([1, 256], "e4m3fn")
    with pytest.raises(ValueError, match="out of range"):
        from_bits(-1, "fp16")
    with pytest.raises(ValueError, match=r"0\.\.15"):
        from_bits(16, "e2m1fn")
    with pytest.raises(TypeError, match="integers"):
        from_bits(np.float32([1.0]), "fp16")


def test_from_bits_returns_float32_scalars_for_scalars_and_arrays_for_arrays():
    assert from_bits(0x3C00, "fp16") == 1.0 and from_bits(0x3C00, "fp16").dtype == np.float32
    assert from_bits([[0x3C00]], "fp16").shape == (1, 1)


# --- classes and fields ----------------------------------------------------------------------
@pytest.mark.parametrize("fmt", SMALL, ids=SMALL_IDS)
def test_classify_agrees_with_the_magnitude_of_every_value(fmt):
    ref = oracle_values(fmt)
    v = from_bits(all_codes(fmt), fmt)
    a = np.abs(ref)
    expected = np.where(
        np.isnan(ref), "nan", np.where(
            np.isinf(ref), "inf", np.where(
                a == 0, "zero", np.where(a < fmt.smallest_normal, "subnormal", "normal"))))
    keep = ~np.isnan(v)
    assert np.array_equal(classify(v[keep], fmt), expected[keep])


def test_classify_reads_the_exponent_and_mantissa_fields_of_fp16():
    # S|EEEEE|MMMMMMMMMM: exponent 0 -> zero/subnormal, 31 -> inf/NaN, else normal
    codes = np.arange(2**16, dtype=np.uint16)
    e = (codes >> 10) & 0x1F
    m = codes & 0x3FF
    v = from_bits(codes, "fp16")
    keep = ~((e == 31) & (m != 0))  # NaN codes: classify takes values, NaN has one code
    got = classify(v[keep], "fp16")
    ref = np.where(e == 0, np.where(m == 0, "zero", "subnormal"),
                   np.where(e == 31, np.where(m == 0, "inf", "nan"), "normal"))[keep]
    assert np.array_equal(got, ref)
    assert classify(np.nan, "fp16") == "nan"


def test_classify_of_a_scalar_is_a_string():
    assert classify(2.0**-24, "fp16") == "subnormal"
    assert isinstance(classify(1.0, "fp16"), str)


@pytest.mark.parametrize("fmt", SMALL, ids=SMALL_IDS)
def test_decompose_reassembles_every_value_exactly(fmt):
    v = from_bits(all_codes(fmt), fmt).astype(np.float64)
    v = v[np.isfinite(v)]
    d = decompose(v, fmt)
    back = np.where(d.sign == 1, -1.0, 1.0) * np.ldexp(d.significand, d.exponent)
    assert same(back, v)
    normal = d.cls == "normal"
    assert np.all((d.significand[normal] >= 1) & (d.significand[normal] < 2))
    assert np.all((d.significand[~normal] >= 0) & (d.significand[~normal] < 1))


@pytest.mark.parametrize(
    ("x", "fmt", "expected"),
    [(1.0, "fp16", (0, 0, 1.0, "normal")),
     (2.0**-24, "fp16", (0, -14, 2.0**-10, "subnormal")),
     (-448.0, "e4m3fn", (1, 8, 1.75, "normal")),
     (-0.0, "fp16", (1, -14, 0.0, "zero")),
     (6.0, "e2m1fn", (0, 2, 1.5, "normal"))],
)
def test_decompose_gives_sign_unbiased_exponent_significand_and_class(x, fmt, expected):
    assert tuple(decompose(x, fmt)) == expected


def test_decompose_of_inf_and_nan_keeps_the_product_law():
    d = decompose(np.array([-np.inf, np.nan]), "fp16")
    assert list(d.cls) == ["inf", "nan"]
    assert d.significand[0] == np.inf and d.sign[0] == 1 and np.isnan(d.significand[1])


# --- the grid --------------------------------------------------------------------------------
def finite_count(fmt: Format) -> int:
    """Finite values (each zero once) counted from the format fields alone."""
    codes = 2**fmt.bits
    signs = 2 if fmt.signed else 1
    specials = {"ieee": 2 * 2**fmt.mantissa_bits, "fn": signs, "fnuz": 1, "none": 0}[fmt.nan]
    if fmt.inf and fmt.nan != "ieee":
        specials += signs  # P3109: +-inf at the code above max
    minus_zero = 1 if fmt.nan != "fnuz" and fmt.signed else 0
    flushed = 0 if fmt.subnormals or not fmt.zero else signs * (2**fmt.mantissa_bits - 1)
    return codes - specials - minus_zero - flushed


@pytest.mark.parametrize("fmt", SMALL, ids=SMALL_IDS)
def test_values_has_as_many_values_as_the_fields_allow(fmt):
    assert values(fmt).size == finite_count(fmt)


def test_values_counts_of_the_common_formats():
    assert values("fp16").size == 63487  # 2^16 - 2*1024 (inf/NaN) - 1 (-0)
    assert values("bf16").size == 65279
    assert values("e4m3fn").size == 253
    assert values("e2m1fn").size == 15


@pytest.mark.parametrize("fmt", ML_FORMATS, ids=[f.name for f in ML_FORMATS])
def test_values_equal_every_finite_ml_dtypes_value_sorted_once(fmt):
    with np.errstate(invalid="ignore"):
        ref = all_codes(fmt).view(ml_dtype(fmt)).astype(np.float64)
    ref = np.unique(ref[np.isfinite(ref)])  # unique also merges -0 and +0
    got = values(fmt)
    assert got.dtype == np.float32
    assert np.array_equal(got, ref)
    assert not np.signbit(got[got == 0]).any()


@pytest.mark.parametrize("fmt", SIGNED, ids=lambda f: f.name)
def test_values_are_strictly_increasing_and_symmetric(fmt):
    v = values(fmt)
    assert np.all(np.diff(v) > 0)
    assert np.array_equal(v, -v[::-1])
    assert v[-1] == fmt.max


def test_values_of_a_flush_to_zero_format_skip_the_subnormals():
    ftz = Format("fp16_ftz", 5, 10, subnormals=False)
    v = values(ftz)
    assert v[v > 0][0] == fpsim.FP16.smallest_normal


def test_values_rejects_formats_wider_than_16_bits():
    with pytest.raises(ValueError, match="at most 16 bits; float32 has 32"):
        values("fp32")


def positive_grid(fmt: Format) -> np.ndarray:
    """Non-negative values from the oracle decoder, sorted (subnormals dropped when flushed)."""
    v = oracle_values(fmt)
    v = np.unique(v[np.isfinite(v) & (v >= 0)])
    if not fmt.subnormals:
        v = v[(v == 0) | (v >= fmt.smallest_normal)]
    return v


@pytest.mark.parametrize("fmt", [f for f in SMALL if f.subnormals], ids=lambda f: f.name)
def test_ulp_is_the_spacing_to_the_next_larger_magnitude_value(fmt):
    grid = positive_grid(fmt)
    rng = np.random.default_rng(2)
    # grid points and random points between them, both signs
    inner = grid[:-1] + rng.random(grid.size - 1) * np.diff(grid)
    x = np.concatenate([grid[:-1], inner])
    spacing = np.diff(grid)[np.searchsorted(grid, x, side="right") - 1]
    assert np.array_equal(ulp(x, fmt), spacing)
    assert np.array_equal(ulp(-x, fmt), spacing)


@pytest.mark.parametrize("fmt", [f for f in SMALL if f.mantissa_bits > 0], ids=lambda f: f.name)
def test_ulp_of_max_is_the_spacing_below_max(fmt):
    grid = positive_grid(fmt)
    assert ulp(fmt.max, fmt) == grid[-1] - grid[-2]


def test_ulp_of_max_without_mantissa_bits_is_the_binade_quantum():
    e4m0 = Format("e4m0", 4, 0)  # values ..., 64, 128 = max: the quantum at 128 is 2^7
    assert ulp(e4m0.max, e4m0) == 128.0 and values(e4m0)[-2] == 64.0


def test_ulp_of_zero_is_the_smallest_subnormal_and_of_non_finite_is_nan():
    assert ulp(0.0, "fp16") == 2.0**-24 and ulp(-0.0, "e4m3fn") == 2.0**-9
    assert np.isnan(ulp(np.float32([np.inf, -np.inf, np.nan]), "fp16")).all()


def test_ulp_keeps_the_input_float_dtype():
    assert ulp(np.float32([1.0]), "fp16").dtype == np.float32
    assert ulp(np.float64([1.0]), "fp16").dtype == np.float64
    assert ulp(1e6, "fp16") == 512.0  # beyond max the grid continues: 2^(19 - 10)


def table_next_up(grid_pos: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Smallest grid value > x from the sorted full grid (both signs, one zero)."""
    full = np.concatenate([-grid_pos[::-1], grid_pos[1:]])
    i = np.searchsorted(full, x, side="right")
    return np.where(i < full.size, full[np.minimum(i, full.size - 1)], np.nan)


@pytest.mark.parametrize("fmt", SIGNED, ids=lambda f: f.name)
def test_next_up_is_the_smallest_value_above_x(fmt):
    grid = positive_grid(fmt)
    full = np.concatenate([-grid[::-1], grid[1:]])
    rng = np.random.default_rng(3)
    mids = full[:-1] + rng.random(full.size - 1) * np.diff(full)
    x = np.concatenate([full[:-1], mids, [-1e30]])
    got = next_up(x, fmt)
    assert np.array_equal(got, table_next_up(grid, x))
    down = next_down(-x, fmt)
    assert np.array_equal(down, -table_next_up(grid, x))


@pytest.mark.parametrize("fmt", SIGNED, ids=lambda f: f.name)
def test_next_up_inverts_next_down_away_from_the_edges(fmt):
    v = values(fmt)
    inner = v[1:-1]
    assert np.array_equal(next_up(next_down(inner, fmt), fmt), inner)
    assert np.array_equal(next_down(next_up(inner, fmt), fmt), inner)


@pytest.mark.parametrize("fmt", SIGNED, ids=lambda f: f.name)
def test_next_up_of_max_is_inf_if_the_format_has_inf_else_nan(fmt):
    up = next_up(np.float32([fmt.max, np.inf]), fmt)
    down = next_down(np.float32([-fmt.max, -np.inf]), fmt)
    if fmt.inf:
        assert np.array_equal(up, [np.inf, np.inf]) and np.array_equal(down, [-np.inf, -np.inf])
    else:
        assert np.isnan(up).all() and np.isnan(down).all()


@pytest.mark.parametrize("fmt", SIGNED, ids=lambda f: f.name)
def test_next_up_of_minus_inf_is_minus_max_and_of_nan_is_nan(fmt):
    assert next_up(-np.inf, fmt) == -fmt.max
    assert next_down(np.inf, fmt) == fmt.max
    assert np.isnan(next_up(np.nan, fmt)) and np.isnan(next_down(np.nan, fmt))


def test_stepping_across_zero_goes_through_signed_zero():
    tiny = fpsim.FP16.smallest_subnormal
    assert next_up(0.0, "fp16") == tiny and next_up(-0.0, "fp16") == tiny
    assert next_down(0.0, "fp16") == -tiny
    minus = next_up(-tiny, "fp16")
    assert minus == 0 and np.signbit(minus)  # IEEE nextUp(-tiny) = -0
    plus = next_up(-fpsim.E4M3FNUZ.smallest_subnormal, "e4m3fnuz")
    assert plus == 0 and not np.signbit(plus)  # fnuz has no -0


def test_next_up_of_a_flush_to_zero_format_jumps_from_zero_to_smallest_normal():
    ftz = Format("fp16_ftz", 5, 10, subnormals=False)
    assert next_up(0.0, ftz) == ftz.smallest_normal
    assert next_down(ftz.smallest_normal, ftz) == 0.0
    assert next_up(-ftz.smallest_normal, ftz) == 0.0


def test_next_up_in_fp32_matches_numpy_nextafter():
    rng = np.random.default_rng(4)
    x = rng.integers(0, 2**32, size=20000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = x[np.isfinite(x) & (np.abs(x) < np.finfo(np.float32).max)]
    assert same(next_up(x, fpsim.FP32), np.nextafter(x, np.float32(np.inf)))
    assert same(next_down(x, fpsim.FP32), np.nextafter(x, np.float32(-np.inf)))


def test_next_up_of_tf32_values_is_the_next_code():
    rng = np.random.default_rng(5)
    codes = rng.integers(1, 2**18 - 2**10, size=5000).astype(np.uint32)  # positive, below max
    v = from_bits(codes, fpsim.TF32)
    assert np.array_equal(next_up(v, fpsim.TF32), from_bits(codes + 1, fpsim.TF32))
    assert np.array_equal(next_down(v, fpsim.TF32), from_bits(codes - 1, fpsim.TF32))


def test_next_up_keeps_the_input_float_dtype():
    assert next_up(np.float32([1.0]), "bf16").dtype == np.float32
    assert next_up(np.float64([1.0]), "bf16").dtype == np.float64
    assert next_up(1.0, "bf16") == 1.0078125


# --- any format, custom ones included (hypothesis) -------------------------------------------
@given(data=st.data(), fmt=formats(custom=True))
def test_from_bits_inverts_to_bits_for_any_value_of_any_format(data, fmt):
    v = data.draw(representable(fmt, specials=True))
    assume(not (np.isnan(v) and nan_code(fmt) is None))  # IEEE-style M = 0: inf but no NaN code
    code = to_bits(v, fmt)
    assert same(from_bits(code, fmt), np.float32(v))
    assert to_bits(from_bits(code, fmt), fmt) == code


@given(data=st.data(), fmt=formats(custom=True))
def test_next_up_is_a_value_above_x_with_nothing_of_the_format_in_between(data, fmt):
    x = data.draw(st.floats(-fmt.max, fmt.max, exclude_max=True))
    up = next_up(x, fmt)
    assert up > x
    to_bits(up, fmt)  # a value of the format (raises otherwise)
    down = next_down(up, fmt)  # NaN: nothing below up (an unsigned format's smallest value)
    assert down <= x or (np.isnan(down) and not fmt.signed and up == values(fmt)[0])


# --- values named as given --------------------------------------------------------------------
@pytest.mark.parametrize("given, shown", [
    (10**400, r"the int 100000\.\.\. \(401 digits, about 1\.00000e\+400\)"),
    (-(10**400), r"the int -100000\.\.\. \(401 digits, about -1\.00000e\+400\)"),
    (7 * 10**4300, r"the int 700000\.\.\. \(4301 digits, about 7\.00000e\+4300\)"),  # no str()
    ([1, 10**400], r"the int 100000\.\.\. \(401 digits, about 1\.00000e\+400\)"),
    (70000, r"70000"),
], ids=["1e400", "-1e400", "7e4300", "list", "70000"])
def test_to_bits_names_an_int_beyond_the_format_as_given_not_as_its_float64_stand_in(given,
                                                                                     shown):
    with pytest.raises(ValueError, match=rf"^{shown} is not a value of float16: its magnitude "
                                         r"exceeds max = 65504\.0$") as err:
        to_bits(given, "fp16")
    assert "1.7976931348623157e+308" not in str(err.value)


def test_to_bits_names_an_inexact_int_as_given_with_its_neighbours():
    n = 2**100 + 1  # float64 holds only a stand-in (2**100 + 2**48, rounded to odd)
    lo, hi = float(2**100), float(2**100 + 2**(100 - 23))  # float32's neighbours of n
    expected = (f"the int 126765... (31 digits, about 1.26765e+30) is not a value of float32 "
                f"(it lies between {lo!r} and {hi!r})")
    with pytest.raises(ValueError, match="^" + re.escape(expected)):
        to_bits(n, "float32")


def test_to_bits_names_a_float_as_its_value():
    with pytest.raises(ValueError, match=r"^1e\+300 is not a value of float16"):
        to_bits(1e300, "fp16")
