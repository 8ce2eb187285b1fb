"""fpsim.widgets: the explorers' pure callbacks against independent oracles (numpy float16,
ml_dtypes, integer arithmetic on codes), the static/interactive rule, and the live widgets'
wiring (a control change redraws from the callback)."""

from __future__ import annotations

import base64
import importlib.util

import ml_dtypes
import numpy as np
import pytest

import fpsim
from fpsim import widgets
from fpsim.widgets import render, views

HAS_IPYWIDGETS = importlib.util.find_spec("ipywidgets") is not None


# --- bit explorer -----------------------------------------------------------------------------
def test_decode_code_agrees_with_numpy_float16_for_every_code():
    codes = np.arange(0, 2**16, 97, dtype=np.uint16)  # a spread over every field value
    for code in codes:
        view = widgets.decode_code(int(code), "fp16")
        want = float(code.view(np.float16))
        assert view.value == want or (np.isnan(want) and np.isnan(view.value))
        assert (view.sign, view.exponent_field, view.mantissa_field) == (
            int(code) >> 15, (int(code) >> 10) & 0x1F, int(code) & 0x3FF)


def test_decode_code_reports_the_class_of_each_kind_of_e4m3fn_code():
    kinds = {0x00: "zero", 0x01: "subnormal", 0x08: "normal", 0x7E: "normal", 0x7F: "nan"}
    for code, cls in kinds.items():
        view = widgets.decode_code(code, "e4m3fn")
        assert view.cls == cls, hex(code)
        want = float(np.uint8(code).view(ml_dtypes.float8_e4m3fn))
        assert view.value == want or (np.isnan(want) and np.isnan(view.value))
    assert widgets.decode_code(0x7E, "e4m3fn").value == 448  # the all-ones exponent holds 448


def test_toggling_a_bit_twice_restores_the_code_and_bit_roles_follow_the_layout():
    assert widgets.bit_roles("fp16") == ["sign"] + ["exponent"] * 5 + ["mantissa"] * 10
    assert widgets.toggle_bit(0x3C00, 15, "fp16") == 0xBC00  # sign: 1.0 -> -1.0
    assert widgets.toggle_bit(0x3C00, 10, "fp16") == 0x3800  # lowest exponent bit: 1.0 -> 0.5
    for bit in range(16):
        assert widgets.toggle_bit(widgets.toggle_bit(0x1234, bit, "fp16"), bit, "fp16") == 0x1234


def test_toggle_bit_and_decode_code_reject_out_of_range_input_naming_it():
    with pytest.raises(ValueError, match=r"bit must be an integer in 0\.\.7 for float8_e4m3fn"):
        widgets.toggle_bit(0, 8, "e4m3fn")
    with pytest.raises(ValueError, match=r"code must be an integer in 0\.\.255 for .* got 256"):
        widgets.decode_code(256, "e4m3fn")


# --- value slider and rounding-mode comparer --------------------------------------------------
def test_neighbourhood_brackets_x_between_numpy_float16_neighbours():
    rng = np.random.default_rng(1)
    for x in rng.uniform(-65000, 65000, 200).tolist() + [0.1, 1e-6, -3e-8]:
        n = widgets.neighbourhood(x, "fp16")
        nearest = np.float16(x)  # numpy rounds float64 -> float16 directly, to nearest even
        assert n.rounded == float(nearest)
        assert n.below <= x <= n.above and n.below in (n.rounded, float(np.nextafter(
            nearest, np.float16(-np.inf)))) and n.above >= n.rounded
        assert n.abs_error == abs(float(nearest) - x) <= n.ulp / 2


def test_neighbourhood_of_a_value_of_the_format_has_zero_error():
    n = widgets.neighbourhood(2048.0, "fp16")
    assert (n.below, n.above, n.rounded, n.abs_error, n.ulp) == (2048, 2048, 2048, 0, 2)


