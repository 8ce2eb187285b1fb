"""Formats: finfo-style properties against ml_dtypes, validation, and name/dtype lookup."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import fpsim
from fpsim import Format

ML_DTYPE_FORMATS = [f for f in fpsim.CATALOG if f.name != "tf32" and f not in fpsim.P3109_FORMATS]


def ml_finfo(fmt: Format):
    dtype = np.float32 if fmt.name == "float32" else (
        np.float16 if fmt.name == "float16" else getattr(ml_dtypes, fmt.name))
    return ml_dtypes.finfo(dtype)


@pytest.mark.parametrize("fmt", ML_DTYPE_FORMATS, ids=lambda f: f.name)
def test_derived_properties_equal_ml_dtypes_finfo(fmt):
    fi = ml_finfo(fmt)
    assert fmt.max == float(fi.max)
    assert fmt.min == float(fi.min)
    assert fmt.smallest_normal == float(fi.smallest_normal)
    assert fmt.smallest_subnormal == float(fi.smallest_subnormal)
    assert fmt.eps == float(fi.eps)
    assert fmt.bits == fi.bits
    assert fmt.nmant == fi.nmant
    assert fmt.nexp == fi.nexp
    assert fmt.maxexp == fi.maxexp
    assert fmt.minexp == fi.minexp


def test_tf32_has_fp32_range_and_fp16_precision():
    assert fpsim.TF32.emax == fpsim.FP32.emax and fpsim.TF32.emin == fpsim.FP32.emin
    assert fpsim.TF32.eps == fpsim.FP16.eps
    assert fpsim.TF32.bits == 19 and fpsim.TF32.precision == 11


def test_fp8_variants_have_the_documented_max_values():
    assert (fpsim.E4M3FN.max, fpsim.E4M3.max, fpsim.E4M3FNUZ.max) == (448.0, 240.0, 240.0)
    assert (fpsim.E5M2.max, fpsim.E5M2FNUZ.max) == (57344.0, 57344.0)
    assert fpsim.E4M3FNUZ.bias == 8 and not fpsim.E4M3FNUZ.has_negative_zero


def test_bias_defaults_to_half_the_exponent_range():
    assert Format("x", 6, 5).bias == 31


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(exponent_bits=0, mantissa_bits=3), "exponent_bits must be an integer in 1..8"),
        (dict(exponent_bits=9, mantissa_bits=3), "exponent_bits must be an integer in 1..8"),
        (dict(exponent_bits=5, mantissa_bits=24), "mantissa_bits must be an integer in 0..23"),
        (dict(exponent_bits=5, mantissa_bits=2.5), "mantissa_bits must be an integer"),
        (dict(exponent_bits=5, mantissa_bits=2, nan="maybe"), "nan must be one of"),
        (dict(exponent_bits=5, mantissa_bits=2, overflow="wrap"), "overflow must be one of"),
        (dict(exponent_bits=5, mantissa_bits=2, inf=False, nan="ieee"), "nan=.ieee. has inf"),
        (dict(exponent_bits=5, mantissa_bits=2, signed=False, inf=False, nan="fnuz"),
         "needs a sign bit"),
        (dict(exponent_bits=8, mantissa_bits=1, signed=False, zero=False, inf=False, nan="fn",
              subnormals=False), "zero=False is for exponent-only"),
        (dict(exponent_bits=5, mantissa_bits=2, inf=False, nan="fn", overflow="inf"),
         "needs a format with inf"),
        (dict(exponent_bits=5, mantissa_bits=2, inf=False, nan="none", overflow="nan"),
         "needs a format with NaN"),
        (dict(exponent_bits=8, mantissa_bits=7, bias=100), "exceeds float32"),
        (dict(exponent_bits=8, mantissa_bits=7, bias=145), "below float32"),
        (dict(exponent_bits=1, mantissa_bits=3), "leave no normal numbers"),
    ],
)
def test_invalid_fields_raise_value_error_naming_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Format("bad", **kwargs)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("fp16", fpsim.FP16), ("half", fpsim.FP16), ("float16", fpsim.FP16),
        ("BF16", fpsim.BF16), ("bfloat16", fpsim.BF16), ("fp8_e4m3", fpsim.E4M3FN),
        ("e5m2", fpsim.E5M2), ("float8_e4m3fnuz", fpsim.E4M3FNUZ), ("tf32", fpsim.TF32),
        (np.float16, fpsim.FP16), (np.dtype(np.float32), fpsim.FP32),
        (ml_dtypes.bfloat16, fpsim.BF16), (ml_dtypes.float8_e4m3fn, fpsim.E4M3FN),
        (ml_dtypes.float4_e2m1fn, fpsim.E2M1FN),
    ],
)
def test_get_format_accepts_names_aliases_and_dtypes(key, expected):
    assert fpsim.get_format(key) is expected


def test_get_format_returns_a_format_unchanged():
    custom = Format("e3m3", 3, 3)
    assert fpsim.get_format(custom) is custom


@pytest.mark.parametrize("bad", ["fp17", "float64", np.float64, 3.5])
def test_get_format_rejects_unknown_input_listing_known_names(bad):
    with pytest.raises(ValueError, match="bfloat16"):
        fpsim.get_format(bad)


def test_formats_are_frozen_and_hashable():
    with pytest.raises(AttributeError):
        fpsim.FP16.mantissa_bits = 3  # type: ignore[misc]
    assert len({fpsim.FP16, Format("float16", 5, 10)}) == 1
