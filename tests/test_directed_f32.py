"""The float32 directed-mode path (fpsim.kernels.directed_f32) computes the general kernel's
bits: every code, midpoint and neighbour of the catalog formats it serves, a strided sweep of
float32 bit patterns (every pattern with FPSIM_FULL_SWEEP=1), every directed mode, every
overflow policy, with and without subnormals; and fpsim.round takes it for large arrays."""

from __future__ import annotations

import os

import numpy as np
import pytest
from oracle import sample_points

import fpsim
from fpsim import _kernels
from fpsim.catalog import CATALOG
from fpsim.quantize import directed_f32_constants, format_constants
from fpsim.rounding import RoundingMode

_F32 = np.dtype(np.float32)
_MODES = sorted(_kernels.DIRECTED_F32_MODES, key=str)
_CASES = [
    (fmt, subnormals, policy)
    for fmt in CATALOG
    for subnormals in (True, False)
    for policy in ("inf", "saturate", "nan")
    if directed_f32_constants(fmt, subnormals, policy) is not None
]


def _general(x: np.ndarray, mode: RoundingMode, fmt: fpsim.Format, subnormals: bool,
             policy: str) -> np.ndarray:
    """The general kernel's answer (the oracle: it is itself checked against the spec)."""
    got = np.empty_like(x)
    f = format_constants(fmt, _F32, subnormals, policy)
    _kernels.round_range(x.view(np.int32), got.view(np.int32), 0, x.size,
                         _kernels.mode_bits(mode), 0, _kernels.carrier_constants(_F32), f)
    return got


def _directed(x: np.ndarray, mode: RoundingMode, p: _kernels.DirectedF32) -> np.ndarray:
    got = np.empty_like(x)
    _kernels.directed_f32_range(mode)(x, got, 0, x.size, p)
    return got


def _assert_same_bits(got: np.ndarray, want: np.ndarray, x: np.ndarray) -> None:
    bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    assert bad.size == 0, f"{bad.size} differ, e.g. x={x[bad[:4]]} got={got[bad[:4]]} " \
                          f"want={want[bad[:4]]}"


def test_the_directed_path_serves_every_catalog_format_it_can():
    served = {fmt.name for fmt, _, _ in _CASES}
    assert {"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"} <= served
    assert any(not subnormals for _, subnormals, _ in _CASES)  # flush-to-zero is served


# every mode x every served (format, subnormals, overflow policy): one parametrisation for the
# rounding and the counting comparison
def every_mode_and_case(test):
    by_case = pytest.mark.parametrize(
        ("fmt", "subnormals", "policy"), _CASES,
        ids=[f"{f.name}-{'sub' if s else 'ftz'}-{p}" for f, s, p in _CASES])
    return pytest.mark.parametrize("mode", _MODES, ids=str)(by_case(test))


@every_mode_and_case
def test_directed_f32_equals_the_general_kernel_on_every_code_midpoint_and_neighbour(
        fmt, subnormals, policy, mode):
    points = sample_points(fmt, np.float32)
    finite = points[np.isfinite(points)]
    with np.errstate(over="ignore"):
        x = np.concatenate([points, np.nextafter(finite, np.float32(np.inf)),
                            np.nextafter(finite, np.float32(-np.inf))]).astype(np.float32)
    p = directed_f32_constants(fmt, subnormals, policy)
    _assert_same_bits(_directed(x, mode, p), _general(x, mode, fmt, subnormals, policy), x)


@pytest.mark.parametrize("mode", _MODES, ids=str)
def test_directed_f32_equals_the_general_kernel_on_a_sweep_of_float32_bit_patterns(mode):
    """Every 4099th float32 pattern in each block (every one with FPSIM_FULL_SWEEP=1, or every
    FPSIM_SWEEP_STEP-th), so both signs, NaN payloads, inf and subnormals are hit; a few
    formats, policies and flush-to-zero."""
    step = int(os.environ.get("FPSIM_SWEEP_STEP", 1 if os.environ.get("FPSIM_FULL_SWEEP")
                              else 4099))
    block = 2**26  # patterns per block (16k of them in CI; 256 MiB with the full sweep)
    for name, subnormals, policy in [("fp16", True, "inf"), ("bf16", True, "saturate"),
                                     ("e4m3fn", True, "nan"), ("e5m2", False, "inf"),
                                     ("fp16", True, "nan")]:
        fmt = fpsim.get_format(name)
        p = directed_f32_constants(fmt, subnormals, policy)
        for lo in range(0, 2**32, block):
            x = np.arange(lo + 7 % step, lo + block, step, dtype=np.uint64).astype(
                np.uint32).view(np.float32)
            _assert_same_bits(_directed(x, mode, p), _general(x, mode, fmt, subnormals, policy),
                              x)


def test_directed_f32_rounds_in_place_and_only_its_range():
    x = np.float32([1.0 + 2.0**-11, -(1.0 + 2.0**-11), 3.3, -3.3, 7.7])
    p = directed_f32_constants(fpsim.FP16, True, "inf")
    y = x.copy()
    _kernels.directed_f32_range(RoundingMode.UP)(y, y, 1, 4, p)
    np.testing.assert_array_equal(y[[0, 4]], x[[0, 4]])
    np.testing.assert_array_equal(y[1:4], fpsim.round(x[1:4], "fp16", "up"))