def test_neighbourhood_refuses_stochastic_and_non_finite_x():
    with pytest.raises(ValueError, match="deterministic"):
        widgets.neighbourhood(1.0, "fp16", "stochastic")
    with pytest.raises(ValueError, match="x must be a finite number"):
        widgets.neighbourhood(float("inf"), "fp16")


def _codes16(v: float) -> int:
    return int(np.float16(v).view(np.uint16))


def test_compare_modes_matches_a_from_the_spec_reference_on_fp16():
    for x in (2049.0, 2051.0, -2049.0, 0.1, -0.1, 1 + 2**-12, 65519.0):
        lo = float(np.float16(x))
        if lo > x:
            lo = float(np.nextafter(np.float16(x), np.float16(-np.inf)))
        with np.errstate(over="ignore"):
            hi = float(np.nextafter(np.float16(lo), np.float16(np.inf)))
        to_zero = lo if x > 0 else hi
        nearer = lo if x - lo < hi - x else hi
        tie = x - lo == hi - x
        want = {
            "nearest_even": (lo if _codes16(lo) % 2 == 0 else hi) if tie else nearer,
            "nearest_away": (hi if x > 0 else lo) if tie else nearer,
            "toward_zero": to_zero, "up": hi, "down": lo,
            "odd": lo if _codes16(lo) % 2 == 1 else hi,  # x is never a value here
        }
        got = {r.mode: r.value for r in widgets.compare_modes(x, "fp16")}
        assert {m: got[m] for m in want} == want, x
        stochastic = widgets.compare_modes(x, "fp16")[-1]
        draws = fpsim.round(np.full(20_000, x), "fp16", "stochastic", rng=5)
        share_up = np.mean(draws == hi)  # fpsim's kernel, sampled
        p = stochastic.p_up
        assert abs(share_up - p) <= 5 * np.sqrt(p * (1 - p) / draws.size) + 1e-12, x
        if np.isfinite(hi):
            assert stochastic.value == pytest.approx(x, rel=1e-12)  # unbiased: the mean is x
        else:
            assert stochastic.value == np.inf  # some draws overflow


def test_stochastic_odds_past_the_range_match_fpsims_draws():
    for x, fmt in ((470.0, "e4m3fn"), (1000.0, "e4m3fn"), (-70000.0, "fp16"), (65530.0, "fp16")):
        stochastic = widgets.compare_modes(x, fmt)[-1]
        draws = fpsim.round(np.full(20_000, x), fmt, "stochastic", rng=6)
        away = np.mean(~np.isfinite(draws))  # the draws that left the range
        p_away = stochastic.p_up if x > 0 else 1 - stochastic.p_up
        assert 0 <= p_away <= 1
        assert abs(away - p_away) <= 5 * np.sqrt(p_away * (1 - p_away) / draws.size) + 1e-12


# --- format builder ---------------------------------------------------------------------------
@pytest.mark.parametrize(("e", "m", "nan", "dtype"), [
    (5, 10, "ieee", np.float16), (8, 7, "ieee", ml_dtypes.bfloat16),
    (4, 3, "fn", ml_dtypes.float8_e4m3fn), (5, 2, "ieee", ml_dtypes.float8_e5m2),
    (4, 3, "ieee", ml_dtypes.float8_e4m3), (2, 1, "none", ml_dtypes.float4_e2m1fn),
])
def test_a_built_format_has_the_range_and_value_count_of_the_ml_dtypes_type(e, m, nan, dtype):
    facts = widgets.format_facts(widgets.build_format(e, m, nan=nan))
    info = ml_dtypes.finfo(dtype)
    assert (facts["max"], facts["smallest normal"], facts["eps"]) == (
        float(info.max), float(info.smallest_normal), float(info.eps))
    assert facts["smallest subnormal"] == float(info.smallest_subnormal)
    bits = 1 + e + m
    every = np.arange(2**bits, dtype=np.uint16 if bits > 8 else np.uint8).view(dtype)
    with np.errstate(invalid="ignore"):  # NaN codes
        every = every.astype(np.float64)
    assert facts["finite values"] == len(np.unique(every[np.isfinite(every)]))


