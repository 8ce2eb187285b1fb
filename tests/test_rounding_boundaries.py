"""Named boundary cases: overflow thresholds, the subnormal edge, carries, directed clamping."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fpsim
from fpsim import Format, round_scalar
from fpsim.bits import classify

DIRECTED = ["toward_zero", "up", "down"]


def r(x, fmt, mode="nearest_even", **kw):
    return float(fpsim.round(np.float64(x), fmt, mode, **kw))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fp16_overflow_threshold_is_max_plus_half_an_ulp(dtype):
    x = np.array([65519.99, 65520.0, -65520.0, 65535.0, 65536.0], dtype=dtype)
    np.testing.assert_array_equal(fpsim.round(x, "fp16"), [65504, np.inf, -np.inf, np.inf, np.inf])


def test_e4m3fn_ties_to_max_at_464_and_overflows_to_nan_above():
    assert r(464, "e4m3fn") == 448.0
    assert math.isnan(r(465, "e4m3fn")) and math.isnan(r(np.inf, "e4m3fn"))
    assert r(465, "e4m3fn", overflow="saturate") == 448.0
    assert r(-1e9, "e4m3fn", overflow="saturate") == -448.0
    assert r(np.inf, "e4m3fn", overflow="saturate") == 448.0


def test_e5m2_is_ieee_style_with_inf():
    assert r(57344, "e5m2") == 57344.0 and r(61439, "e5m2") == 57344.0
    assert r(61440, "e5m2") == math.inf


def test_fnuz_formats_have_no_negative_zero():
    for x in (-0.0, -1e-30):
        got = r(x, "e4m3fnuz")
        assert got == 0 and math.copysign(1, got) == 1


def test_formats_without_nan_saturate_and_keep_nan_visible_in_the_carrier():
    assert r(100.0, "e2m1fn") == 6.0 and r(-np.inf, "e2m1fn") == -6.0
    assert math.isnan(r(np.nan, "e2m1fn"))


@pytest.mark.parametrize("fmt", [fpsim.FP16, fpsim.BF16, fpsim.E4M3FN, fpsim.E5M2],
                         ids=lambda f: f.name)
def test_half_the_smallest_subnormal_rounds_to_zero_and_anything_above_to_it(fmt):
    tiny = fmt.smallest_subnormal
    assert r(tiny / 2, fmt) == 0.0
    assert r(-tiny / 2, fmt) == 0.0 and math.copysign(1, r(-tiny / 2, fmt)) == -1
    assert r(tiny / 2 * (1 + 2**-20), fmt) == tiny
    assert r(tiny * 1.5, fmt) == 2 * tiny  # tie between 1 and 2 subnormal steps: even is 2


def test_rounding_carries_from_the_subnormal_range_into_the_smallest_normal():
    fmt = fpsim.FP16
    top_subnormal = fmt.smallest_normal - fmt.smallest_subnormal
    x = top_subnormal + 0.75 * fmt.smallest_subnormal
    assert r(x, fmt) == fmt.smallest_normal
    assert classify(np.float32(r(x, fmt)), fmt) == "normal"


def test_rounding_carries_into_the_next_binade():
    assert r(2047.5, "fp16") == 2048.0 and r(1.99999, "bf16") == 2.0


@pytest.mark.parametrize("fmt", [fpsim.FP16, fpsim.E5M2, fpsim.E4M3, fpsim.BF16],
                         ids=lambda f: f.name)
def test_directed_modes_never_create_inf_from_finite_input_when_rounding_toward_zero(fmt):
    big = fmt.max * 1.9 if fmt.max * 1.9 < 3.4e38 else 3.4e38
    assert r(big, fmt, "toward_zero") == fmt.max and r(-big, fmt, "toward_zero") == -fmt.max
    assert r(big, fmt, "down") == fmt.max and r(-big, fmt, "up") == -fmt.max
    assert r(big, fmt, "up") == math.inf and r(-big, fmt, "down") == -math.inf


def test_flush_to_zero_sends_the_subnormal_range_to_signed_zero():
    """Flush-to-zero rounds at full precision first: [min_normal/2, min_normal) goes to 0,
    except values so close to min_normal that they round up to it."""
    fmt = fpsim.FP16
    mn = fmt.smallest_normal
    for x in (mn / 2, mn * 0.75, mn * (1 - 2**-10)):
        assert r(x, fmt, subnormals=False) == 0.0
        assert math.copysign(1, r(-x, fmt, subnormals=False)) == -1
    assert r(mn * (1 - 2**-13), fmt, subnormals=False) == mn
    assert r(mn, fmt, subnormals=False) == mn


def test_nan_stays_nan_and_signed_zero_and_inf_pass_through():
    x = np.array([np.nan, 0.0, -0.0, np.inf, -np.inf], np.float32)
    for mode in fpsim.MODE_NAMES:
        got = fpsim.round(x, "fp16", mode, rng=0)
        assert np.isnan(got[0])
        assert got[1] == 0 and not np.signbit(got[1]) and np.signbit(got[2])
        assert got[3] == np.inf and got[4] == -np.inf


@pytest.mark.parametrize("mode", ["odd", "stochastic", "nearest_away", "up"])
def test_modes_that_round_away_overflow_by_the_format_policy(mode):
    assert r(70000.0, "fp16", mode, rng=1) == math.inf
    assert math.isnan(r(500.0, "e4m3fn", mode, rng=1))


def test_round_scalar_documents_the_seed_demos():
    assert round_scalar(256.0**2, "fp16") == math.inf
    assert round_scalar(1e-5**2, "fp16") == 0.0
    assert round_scalar(65519.99, Format("fp16", 5, 10)) == 65504.0
