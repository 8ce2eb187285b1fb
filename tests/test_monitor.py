"""fpsim.monitor: per-site counts of elements rounded and of numerics events.

Oracle: an independent recount with numpy, rounding by numpy's float16 cast or ml_dtypes' casts
(bit-exact references for float32 input) and comparing input and output elementwise.
"""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from strategies import float32_arrays

import fpsim
from fpsim.monitor import EVENTS

CAST = {
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
}


def reference_round(x: np.ndarray, fmt: fpsim.Format) -> np.ndarray:
    """x rounded to fmt by the reference cast (numpy float16: directly from float64)."""
    with np.errstate(all="ignore"):
        if fmt.name == "float16":
            return np.asarray(x, dtype=np.float64).astype(np.float16).astype(np.float64)
        return np.asarray(x, dtype=np.float32).astype(CAST[fmt.name]).astype(np.float64)


def recount(x: np.ndarray, r: np.ndarray, fmt: fpsim.Format) -> dict[str, int]:
    """The events of rounding x to r (in fmt), counted elementwise with numpy."""
    x = np.asarray(x, dtype=np.float64)
    finite = np.isfinite(x)
    ar = np.abs(r)
    return {
        "elements": x.size,
        "inexact": int(np.sum(finite & ~(r == x))),
        # nearest-even into formats that overflow to inf or NaN: overflow means a non-finite
        # result (464 -> 448 in e4m3fn is a tie to the even max, not an overflow)
        "overflow": int(np.sum(finite & ~np.isfinite(r))),
        "underflow": int(np.sum(finite & (x != 0) & (r == 0))),
        "subnormal": int(np.sum((r != 0) & (ar < fmt.smallest_normal))),
        "nan_created": int(np.sum(~np.isnan(x) & np.isnan(r))),
    }


@pytest.mark.parametrize("fmt", list(CAST))
@given(x=float32_arrays())
def test_counts_equal_an_independent_numpy_recount(fmt: str, x: np.ndarray):
    f = fpsim.get_format(fmt)
    with fpsim.monitor() as m:
        fpsim.round(x, f, site="x")
    if x.size == 0:
        assert m.counts.get("x", {"elements": 0})["elements"] == 0
        return
    assert m.counts["x"] == recount(x, reference_round(x, f), f)


@given(x=float32_arrays(), y=float32_arrays())
def test_an_operation_counts_the_rounding_of_its_exact_result(x: np.ndarray, y: np.ndarray):
    n = min(x.size, y.size)
    a = fpsim.array(x[:n], "fp16")
    b = fpsim.array(y[:n], "fp16")
    with fpsim.monitor() as m:
        a * b
    with np.errstate(all="ignore"):
        exact = a.numpy().astype(np.float64) * b.numpy().astype(np.float64)  # exact in float64
    got = m.counts.get("multiply", {"elements": 0})
    if n:
        assert got == recount(exact, reference_round(exact, fpsim.FP16), fpsim.FP16)


def test_counts_are_per_site_and_sites_name_the_operation():
    with fpsim.monitor() as m:
        fpsim.round(np.float32([1e-9, 1.0]), "fp16", site="grads")
        fpsim.round(np.float32([1e9]), "fp16", site="activations")
        fpsim.round(np.float32([0.1]), "bf16")
        a = fpsim.array([1.0, 2.0], "fp16")
        b = a + 0.1
        _ = a * b, a @ b, a.sum(), np.exp(a)
    assert m.counts["grads"]["underflow"] == 1 and m.counts["grads"]["elements"] == 2
    assert m.counts["activations"]["overflow"] == 1
    assert m.counts["round"]["elements"] == 1  # fpsim.round's default site
    for site in ["array", "cast", "add", "multiply", "matmul", "sum", "exp"]:
        assert site in m.counts, site
    assert m.formats["grads"] == "float16" and m.formats["round"] == "bfloat16"


def test_an_inactive_monitor_changes_neither_results_nor_counts():
    x = np.random.default_rng(0).standard_normal(10_000).astype(np.float32) * 1e4
    plain = fpsim.round(x, "e4m3fn")
    m = fpsim.monitor()
    assert not m.active
    assert np.array_equal(fpsim.round(x, "e4m3fn"), plain, equal_nan=True)
    assert m.counts == {}
    with m:
        counted = fpsim.round(x, "e4m3fn")
    assert np.array_equal(counted, plain, equal_nan=True)
    before = json.dumps(m.counts, sort_keys=True)
    fpsim.round(x, "e4m3fn")
    fpsim.array(x, "fp16") * 2
    assert json.dumps(m.counts, sort_keys=True) == before


def test_nested_monitors_both_count():
    x = np.float32([1e-9, 70000.0, 1.0])
    with fpsim.monitor() as outer:
        fpsim.round(x, "fp16", site="s")
        with fpsim.monitor() as inner:
            fpsim.round(x, "fp16", site="s")
    assert outer.counts["s"]["elements"] == 6 and outer.counts["s"]["overflow"] == 2
    assert inner.counts["s"]["elements"] == 3 and inner.counts["s"]["underflow"] == 1


def test_start_stop_without_with_and_reset():
    m = fpsim.monitor().start()
    fpsim.round(np.float32([1e-9]), "fp16", site="s")
    m.stop()
    assert m.counts["s"]["underflow"] == 1 and not m.active
    m.reset()
    assert m.counts == {}
    m.start()
    m.start()  # idempotent: counts once
    fpsim.round(np.float32([1e-9]), "fp16", site="s")
    m.stop()
    assert m.counts["s"]["elements"] == 1


def test_counts_is_a_plain_dict_and_summary_is_a_table_with_shares():
    with fpsim.monitor() as m:
        fpsim.round(np.float32([1e-9, 1e-9, 1.0, 3.0]), "fp16", site="grads")
        fpsim.round(np.float32([1e6]), "fp16", site="acts")
    assert type(m.counts) is dict and json.loads(json.dumps(m.counts)) == m.counts
    table = m.summary()
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["site", "format", "elements"]
    assert all(event in lines[0] for event in EVENTS)
    grads = next(line for line in lines if line.startswith("grads"))
    assert "2 (50.00%)" in grads  # 2 of 4 elements underflowed
    assert any(line.startswith("total") for line in lines)
    assert str(m) == table
    assert "nothing" in fpsim.monitor().summary()


@pytest.mark.parametrize("bad", [3, b"x", ("a",)])
def test_a_site_that_is_not_a_string_is_refused_naming_site(bad):
    with pytest.raises(ValueError, match="site must be a string naming the call"):
        fpsim.round(1.1, "fp16", site=bad)


def test_a_numpy_string_site_is_counted_under_its_str():
    with fpsim.monitor() as m:
        fpsim.round(np.float32([1.1, 2.2]), "fp16", site=np.str_("w"))
    assert list(m.counts) == ["w"] and type(next(iter(m.counts))) is str