def test_build_format_names_like_ml_dtypes_and_leaves_validation_to_format():
    assert widgets.build_format(4, 3, nan="fn").name == "e4m3fn"
    assert widgets.build_format(5, 2, bias=11, subnormals=False).name == "e5m2b11_ftz"
    assert widgets.build_format(4, 3, nan="fn") == fpsim.Format("e4m3fn", 4, 3, nan="fn",
                                                                inf=False)
    with pytest.raises(ValueError, match="exponent_bits must be an integer in 1..8"):
        widgets.build_format(9, 2)


# --- loss-scale slider ------------------------------------------------------------------------
def test_scaled_fates_count_what_numpy_float16_does_to_the_scaled_gradients():
    rng = np.random.default_rng(2)
    g = rng.lognormal(-18, 4, 20_000) * rng.choice([-1, 1], 20_000)
    for k in (0, 12, 30):
        fates = widgets.scaled_fates(g, k, "fp16")
        with np.errstate(over="ignore"):
            stored = np.ldexp(g, k).astype(np.float16)
        assert fates.nonzero == g.size
        assert fates.underflow == np.sum(stored == 0)
        assert fates.overflow == np.sum(np.isinf(stored))
        assert fates.subnormal == np.sum((stored != 0) & (np.abs(stored) < 2.0**-14))
        assert fates.kept == g.size - fates.underflow - fates.overflow


def test_a_larger_scale_never_underflows_more_and_never_overflows_less():
    g = np.random.default_rng(3).lognormal(-10, 6, 5000)
    fates = [widgets.scaled_fates(g, k) for k in range(-5, 40, 5)]
    assert all(a.underflow >= b.underflow and a.overflow <= b.overflow
               for a, b in zip(fates, fates[1:], strict=False))


def test_scaled_fates_wants_an_integer_exponent():
    with pytest.raises(ValueError, match=r"log2_scale must be an integer .* got 0.5"):
        widgets.scaled_fates(np.ones(3), 0.5)  # type: ignore[arg-type]


# --- static or interactive --------------------------------------------------------------------
def test_rendering_is_static_outside_a_kernel_and_when_forced(monkeypatch):
    monkeypatch.delenv(render.ENV_VAR, raising=False)
    assert widgets.rendering() == "static"  # pytest is no IPython kernel
    monkeypatch.setenv(render.ENV_VAR, "static")
    assert widgets.rendering() == "static"
    monkeypatch.setenv(render.ENV_VAR, "sometimes")
    with pytest.raises(ValueError, match="FPSIM_WIDGETS must be one of"):
        widgets.rendering()


def test_rendering_is_static_in_a_kernel_with_the_agg_backend(monkeypatch):
    monkeypatch.delenv(render.ENV_VAR, raising=False)
    monkeypatch.setattr(render, "_ipywidgets_installed", lambda: True)
    monkeypatch.setattr(render, "_in_kernel", lambda: True)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    assert widgets.rendering() == "static"
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    assert widgets.rendering() == "interactive"
    monkeypatch.setattr(render, "_ipywidgets_installed", lambda: False)
    assert widgets.rendering() == "static"  # no ipywidgets: static, whatever else holds


def test_every_explorer_renders_statically_with_text_and_html(monkeypatch):
    monkeypatch.setenv(render.ENV_VAR, "static")
    g = np.random.default_rng(4).lognormal(-20, 3, 1000)
    views = [widgets.bit_explorer("fp16", 0.1), widgets.value_slider("fp16", 0, 1, 0.1),
             widgets.rounding_comparer(2049, "fp16"), widgets.format_builder(4, 3),
             widgets.loss_scale_slider(g, "fp16", 10)]
    for view in views:
        assert isinstance(view, widgets.StaticView) and view.text
        assert view._repr_html_().startswith("<pre>")
    assert "0x2E66" in views[0].text and "0.400 ulp" in views[1].text
    assert "nearest_even                  2048.0" in views[2].text
    assert views[3].figure is not None and "finite values: 253" in views[3].text


