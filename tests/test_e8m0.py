"""E8M0FNU (the OCP MX scale) against ml_dtypes' float8_e8m0fnu, and against the spec in every
rounding mode (fpsim.rounding's module docstring states the rule)."""

from __future__ import annotations

import math
import os
from functools import partial

import ml_dtypes
import numpy as np
import pytest
from helpers import same_values

import fpsim
from fpsim import E8M0FNU, round_scalar

same = partial(same_values, signed_zeros=False)  # (E8M0 has no sign: values only)

E8M0 = ml_dtypes.float8_e8m0fnu


def ml(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.asarray(x, np.float32).astype(E8M0).astype(np.float32)


def test_every_e8m0_code_decodes_as_ml_dtypes_decodes_it():
    codes = np.arange(256, dtype=np.uint8)
    assert same(fpsim.from_bits(codes, E8M0FNU), codes.view(E8M0).astype(np.float32)).all()


def test_every_finite_e8m0_value_encodes_to_its_ml_dtypes_code():
    codes = np.arange(255, dtype=np.uint8)
    values = codes.view(E8M0).astype(np.float32)
    assert np.array_equal(fpsim.to_bits(values, E8M0FNU), codes)


def test_e8m0_fields_are_unsigned_exponent_only_without_zero():
    assert (E8M0FNU.bits, E8M0FNU.max, E8M0FNU.smallest_normal) == (8, 2.0**127, 2.0**-127)
    assert not E8M0FNU.signed and not E8M0FNU.zero and not E8M0FNU.has_negative_zero
    assert len(fpsim.values(E8M0FNU)) == 255 and 0 not in fpsim.values(E8M0FNU)


def _float32_sweep() -> np.ndarray:
    """Every 997th float32 bit pattern (both signs, every exponent), every tie 1.5 * 2^k and
    its neighbours, and the subnormals around 2^-127."""
    stride = np.arange(0, 2**32, 997, dtype=np.uint64).astype(np.uint32)
    ties = (np.arange(0, 255, dtype=np.uint32) << 23) | (1 << 22)
    sub = np.arange(0, 1 << 23, 4099, dtype=np.uint32)
    near = np.array([1, (1 << 22) - 1, 1 << 22, (1 << 22) + 1, (1 << 23) - 1], np.uint32)
    bits = np.concatenate([stride, ties, ties + 1, ties - 1, sub, near, near | (1 << 31)])
    return bits.view(np.float32)


def test_round_to_e8m0_equals_ml_dtypes_on_a_sweep_of_float32_patterns():
    x = _float32_sweep()
    got = fpsim.round(x, E8M0FNU)
    ok = same(got, ml(x))
    assert ok.all(), (x[~ok][:5], got[~ok][:5], ml(x)[~ok][:5])


@pytest.mark.skipif(not os.environ.get("FPSIM_FULL_SWEEP"), reason="set FPSIM_FULL_SWEEP=1")
def test_round_to_e8m0_equals_ml_dtypes_on_every_float32_pattern():
    """All 2^32 float32 bit patterns, in chunks (a few minutes):
    ``FPSIM_FULL_SWEEP=1 python -m pytest tests/test_e8m0.py -k every_float32``."""
    chunk = 1 << 26
    for start in range(0, 1 << 32, chunk):
        x = np.arange(start, start + chunk, dtype=np.uint64).astype(np.uint32).view(np.float32)
        got = fpsim.round(x, E8M0FNU)
        ok = same(got, ml(x))
        assert ok.all(), (x[~ok][:5], got[~ok][:5], ml(x)[~ok][:5])


@pytest.mark.parametrize(
    ("x", "want"),
    [(3.0, 4.0), (1.5, 2.0), (6.0, 8.0), (5.0, 4.0), (2.9999998, 2.0),
     (1.01 * 2.0**-127, 2.0**-126), (2.0**-127, 2.0**-127), (2.0**-149, 2.0**-127),
     (1.4 * 2.0**127, 2.0**127), (1.5 * 2.0**127, math.nan), (0.0, math.nan),
     (-0.0, math.nan), (-1.0, math.nan), (math.inf, math.nan), (-math.inf, math.nan)],
)
def test_ml_dtypes_rule_tie_goes_up_lowest_binade_goes_up_and_non_positive_is_nan(x, want):
    assert same(ml(np.float32([x])), [want]).all()  # the claim, checked on ml_dtypes itself
    assert same(fpsim.round(np.float32([x]), E8M0FNU), [want]).all()
    assert same([round_scalar(float(np.float32(x)), E8M0FNU)], [want]).all()


def _points() -> np.ndarray:
    pos = 2.0 ** np.arange(-140, 129, dtype=np.float64)
    frac = np.array([1.0, 1.25, 1.5, 1.5 + 2**-30, 1.75, 1.9999])
    pts = np.outer(pos, frac).ravel()
    return np.concatenate([pts, [0.0, -1.0, np.inf, np.nan, 1.01 * 2.0**-127]])


@pytest.mark.parametrize("mode", fpsim.MODE_NAMES)
def test_round_to_e8m0_equals_the_spec_in_every_mode(mode):
    x = _points()
    got = fpsim.round(x, E8M0FNU, mode, rng=1)
    low = [round_scalar(v, E8M0FNU, mode, u=0.0) for v in x]
    high = [round_scalar(v, E8M0FNU, mode, u=1 - 2**-53) for v in x]
    ok = same(got, low) | same(got, high)
    assert ok.all(), (x[~ok][:5], got[~ok][:5])


def test_directed_modes_never_leave_e8m0_range_and_raise_tiny_values_to_the_smallest():
    x = np.array([2.0**-140, 3.0, 2.0**128])
    assert fpsim.round(x, E8M0FNU, "toward_zero").tolist() == [2.0**-127, 2.0, 2.0**127]
    assert fpsim.round(x, E8M0FNU, "up")[:2].tolist() == [2.0**-127, 4.0]
    assert np.isnan(fpsim.round(x, E8M0FNU, "up")[2])


def test_monitor_counts_nan_created_from_non_positive_input_to_e8m0():
    with fpsim.monitor() as m:
        fpsim.round(np.float32([0.0, -1.0, 3.0, 3e38]), E8M0FNU, site="s")
    assert (m.counts["s"]["nan_created"], m.counts["s"]["overflow"]) == (3, 1)


def test_e8m0_refuses_subnormals_true_and_names_neighbours_of_a_non_value():
    with pytest.raises(ValueError, match="subnormals=True needs a format with zero"):
        fpsim.round(np.float32([1.0]), E8M0FNU, subnormals=True)
    with pytest.raises(ValueError, match="between 2.0 and 4.0"):
        fpsim.to_bits(3.0, E8M0FNU)


@pytest.mark.parametrize("zero", [0.0, -0.0])
def test_to_bits_of_zero_says_e8m0_has_no_zero(zero):
    with pytest.raises(ValueError, match=r"float8_e8m0fnu: it has no zero .*2\^-127") as info:
        fpsim.to_bits(zero, E8M0FNU)
    assert "nan" not in str(info.value)


@pytest.mark.parametrize("negative", [-1.0, -3.0, -(2.0**-127)])
def test_to_bits_of_a_negative_number_says_the_format_is_unsigned(negative):
    with pytest.raises(ValueError, match=r"it is unsigned .*no negative numbers") as info:
        fpsim.to_bits(negative, E8M0FNU)
    assert "nan" not in str(info.value)
    with pytest.raises(ValueError, match=r"binary8p4ue: it is unsigned \(values 0.0 \.\."):
        fpsim.to_bits(negative, fpsim.p3109(4, signed=False))