@pytest.mark.parametrize("mode", _MODES, ids=str)
def test_fpsim_round_of_a_large_float32_array_in_a_directed_mode_matches_the_general_kernel(
        mode):
    x = (np.random.default_rng(8).standard_normal(_kernels.SPECIALISE_MIN + 5) * 1e4
         ).astype(np.float32)
    want = _general(x, mode, fpsim.FP16, True, "inf")
    _assert_same_bits(fpsim.round(x, "fp16", mode), want, x)
    out = np.empty_like(x)
    _assert_same_bits(fpsim.round(x, "fp16", mode, out=out), want, x)


@pytest.mark.parametrize(("fmt", "subnormals"), [
    (fpsim.get_format("float32"), True),  # as wide as the carrier
    (fpsim.get_format("float8_e8m0fnu"), False),  # no mantissa bits
    (fpsim.catalog.p3109(4, signed=False), True),  # unsigned
    (fpsim.BF16, False),  # flush-to-zero needs the binade below 2^-126
], ids=["float32", "e8m0", "unsigned", "bf16-ftz"])
def test_directed_f32_declines_formats_outside_its_domain(fmt, subnormals):
    assert directed_f32_constants(fmt, subnormals, "saturate") is None


def test_directed_f32_range_names_the_modes_it_serves_for_any_other():
    with pytest.raises(ValueError, match="nearest_even.*no float32 directed kernel.*toward_zero"):
        _kernels.directed_f32_range(RoundingMode.NEAREST_EVEN)


def test_fpsim_round_takes_the_directed_path_for_large_float32_arrays_counting_or_not(
        monkeypatch):
    calls: list[tuple[RoundingMode, bool]] = []
    real = _kernels.directed_f32_range

    def spy(mode: RoundingMode, counting: bool = False):
        calls.append((mode, counting))
        return real(mode, counting)

    monkeypatch.setattr(_kernels, "directed_f32_range", spy)
    x = np.linspace(-7e4, 7e4, _kernels.SPECIALISE_MIN, dtype=np.float32)
    with _kernels.lazy.eager_compiles():  # (no numpy stand-in)
        fpsim.round(x, "fp16", "down")
    assert calls == [(RoundingMode.DOWN, False)]
    fpsim.round(x[:1000], "fp16", "down")  # small arrays: the general kernel
    fpsim.round(x.astype(np.float64), "fp16", "down")  # float64: the general kernel
    assert calls == [(RoundingMode.DOWN, False)]
    with fpsim.monitor():  # counting: its counting twin
        fpsim.round(x, "fp16", "down")
    assert calls == [(RoundingMode.DOWN, False), (RoundingMode.DOWN, True)]


@every_mode_and_case
def test_the_counting_directed_kernel_rounds_and_counts_as_the_general_counting_kernel(
        fmt, subnormals, policy, mode):
    points = sample_points(fmt, np.float32)
    finite = points[np.isfinite(points)]
    rng = np.random.default_rng(11)
    patterns = rng.integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32).view(np.float32)
    with np.errstate(over="ignore"):
        x = np.concatenate([points, np.nextafter(finite, np.float32(np.inf)),
                            np.nextafter(finite, np.float32(-np.inf)), patterns,
                            np.float32([0.0, -0.0, np.inf, -np.inf, np.nan])]).astype(np.float32)
    got, want = np.empty_like(x), np.empty_like(x)
    p = directed_f32_constants(fmt, subnormals, policy)
    got_counts = _kernels.directed_f32_range(mode, counting=True)(x, got, 0, x.size, p)
    f = format_constants(fmt, _F32, subnormals, policy)
    want_counts = _kernels.round_count_range(x.view(np.int32), want.view(np.int32), 0, x.size,
                                             _kernels.mode_bits(mode), 0,
                                             _kernels.carrier_constants(_F32), f)
    _assert_same_bits(got, want, x)
    np.testing.assert_array_equal(got_counts, want_counts)


def test_a_monitored_large_float32_directed_call_takes_the_counting_directed_kernel(
        monkeypatch):
    calls: list[object] = []
    real = _kernels.run
    monkeypatch.setattr(_kernels, "run", lambda kernel, *a, **k: (calls.append(kernel),
                                                                   real(kernel, *a, **k))[1])
    x = np.linspace(-7e4, 7e4, _kernels.SPECIALISE_MIN, dtype=np.float32)
    with _kernels.lazy.eager_compiles(), fpsim.monitor() as mon:  # (no numpy stand-in)
        got = fpsim.round(x, "fp16", "up")
    assert calls == [_kernels.directed_f32_range(RoundingMode.UP, counting=True)]
    with fpsim.monitor() as mon_wide:  # float64 input: the general kernel counts
        want = fpsim.round(x.astype(np.float64), "fp16", "up")
    np.testing.assert_array_equal(got, want)
    assert mon.counts == mon_wide.counts
    assert mon.counts["round"]["overflow"] > 0