@pytest.mark.skipif(not HAS_IPYWIDGETS, reason="ipywidgets is not installed")
def test_clicking_the_sign_bit_redraws_the_explorer_with_the_negated_value(monkeypatch):
    monkeypatch.setenv(render.ENV_VAR, "interactive")
    box = widgets.bit_explorer("fp16", 1.0)
    view = box.children[-1]  # the HTML view under the row of bits
    assert "code 0x3C00" in view.value
    box.children[0].children[0].value = True  # the first button is the sign bit
    assert "code 0xBC00" in view.value and "value -1.0" in view.value


@pytest.mark.skipif(not HAS_IPYWIDGETS, reason="ipywidgets is not installed")
def test_an_impossible_built_format_is_reported_in_the_view_not_raised(monkeypatch):
    monkeypatch.setenv(render.ENV_VAR, "interactive")
    box = widgets.format_builder(4, 3, nan="fn")
    e_slider, m_slider, view = box.children[0], box.children[1], box.children[-1]
    m_slider.value = 10  # 1 + 4 + 10 = 15 bits: fine
    assert "finite values" in view.value
    e_slider.value = 8  # 19 bits: too many to draw
    assert "not a valid choice" in view.value and "16 bits" in view.value


@pytest.mark.skipif(not HAS_IPYWIDGETS, reason="ipywidgets is not installed")
def test_a_live_explorer_never_uses_an_output_area(monkeypatch):
    """An Output area written during a cell makes nbclient send on the kernel's shell socket
    while it waits there for the reply, which can hang ``jupyter nbconvert --execute``
    (fpsim.widgets.live); the explorers' views are HTML widgets."""
    import ipywidgets

    monkeypatch.setenv(render.ENV_VAR, "interactive")
    g = np.random.default_rng(4).lognormal(-20, 3, 1000)
    boxes = [widgets.bit_explorer("fp16", 0.1), widgets.value_slider("fp16", 0, 1, 0.1),
             widgets.rounding_comparer(2049, "fp16"), widgets.format_builder(4, 3),
             widgets.loss_scale_slider(g, "fp16", 10)]

    def leaves(widget):
        yield widget
        for child in getattr(widget, "children", ()):
            yield from leaves(child)

    for box in boxes:
        kinds = {type(leaf) for leaf in leaves(box)}
        assert ipywidgets.Output not in kinds and ipywidgets.HTML in kinds


@pytest.mark.skipif(not HAS_IPYWIDGETS, reason="ipywidgets is not installed")
def test_a_live_explorer_also_leaves_its_starting_state_as_text_html_and_png(monkeypatch):
    monkeypatch.setenv(render.ENV_VAR, "interactive")
    box = widgets.format_builder(4, 3, nan="fn")
    static = views.format_view(widgets.build_format(4, 3, nan="fn"))
    bundle = box._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle  # live front ends: the widget
    assert bundle["text/plain"] == static.text  # a terminal or an export: the starting state
    assert bundle["text/html"].startswith("<pre>") and "data:image/png;base64," in bundle[
        "text/html"]
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG")
    explorer = widgets.bit_explorer("fp16", 1.0)
    assert "code 0x3C00" in explorer._repr_mimebundle_()["text/plain"]
    explorer.children[0].children[0].value = True  # a click changes the view, not the picture
    assert "code 0x3C00" in explorer._repr_mimebundle_()["text/plain"]


