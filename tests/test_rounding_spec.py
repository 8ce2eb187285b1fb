"""fpsim.round equals the specification in every mode (oracle 2), exhaustively where small.

Every finite value of every <= 16-bit catalog format and of custom formats, every midpoint
between neighbours and one carrier ulp either side of it (float32 and float64 carriers), in
each deterministic mode, against the table oracle (tests/oracle.py), which the pure-Python
round_scalar is itself checked against. Flush-to-zero, float64 double-rounding traps and the
formats too large to tabulate (fp32, tf32) are checked against round_scalar directly.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import same_values as same
from oracle import sample_points, table_round
from strategies import DETERMINISTIC_MODES, SMALL_CATALOG

import fpsim
from fpsim import Format, _kernels, round_scalar
from fpsim.quantize import format_constants, nearest_even_f32_constants

CUSTOM = [
    Format("e3m2", 3, 2),
    Format("e5m3_saturating", 5, 3, overflow="saturate"),
    Format("e4m2_fn", 4, 2, inf=False, nan="fn"),
    Format("e6m1_fnuz", 6, 1, bias=40, inf=False, nan="fnuz"),
    Format("e2m0_none", 2, 0, inf=False, nan="none"),
    Format("e3m0_ieee", 3, 0),
    Format("e3m0_bias2", 3, 0, bias=2),  # even bias: tie parity is not float32's exponent bit
    Format("e8m7_bias140", 8, 7, bias=140),  # reaches below float32's normal range
    Format("e5m10_saturating", 5, 10, overflow="saturate"),
]
# E8M0FNU rounds by ml_dtypes' rule (its tie goes up), checked in tests/test_e8m0.py instead
SMALL = [f for f in SMALL_CATALOG if f.zero] + CUSTOM


def assert_same(x, got, want, what: str) -> None:
    ok = same(got, want)
    if not ok.all():
        i = np.flatnonzero(~ok)[:5]
        raise AssertionError(f"{what}: at x={np.asarray(x)[i].tolist()} got "
                             f"{np.asarray(got)[i].tolist()}, want {np.asarray(want)[i].tolist()}")


@pytest.mark.parametrize("mode", DETERMINISTIC_MODES)
@pytest.mark.parametrize("fmt", SMALL, ids=lambda f: f.name)
def test_round_float32_equals_table_oracle_on_every_code_and_midpoint(fmt, mode):
    x = sample_points(fmt, np.float32)
    assert_same(x, fpsim.round(x, fmt, mode), table_round(x, fmt, mode), f"{fmt.name} {mode}")


@pytest.mark.parametrize("mode", DETERMINISTIC_MODES)
@pytest.mark.parametrize("fmt", SMALL, ids=lambda f: f.name)
def test_round_float64_equals_table_oracle_one_float64_ulp_around_every_tie(fmt, mode):
    x = sample_points(fmt, np.float64)
    got = fpsim.round(x, fmt, mode)
    assert got.dtype == np.float64
    assert_same(x, got, table_round(x, fmt, mode), f"{fmt.name} {mode} float64")


@pytest.mark.parametrize("mode", DETERMINISTIC_MODES)
@pytest.mark.parametrize("fmt", [fpsim.FP16, fpsim.E4M3FN, fpsim.E2M1FN, CUSTOM[3]],
                         ids=lambda f: f.name)
def test_table_oracle_agrees_with_round_scalar(fmt, mode):
    x = sample_points(fmt, np.float64)
    x = x[np.random.default_rng(1).choice(x.size, min(x.size, 400), replace=False)]
    want = [round_scalar(v, fmt, mode) for v in x]
    assert_same(x, table_round(x, fmt, mode), want, f"{fmt.name} {mode} table vs spec")


def random_values(n: int, lo_exp: int, hi_exp: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mags = rng.uniform(1, 2, n) * 2.0 ** rng.integers(lo_exp, hi_exp, n)
    return np.where(rng.random(n) < 0.5, -mags, mags)


@pytest.mark.parametrize("mode", DETERMINISTIC_MODES)
@pytest.mark.parametrize("fmt", [fpsim.FP32, fpsim.TF32, fpsim.BF16], ids=lambda f: f.name)
def test_round_equals_round_scalar_for_wide_exponent_formats(fmt, mode):
    x64 = random_values(1500, -152, 130)
    x64[:20] = [2.0**-150, 2.0**-149 * 1.5, -(2.0**-149) * 0.75, 2.0**-126 * (1 - 2**-30),
                3.4e38, 3.41e38, -3.5e38, 1e-46, 2.0**-133 * 1.5, 2.0**-134, 0.0, -0.0,
                np.inf, -np.inf, np.nan, 1.0, 1 + 2.0**-24, 1 + 2.0**-11, 1 + 2.0**-8, 2.5]
    with np.errstate(over="ignore"):  # the float32 copy turns values beyond its range to inf
        x32 = x64.astype(np.float32)
    for x in (x64, x32):
        want = [round_scalar(v, fmt, mode) for v in x]
        assert_same(x, fpsim.round(x, fmt, mode), want, f"{fmt.name} {mode} {x.dtype}")


FTZ = [Format("fp16_ftz", 5, 10, subnormals=False), Format("bf16_ftz", 8, 7, subnormals=False),
       Format("e4m3fn_ftz", 4, 3, inf=False, nan="fn", subnormals=False),
       Format("e2m1_ftz", 2, 1, inf=False, nan="none", subnormals=False)]


@pytest.mark.parametrize("mode", DETERMINISTIC_MODES)
@pytest.mark.parametrize("fmt", FTZ, ids=lambda f: f.name)
def test_flush_to_zero_equals_round_scalar(fmt, mode):
    x = np.concatenate([
        sample_points(fmt.replace(subnormals=True), np.float64)[::97],
        random_values(300, fmt.emin - 4, fmt.emin + 2, seed=3),
    ])
    with np.errstate(over="ignore"):
        x32 = x.astype(np.float32)
    for arr in (x, x32):
        want = [round_scalar(v, fmt, mode) for v in arr]
        assert_same(arr, fpsim.round(arr, fmt, mode), want, f"{fmt.name} {mode}")
        # the keyword does the same to the subnormal-keeping format
        base = fmt.replace(subnormals=True)
        assert_same(arr, fpsim.round(arr, base, mode, subnormals=False), want, "keyword")


@pytest.mark.parametrize("mode", DETERMINISTIC_MODES)
@pytest.mark.parametrize("overflow", ["saturate", "nan"])
def test_overflow_override_equals_round_scalar(mode, overflow):
    x = sample_points(fpsim.E5M2, np.float64)
    want = [round_scalar(v, fpsim.E5M2, mode, overflow=overflow) for v in x]
    assert_same(x, fpsim.round(x, "e5m2", mode, overflow=overflow), want, f"{mode} {overflow}")


@pytest.mark.parametrize(
    ("x", "fmt", "want"),
    [
        (1 + 2**-8 + 2**-40, "bf16", 1.0078125),  # ml_dtypes gives 1.0 (double rounding)
        (2**-10 + 2**-40, "e4m3fn", 2**-9),  # ml_dtypes gives 0
        (1 + 2**-11 + 2**-50, "fp16", 1 + 2**-10),
        (1 + 2**-11 - 2**-50, "fp16", 1.0),
        (65520 - 2**-30, "fp16", 65504.0),
    ],
)
def test_float64_input_is_rounded_once_from_its_own_bits(x, fmt, want):
    assert fpsim.round(np.float64(x), fmt) == want
    assert round_scalar(x, fmt) == want


def test_round_to_odd_without_mantissa_bits_steps_to_the_odd_exponent_field():
    """Found by the thorough profile: with M = 0 the odd neighbour can be the next binade."""
    fmt = Format("e2m0_bias0_ftz", 2, 0, bias=0, subnormals=False)
    for x in (np.float32(1.5), np.float64(1.5)):
        assert fpsim.round(x, fmt, "odd") == round_scalar(1.5, fmt, "odd") == 2.0


def fast_vs_general(x: np.ndarray, fmt: Format, p: tuple) -> np.ndarray:
    """The float32 nearest-even fast path (plain and counting, on two blocks and on one)
    against the general kernel and its counting twin: equal bits, equal event counts. Returns
    the fast path's result."""
    f32 = np.dtype(np.float32)
    c, f = _kernels.carrier_constants(f32), format_constants(fmt, f32, True, fmt.overflow)
    m = _kernels.mode_bits(fpsim.RoundingMode.NEAREST_EVEN)
    fast, serial, counted, general = (np.empty_like(x) for _ in range(4))
    half = x.size // 2
    for lo, hi in ((0, half), (half, x.size)):
        _kernels.round_nearest_even_f32_range(x, fast, lo, hi, p)
    _kernels.round_nearest_even_f32_range(x, serial, 0, x.size, p)
    fast_counts = _kernels.count_nearest_even_f32_range(x, counted, 0, x.size, p)
    general_counts = _kernels.round_count_range(x.view(np.int32), general.view(np.int32), 0,
                                                x.size, m, 0, c, f)
    for got, what in ((fast, "fast path"), (serial, "serial fast path"),
                      (counted, "counting fast path")):
        bad = np.flatnonzero(got.view(np.int32) != general.view(np.int32))[:5]
        assert bad.size == 0, (f"{fmt.name} {what} vs general kernel at x={x[bad].tolist()}: "
                               f"{got[bad].tolist()} != {general[bad].tolist()}")
    assert fast_counts.tolist() == general_counts.tolist(), fmt.name
    return fast


