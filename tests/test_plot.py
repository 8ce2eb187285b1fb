"""fpsim.plot: headless figures whose artists reflect the data.

Oracles: every code of fp16 / fp8 decoded by numpy and ml_dtypes; numpy float16 casts.
"""

from __future__ import annotations

import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import fpsim  # noqa: E402


@pytest.fixture(autouse=True)
def _no_show_and_close(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("plot helpers must not call show()")

    monkeypatch.setattr(plt, "show", refuse)
    yield
    plt.close("all")


def all_finite_values(dtype: type, bits: int) -> np.ndarray:
    codes = np.arange(2**bits, dtype=np.uint16 if bits == 16 else np.uint8).view(dtype)
    v = codes.astype(np.float64)
    return np.unique(v[np.isfinite(v)])  # one zero (-0 == 0)


@pytest.mark.parametrize(
    ("fmt", "dtype", "bits", "lo", "hi"),
    [("fp16", np.float16, 16, -2.0, 3.0), ("fp16", np.float16, 16, 0.0, 2.0**-12),
     ("e4m3fn", ml_dtypes.float8_e4m3fn, 8, -500.0, 500.0),
     ("e5m2", ml_dtypes.float8_e5m2, 8, 0.001, 1.0)],
)
def test_number_line_draws_one_point_per_value_in_range(fmt, dtype, bits, lo, hi):
    values = all_finite_values(dtype, bits)
    expected = values[(values >= lo) & (values <= hi)]
    ax = fpsim.plot.number_line(fmt, lo, hi)
    offsets = np.concatenate([c.get_offsets()[:, 0] for c in ax.collections])
    assert offsets.size == expected.size
    assert np.array_equal(np.sort(offsets), expected)
    f = fpsim.get_format(fmt)
    labels = [c.get_label() for c in ax.collections]
    n_sub = int(np.sum((expected != 0) & (np.abs(expected) < f.smallest_normal)))
    if n_sub:
        assert f"subnormal ({n_sub})" in labels
    assert ax.get_title() and ax.get_xlabel()
    assert isinstance(ax.figure, matplotlib.figure.Figure)


def test_values_in_range_of_a_wide_format_counts_the_grid():
    # fp32 has 2^23 values in [1, 2); [1, 1 + 2^-13] holds 2^10 + 1 of them
    assert fpsim.plot.values_in_range("fp32", 1.0, 1 + 2.0**-13).size == 2**10 + 1
    with pytest.raises(ValueError, match="narrow"):
        fpsim.plot.values_in_range("fp32", 1.0, 2.0)


def test_exponent_histogram_counts_every_non_zero_value_and_reports_underflow():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(5000) * 1e-6, [0.0, np.inf, 1e6]])
    ax = fpsim.plot.exponent_histogram(x, "fp16")
    (bars,) = ax.containers  # the histogram's bars (the shaded zones are separate patches)
    heights = [p.get_height() for p in bars]
    finite_nonzero = x[np.isfinite(x) & (x != 0)]
    assert sum(heights) == finite_nonzero.size
    with np.errstate(over="ignore"):
        r = finite_nonzero.astype(np.float16)  # numpy's float64 -> float16 cast rounds once
    under = np.mean(r == 0)
    over = np.mean(np.isinf(r))
    assert f"{under:.1%} underflow" in ax.get_title()
    assert f"{over:.1%} overflow" in ax.get_title()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"underflow to 0", "subnormal", "normal range", "overflow"} <= set(legend)
    assert ax.get_xlabel() == "log2 |x|"


def test_rounding_error_is_the_rounded_minus_the_exact_value():
    ax = fpsim.plot.rounding_error("e4m3fn", 0.0, 4.0, n=801)
    line = ax.get_lines()[0]
    x, err = line.get_xdata(), line.get_ydata()
    assert x.size == 801
    expected = x.astype(np.float32).astype(ml_dtypes.float8_e4m3fn).astype(np.float64) - x
    assert np.array_equal(err, expected)
    assert np.max(np.abs(err)) <= 0.125  # half the spacing (0.25) of e4m3fn in [2, 4]
    assert ax.get_title() and ax.get_ylabel() and ax.get_legend() is not None


