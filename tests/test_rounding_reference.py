"""fpsim.round on float32 input is bit-exact against ml_dtypes / numpy (oracle 1).

The full sweep of all 2^32 float32 bit patterns per format runs with
``FPSIM_FULL_SWEEP=1 python -m pytest tests/test_rounding_reference.py -k all_float32``
(about a minute per format here); the default suite checks 2^22 random patterns per format.
"""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest
from oracle import sample_points

import fpsim

ML_FORMATS = [f for f in fpsim.CATALOG
              if f.name not in ("tf32", "float32") and f not in fpsim.P3109_FORMATS]


def ml_round_trip(x: np.ndarray, fmt: fpsim.Format) -> np.ndarray:
    dtype = np.float16 if fmt.name == "float16" else getattr(ml_dtypes, fmt.name)
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(dtype).astype(np.float32)


def assert_bit_exact(x: np.ndarray, fmt: fpsim.Format) -> None:
    """Same bits as the reference; NaN payloads aside. ml_dtypes maps NaN to -0 in formats
    without NaN (e2m1fn, e2m3fn, e3m2fn), where fpsim keeps NaN visible (documented)."""
    got = fpsim.round(x, fmt)
    want = ml_round_trip(x, fmt)
    if not fmt.has_nan:
        want = np.where(np.isnan(x), np.nan, want).astype(np.float32)
    got_bits, want_bits = got.view(np.uint32), want.view(np.uint32)
    same = (got_bits == want_bits) | (np.isnan(got) & np.isnan(want))
    if not same.all():
        i = np.flatnonzero(~same)[:5]
        raise AssertionError(
            f"{fmt.name}: fpsim.round differs from the reference at x={x[i].tolist()}: "
            f"got {got[i].tolist()}, want {want[i].tolist()}"
        )


@pytest.mark.parametrize("fmt", ML_FORMATS, ids=lambda f: f.name)
def test_round_equals_reference_on_every_code_midpoint_and_neighbouring_ulp(fmt):
    assert_bit_exact(sample_points(fmt, np.float32), fmt)


@pytest.mark.parametrize("fmt", ML_FORMATS, ids=lambda f: f.name)
def test_round_equals_reference_on_random_float32_bit_patterns(fmt):
    rng = np.random.default_rng(2024)
    bits = rng.integers(0, 2**32, size=2**22, dtype=np.uint64).astype(np.uint32)
    assert_bit_exact(bits.view(np.float32), fmt)


def test_fp32_rounding_of_float64_equals_numpy_cast():
    rng = np.random.default_rng(7)
    x = np.concatenate([
        rng.standard_normal(10**5) * 10.0 ** rng.integers(-45, 39, 10**5),
        [3.5e38, -3.5e38, 1e-46, 7e-46, 0.0, -0.0, np.inf, np.nan],
    ])
    with np.errstate(over="ignore"):
        want = x.astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(fpsim.round(x, "fp32"), want)


def test_fp16_rounding_of_float64_equals_numpy_direct_cast():
    """numpy's float64 -> float16 cast rounds once, from the float64 value."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal(10**5) * 10.0 ** rng.integers(-9, 6, 10**5)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).astype(np.float64)
    np.testing.assert_array_equal(fpsim.round(x, "fp16"), want)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("FPSIM_FULL_SWEEP"), reason="set FPSIM_FULL_SWEEP=1")
@pytest.mark.parametrize("fmt", ML_FORMATS, ids=lambda f: f.name)
def test_round_equals_reference_on_all_float32_bit_patterns(fmt):
    chunk = 2**26
    for start in range(0, 2**32, chunk):
        bits = np.arange(start, start + chunk, dtype=np.uint64).astype(np.uint32)
        assert_bit_exact(bits.view(np.float32), fmt)
