"""IEEE P3109 binary8 formats against gfloat (Graphcore's reference): every code, every
midpoint, every rounding mode both implement, with and without saturation."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

import fpsim

gfloat = pytest.importorskip("gfloat")
from gfloat import RoundMode, decode_float, round_float  # noqa: E402
from gfloat.formats import Domain, Signedness, format_info_p3109  # noqa: E402
from helpers import same_values  # noqa: E402

same = partial(same_values, signed_zeros=False)  # (P3109 has one zero, unsigned)

IDS = [f.name for f in fpsim.P3109_FORMATS]
MODES = {
    "nearest_even": RoundMode.TiesToEven, "nearest_away": RoundMode.TiesToAway,
    "toward_zero": RoundMode.TowardZero, "up": RoundMode.TowardPositive,
    "down": RoundMode.TowardNegative,
}


def info(fmt: fpsim.Format):
    return format_info_p3109(
        8, fmt.precision, Signedness.Signed if fmt.signed else Signedness.Unsigned,
        Domain.Extended if fmt.inf else Domain.Finite)


def gfloat_values(fmt: fpsim.Format) -> np.ndarray:
    fi = info(fmt)
    return np.array([decode_float(fi, c).fval for c in range(256)])


def test_there_are_28_p3109_binary8_formats_found_by_name_and_by_gfloat_name():
    assert len(fpsim.P3109_FORMATS) == 28
    for f in fpsim.P3109_FORMATS:
        assert fpsim.get_format(f.name) is f
        assert fpsim.get_format(info(f).name) is f


@pytest.mark.parametrize("fmt", fpsim.P3109_FORMATS, ids=IDS)
def test_p3109_format_properties_equal_gfloats(fmt):
    fi = info(fmt)
    assert (fmt.bits, fmt.precision, fmt.bias, fmt.signed) == (8, fi.precision, fi.bias,
                                                               fi.is_signed)
    assert (fmt.max, fmt.smallest_subnormal) == (fi.max, fi.smallest_subnormal)
    assert not fmt.has_negative_zero and fmt.subnormals


@pytest.mark.parametrize("fmt", fpsim.P3109_FORMATS, ids=IDS)
def test_every_p3109_code_decodes_as_gfloat_decodes_it(fmt):
    got = fpsim.from_bits(np.arange(256, dtype=np.uint8), fmt)
    assert same(got, gfloat_values(fmt)).all()
    assert np.isnan(got).sum() == 1  # the single NaN


@pytest.mark.parametrize("fmt", fpsim.P3109_FORMATS, ids=IDS)
def test_every_finite_p3109_value_encodes_to_its_gfloat_code(fmt):
    ref = gfloat_values(fmt)
    codes = np.arange(256)
    keep = ~np.isnan(ref) & ~((ref == 0) & (codes != 0))
    assert np.array_equal(fpsim.to_bits(ref[keep], fmt), codes[keep])


def _codes_and_midpoints(fmt: fpsim.Format) -> np.ndarray:
    ref = gfloat_values(fmt)
    v = np.unique(ref[np.isfinite(ref)])
    big = [fmt.max * 1.25, fmt.max * 4, np.inf]
    extra = big + [-b for b in big] if fmt.signed else big
    return np.concatenate([v, (v[1:] + v[:-1]) / 2, extra])


@pytest.mark.parametrize("saturate", [False, True], ids=["no_sat", "sat"])
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("fmt", fpsim.P3109_FORMATS, ids=IDS)
def test_p3109_rounds_every_code_and_midpoint_as_gfloat_does(fmt, mode, saturate):
    x = _codes_and_midpoints(fmt)
    if saturate:  # gfloat's sat also clamps inf input; fpsim keeps inf where the format has it
        x = x[np.isfinite(x)]
    got = fpsim.round(x, fmt, mode, overflow="saturate" if saturate else None)
    fi = info(fmt)
    want = [round_float(fi, float(v), MODES[mode], saturate) for v in x]
    ok = same(got, want)
    assert ok.all(), (x[~ok][:4], got[~ok][:4])


@pytest.mark.parametrize("fmt", [fpsim.p3109(3, signed=False), fpsim.p3109(1, signed=False)],
                         ids=lambda f: f.name)
def test_unsigned_p3109_maps_negative_numbers_to_nan_and_minus_zero_to_zero(fmt):
    got = fpsim.round(np.float32([-1.0, -1e-30, -np.inf, -0.0]), fmt)
    assert np.isnan(got[:3]).all() and got[3] == 0 and not np.signbit(got[3])
    assert np.isnan(fpsim.round_scalar(-1.0, fmt))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"p": 0}, "p must be an integer in 1..7"), ({"p": 8}, "p must be an integer in 1..7"),
     ({"p": 3, "domain": "wide"}, "domain must be one of"),
     ({"p": 3, "signed": 1}, "signed must be True or False")],
)
def test_p3109_rejects_bad_arguments_naming_them(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fpsim.p3109(**kwargs)


@pytest.mark.parametrize("fmt", [fpsim.E8M0FNU, fpsim.p3109(1, signed=False), fpsim.p3109(4)],
                         ids=lambda f: f.name)
def test_new_formats_plot_their_number_line_and_exponent_histogram(fmt):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from fpsim import plot

    shown = plot.values_in_range(fmt, 0.25, 8.0)
    v = fpsim.values(fmt)
    assert np.array_equal(shown, v[(v >= 0.25) & (v <= 8.0)])
    assert plot.number_line(fmt, 0.25, 8.0) is not None
    assert plot.exponent_histogram(np.float32([0.5, 3.0, 1e-3]), fmt) is not None
    matplotlib.pyplot.close("all")


@pytest.mark.parametrize("fmt", [f for f in fpsim.CATALOG if f in fpsim.P3109_FORMATS],
                         ids=lambda f: f.name)
def test_stochastic_rounding_equals_gfloats_for_the_same_random_bits(fmt):
    """gfloat goes up when srbits >= 2^n - f * 2^n (f on an n-bit grid), round_scalar when its
    draw u < f: the same decision for u = (2^n - 1 - srbits) / 2^n."""
    n = 4
    fi = info(fmt)
    v = np.unique(fpsim.values(fmt).astype(np.float64))
    quarters = [v[:-1] + (v[1:] - v[:-1]) * k / 4 for k in (1, 2, 3)]
    x = np.concatenate([v, *quarters, [fmt.max * 1.2, -fmt.max * 1.2] if fmt.signed else []])
    x = x[x >= 0] if not fmt.signed else x
    for srbits in (0, 3, 8, 15):
        u = (2**n - 1 - srbits) / 2**n
        got = [fpsim.round_scalar(float(t), fmt, "stochastic", u=u) for t in x]
        want = [round_float(fi, float(t), RoundMode.Stochastic, False, srbits, n) for t in x]
        assert same(got, want).all(), srbits