def test_fpsim_and_its_static_explorers_work_without_importing_ipywidgets():
    import subprocess
    import sys

    script = ("import sys; sys.modules['ipywidgets'] = None  # as if not installed\n"
              "import fpsim, fpsim.widgets as w\n"
              "assert w.rendering() == 'static'\n"
              "print(w.bit_explorer('bf16', 3.0).text.splitlines()[0])\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.startswith("bfloat16 code 0x4040")


def test_explorers_reject_bad_arguments_naming_them(monkeypatch):
    monkeypatch.setenv(render.ENV_VAR, "static")
    with pytest.raises(ValueError, match=r"value must lie in \[lo, hi\] = \[0, 1\], got 2"):
        widgets.value_slider("fp16", 0, 1, 2)
    with pytest.raises(ValueError, match="unknown format"):
        widgets.rounding_comparer(1.0, "fp17")
    with pytest.raises(ValueError, match="mantissa_bits must be an integer in 0..23"):
        widgets.format_builder(4, 30)


def _fp16_fate_of_exact_product(g: float, k: int) -> str:
    """The fate in fp16 (nearest even) of the exact number g * 2^k, from Fraction thresholds:
    |v| >= 65520 (halfway above max) overflows, |v| <= 2^-25 (half the smallest subnormal)
    underflows, |v| < 2^-14 stays subnormal."""
    from fractions import Fraction

    k = max(min(k, 3000), -3000)  # beyond, every non-zero float64's product is far out of fp16
    v = abs(Fraction(g) * Fraction(2) ** k)
    if v >= 65520:
        return "overflow"
    if v <= Fraction(1, 2**25):
        return "underflow"
    return "subnormal" if v < Fraction(1, 2**14) else "normal"


@pytest.mark.parametrize("k", [2000, -2000, 1100, -1100, 10**30, -(10**30), np.int64(-1050)])
def test_scaled_fates_count_products_beyond_float64s_range(k):
    # float64's ldexp gives inf or 0 there, which the monitor would count as no event
    g = np.array([1.0, -3.5, 2.0**-1074, 2.0**1000, -(2.0**-40), 1e300, 5e-324 * 3])
    fates = widgets.scaled_fates(g, k, "fp16")
    expected = [_fp16_fate_of_exact_product(float(x), int(k)) for x in g]
    assert fates.nonzero == g.size
    assert fates.overflow == expected.count("overflow")
    assert fates.underflow == expected.count("underflow")
    assert fates.subnormal == expected.count("subnormal")


def test_scaled_fates_of_2000_and_minus_2000_are_all_overflow_and_all_underflow():
    g = np.random.default_rng(4).lognormal(-18, 4, 1000)
    assert widgets.scaled_fates(g, 2000).overflow == g.size
    assert widgets.scaled_fates(g, -2000).underflow == g.size


def test_scaled_fates_refuses_a_numpy_bool_scale():
    with pytest.raises(ValueError, match="log2_scale must be an integer"):
        widgets.scaled_fates(np.ones(3), np.bool_(True))  # type: ignore[arg-type]


def test_toggle_bit_and_decode_code_accept_numpy_integers():
    code = np.uint16(0x3C00)
    assert widgets.toggle_bit(code, np.int64(15), "fp16") == 0xBC00
    assert widgets.decode_code(code, "fp16").value == 1.0


@pytest.mark.parametrize("bad", [True, np.True_, 1.0])
def test_toggle_bit_refuses_a_bool_or_float_bit_naming_it(bad):
    with pytest.raises(ValueError, match=r"bit must be an integer in 0\.\.15 for float16"):
        widgets.toggle_bit(0, bad, "fp16")


@pytest.mark.parametrize("call", [lambda x: widgets.neighbourhood(x, "fp16"),
                                  lambda x: widgets.to_code(x, "fp16")])
def test_the_value_explorers_refuse_an_array_naming_x(call):
    with pytest.raises(ValueError, match=r"x must be one real number, got array"):
        call(np.array([1.0, 2.0]))


def test_neighbourhood_of_a_value_that_rounds_to_nan_has_a_nan_relative_error():
    near = widgets.neighbourhood(0.0, "e8m0")  # E8M0 has no zero: 0 rounds to NaN
    assert np.isnan(near.rounded) and np.isnan(near.abs_error) and np.isnan(near.rel_error)


def test_scaled_fates_refuses_gradients_that_are_not_numbers_naming_them():
    with pytest.raises(TypeError, match="gradients must be numeric"):
        widgets.scaled_fates(["a"], 3)  # type: ignore[arg-type]