def test_fpsim_imports_without_matplotlib():
    code = (
        "import sys; sys.modules['matplotlib'] = None; sys.modules['matplotlib.pyplot'] = None\n"
        "import fpsim\n"
        "try:\n"
        "    fpsim.plot.number_line('fp16', 0, 1)\n"
        "except ImportError:\n"
        "    print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_exponent_histogram_shades_only_inside_the_plotted_bins():
    """Narrow bins for bf16: no zone may extend past them or be labelled where it is not."""
    import fpsim.plot

    x = np.float32([1e-6, 1e-3, 0.5, 3.0])
    ax = fpsim.plot.exponent_histogram(x, "bf16", bins=np.arange(-40, 30))
    spans = [p for p in ax.patches if p.get_label() in
             ("underflow to 0", "subnormal", "normal range", "overflow")]
    for p in spans:
        x_lo = p.get_x()
        assert -40 <= x_lo and x_lo + p.get_width() <= 29, p.get_label()
    assert [p.get_label() for p in spans] == ["normal range"]


def test_exponent_histogram_counts_a_value_rounding_down_to_max_as_no_overflow():
    import fpsim.plot

    ax = fpsim.plot.exponent_histogram(np.float32([65510.0, 65520.0, 1.0, 2.0]), "fp16")
    assert "25.0% overflow" in ax.get_title()


# --- bad ranges and counts: errors naming the argument -----------------------------------------
@pytest.mark.parametrize(("lo", "hi", "match"), [
    ("0", 1, "lo must be a real number, got '0'"),
    (0, None, "hi must be a real number, got None"),
    (np.nan, 1, r"need lo <= hi \(real numbers, not NaN\), got lo=nan"),
    (2, 1, "need lo <= hi"),
])
def test_values_in_range_refuses_a_bad_range_naming_it(lo, hi, match):
    with pytest.raises(ValueError, match=match):
        fpsim.plot.values_in_range("fp16", lo, hi)


def test_values_in_range_names_the_range_that_was_asked_for_when_too_many():
    with pytest.raises(ValueError, match=r"values of float32 in \[-inf, -1e\+38\]; narrow"):
        fpsim.plot.values_in_range("fp32", -np.inf, -1e38)


def test_number_line_over_an_infinite_range_draws_every_finite_value():
    ax = fpsim.plot.number_line("e4m3fn", -np.inf, np.inf)
    shown = sum(len(c.get_offsets()) for c in ax.collections)
    oracle = np.unique(np.abs(np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
                              .astype(np.float64)))
    oracle = oracle[np.isfinite(oracle)]
    assert shown == 2 * oracle.size - 1  # +-each non-zero value, one zero
    assert np.isfinite(ax.get_xlim()).all()
    plt.close(ax.figure)


@pytest.mark.parametrize("n", [0, -1, True, 2.5, 10**12])
def test_rounding_error_refuses_a_sample_count_that_is_not_a_sensible_integer(n):
    with pytest.raises(ValueError, match=r"n must be an integer in 1\.\.10000000"):
        fpsim.plot.rounding_error("fp16", 0, 1, n=n)


@pytest.mark.parametrize(("lo", "hi"), [(0, np.inf), (np.nan, 1), (1, 0)])
def test_rounding_error_refuses_an_infinite_nan_or_reversed_range(lo, hi):
    with pytest.raises(ValueError, match="lo"):
        fpsim.plot.rounding_error("fp16", lo, hi)


def test_exponent_histogram_refuses_values_that_are_not_numbers_naming_them():
    with pytest.raises(TypeError, match="values must be numeric"):
        fpsim.plot.exponent_histogram(["a"], "fp16")