FAST_PATH_FORMATS = [f for f in [*fpsim.CATALOG, *CUSTOM]
                     if nearest_even_f32_constants(f, True, f.overflow) is not None]


@pytest.mark.parametrize("fmt", SMALL, ids=lambda f: f.name)
def test_float32_nearest_even_fast_path_equals_the_general_kernel(fmt):
    """fpsim.round dispatches float32 nearest-even to a cheaper kernel where it applies; the
    general per-mode kernel (used for other modes and float64) must agree, and so must the two
    kernels' event counts (an active monitor)."""
    x = sample_points(fmt, np.float32)
    p = nearest_even_f32_constants(fmt, True, fmt.overflow)
    if p is None:
        pytest.skip(f"{fmt.name}: the fast path does not apply")
    fast = fast_vs_general(x, fmt, p)
    assert_same(x, fast, table_round(x, fmt, "nearest_even"), f"{fmt.name} fast path vs table")


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FAST_PATH_FORMATS, ids=lambda f: f.name)
def test_float32_nearest_even_fast_path_equals_the_general_kernel_on_all_bit_patterns(fmt):
    """Every float32 bit pattern (FPSIM_FULL_SWEEP=1, ~1 min a format); by default every 61st,
    from a different offset in each of the 64 slices, which still crosses every binade."""
    step = 1 if os.environ.get("FPSIM_FULL_SWEEP") else 61
    chunk = 2**26
    p = nearest_even_f32_constants(fmt, True, fmt.overflow)
    for k, start in enumerate(range(0, 2**32, chunk)):
        bits = np.arange(start + k % step, start + chunk, step, dtype=np.uint64)
        fast_vs_general(bits.astype(np.uint32).view(np.float32), fmt, p)
