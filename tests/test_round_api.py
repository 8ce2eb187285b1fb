"""fpsim.round as an API: dtypes, shapes, out=, scalars, and clear errors on bad input."""

from __future__ import annotations

import numpy as np
import pytest

import fpsim


def test_float32_in_float32_out_and_float64_in_float64_out():
    assert fpsim.round(np.ones(3, np.float32), "fp16").dtype == np.float32
    assert fpsim.round(np.ones(3), "fp16").dtype == np.float64


def test_other_numeric_input_is_rounded_as_float64():
    got = fpsim.round([1, 2049, 3], "fp16")
    assert got.dtype == np.float64 and got.tolist() == [1.0, 2048.0, 3.0]
    assert fpsim.round(np.array([True, False]), "fp16").tolist() == [1.0, 0.0]


def test_scalar_input_gives_a_scalar():
    got = fpsim.round(0.1, "bf16")
    assert np.ndim(got) == 0 and float(got) == 0.10009765625


def test_any_shape_and_non_contiguous_views_are_rounded_elementwise():
    x = np.random.default_rng(0).standard_normal((4, 5, 6)).astype(np.float32)
    view = x[:, ::2, 1:]
    got = fpsim.round(view, "fp16")
    assert got.shape == view.shape
    np.testing.assert_array_equal(got, view.astype(np.float16).astype(np.float32))


def test_out_receives_the_result_and_may_alias_the_input():
    x = np.float32([0.1, 70000.0, 1e-9])
    want = fpsim.round(x, "fp16")
    out = np.empty_like(x)
    assert fpsim.round(x, "fp16", out=out) is out
    np.testing.assert_array_equal(out, want)
    fpsim.round(x, "fp16", out=x)
    np.testing.assert_array_equal(x, want)


def test_out_works_for_non_contiguous_out_and_the_float64_detour():
    x = np.float32([2.0**-140, 1.0, 3.0])
    fmt = fpsim.Format("e8m7_bias140", 8, 7, bias=140)
    out = np.empty(6, np.float32)[::2]
    fpsim.round(x, fmt, out=out)
    np.testing.assert_array_equal(out, fpsim.round(x.astype(np.float64), fmt).astype(np.float32))


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (dict(fmt="fp17"), ValueError, "formats: float32"),
        (dict(mode="round_half_up"), ValueError, "known modes: nearest_even"),
        (dict(overflow="wrap"), ValueError, "overflow must be one of"),
        (dict(fmt="e4m3fn", overflow="inf"), ValueError, "needs a format with inf"),
        (dict(out=np.empty(2, np.float32)), ValueError, "out must be a numpy array of dtype"),
        (dict(out=np.empty(3, np.float64)), ValueError, "out must be a numpy array of dtype"),
        (dict(mode="stochastic", rng="seed"), TypeError, "rng must be None, a non-negative int"),
    ],
)
def test_bad_arguments_raise_clear_errors(kwargs, error, message):
    args = dict(fmt="fp16") | kwargs
    fmt = args.pop("fmt")
    with pytest.raises(error, match=message):
        fpsim.round(np.ones(3, np.float32), fmt, **args)


@pytest.mark.parametrize("bad", [np.array(["a", "b"]), np.array([object(), 1]), "1.5"])
def test_non_numeric_input_raises_type_error(bad):
    with pytest.raises(TypeError, match="must be numeric"):
        fpsim.round(bad, "fp16")


def test_modes_accept_enum_members_and_case_insensitive_names():
    x = np.float32([1.0001, 2.5])
    a = fpsim.round(x, "fp16", fpsim.RoundingMode.TOWARD_ZERO)
    b = fpsim.round(x, "fp16", "Toward_Zero")
    np.testing.assert_array_equal(a, b)


def test_monitor_counts_agree_on_the_serial_and_parallel_kernel_paths():
    """Arrays below fpsim._kernels.PARALLEL_MIN run serially, larger ones in chunks on threads;
    both must count what an independent numpy recount finds."""
    from fpsim._kernels import PARALLEL_MIN

    rng = np.random.default_rng(5)
    n = 3 * PARALLEL_MIN + 7
    big = (rng.standard_normal(n) * 10.0 ** rng.integers(-9, 6, n)).astype(np.float32)
    big[:4] = [np.nan, np.inf, -0.0, 1e30]
    for x in (big[: PARALLEL_MIN // 3], big):
        with fpsim.monitor() as m:
            got = fpsim.round(x, "fp16", site="s")
        c = m.counts["s"]
        finite = np.isfinite(x)
        assert c["elements"] == x.size
        assert c["inexact"] == np.sum(finite & (got != x))
        assert c["overflow"] == np.sum(finite & ~np.isfinite(got))
        assert c["underflow"] == np.sum(finite & (x != 0) & (got == 0))
        assert c["subnormal"] == np.sum((got != 0) & (np.abs(got) < fpsim.FP16.smallest_normal))
        assert c["nan_created"] == np.sum(~np.isnan(x) & np.isnan(got))


def test_monitor_counts_overflow_when_the_rounded_magnitude_exceeds_max():
    """Clamped and saturated results count as overflow; a value that rounds down to max does
    not (it is only inexact)."""
    cases = [
        ("fp16", "nearest_even", None, [65510.0, 65519.0], 0),
        ("fp16", "nearest_even", None, [65520.0, 1e6], 2),
        ("fp16", "toward_zero", None, [65530.0, 1e6, 65504.0], 1),  # 65530 truncates to max
        ("fp16", "toward_zero", None, [65536.0], 1),
        ("e4m3fn", "nearest_even", "saturate", [464.0, 465.0, 1e6], 2),
    ]
    for fmt, mode, overflow, values, want in cases:
        with fpsim.monitor() as m:
            fpsim.round(np.float32(values), fmt, mode, overflow=overflow, site="s")
        assert m.counts["s"]["overflow"] == want, (fmt, mode, overflow, values)
