"""The explorers: each returns an ipywidgets box when interactive, a ``StaticView`` otherwise.

Each control's callback computes the new state with a pure function of
``fpsim.widgets.logic``, draws it with ``fpsim.widgets.views`` and shows it in the explorer's
HTML view (``fpsim.widgets.live``, which also says why it is not an Output area). ipywidgets
is imported only inside these functions, so ``import fpsim`` never needs it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fpsim.catalog import get_format
from fpsim.formats import NAN_KINDS, Format
from fpsim.rounding import MODE_NAMES
from fpsim.widgets import logic, views
from fpsim.widgets.render import StaticView, rendering

FORMAT_CHOICES = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e3m4",
                  "float6_e2m3fn", "float4_e2m1fn", "float32")


def bit_explorer(fmt: Format | str = "float16", value: float = 1.0) -> Any:
    """Click the bits of a code of ``fmt`` (starting from ``value`` rounded to it) and see the
    value, its class and ``fpsim.explain``. Static: the starting code's view."""
    f = get_format(fmt)
    state = {"code": logic.to_code(value, f)}
    if rendering() == "static":
        return views.code_view(logic.decode_code(state["code"], f))
    import ipywidgets as w

    from fpsim.widgets import live

    roles = logic.bit_roles(f)
    buttons = []
    for position, role in enumerate(roles):
        bit = f.bits - 1 - position
        button = w.ToggleButton(value=bool(state["code"] >> bit & 1), description=role[0].upper(),
                                tooltip=f"{role} bit (bit {bit})",
                                layout=w.Layout(width="34px", padding="0"))
        button.style.button_color = {"sign": "#f4c7c3", "exponent": "#c6e8c6",
                                     "mantissa": "#c8dcf0"}[role]

        def flip(change: Any, bit: int = bit) -> None:
            if bool(state["code"] >> bit & 1) != change["new"]:
                state["code"] = logic.toggle_bit(state["code"], bit, f)

        button.observe(flip, names="value")
        buttons.append(button)
    return live.explorer(buttons, lambda: views.code_view(logic.decode_code(state["code"], f)),
                         layout=[w.HBox(buttons)])


def value_slider(fmt: Format | str = "float16", lo: float = 0.0, hi: float = 4.0,
                 value: float = 0.1, mode: str = "nearest_even") -> Any:
    """Slide x over [lo, hi] and see its neighbours in the chosen format, the rounded value and
    the error. Static: the view at ``value``."""
    f = get_format(fmt)
    if not lo <= value <= hi:
        raise ValueError(f"value must lie in [lo, hi] = [{lo}, {hi}], got {value}")
    if rendering() == "static":
        return views.neighbourhood_view(logic.neighbourhood(value, f, mode), f, mode)
    import ipywidgets as w

    from fpsim.widgets import live

    choices = list(dict.fromkeys([f.name, *FORMAT_CHOICES]))
    x = w.FloatSlider(value=value, min=lo, max=hi, step=(hi - lo) / 2000, readout_format=".6g",
                      description="x", layout=w.Layout(width="90%"))
    fmt_box = w.Dropdown(options=choices, value=f.name, description="format")
    mode_box = w.Dropdown(options=[m for m in MODE_NAMES if m != "stochastic"], value=mode,
                          description="mode")

    def draw() -> StaticView:
        g = f if fmt_box.value == f.name else get_format(fmt_box.value)
        return views.neighbourhood_view(logic.neighbourhood(x.value, g, mode_box.value), g,
                                        mode_box.value)

    return live.explorer([x, fmt_box, mode_box], draw)


def rounding_comparer(x: float = 2049.0, fmt: Format | str = "float16") -> Any:
    """Type x and see it rounded in every mode (stochastic as its expected value and P(up))."""
    f = get_format(fmt)
    if rendering() == "static":
        return views.modes_view(logic.compare_modes(x, f), x, f)
    import ipywidgets as w

    from fpsim.widgets import live

    x_box = w.FloatText(value=x, description="x")
    choices = list(dict.fromkeys([f.name, *FORMAT_CHOICES]))
    fmt_box = w.Dropdown(options=choices, value=f.name, description="format")

    def draw() -> StaticView:
        g = f if fmt_box.value == f.name else get_format(fmt_box.value)
        return views.modes_view(logic.compare_modes(x_box.value, g), x_box.value, g)

    return live.explorer([x_box, fmt_box], draw)


def format_builder(exponent_bits: int = 4, mantissa_bits: int = 3, bias: int | None = None,
                   nan: str = "fn", subnormals: bool = True) -> Any:
    """Choose E, M, bias and the special values; see the format's range and its number line.
    Formats up to 16 bits (every value is drawn)."""
    if rendering() == "static":
        return views.format_view(logic.build_format(exponent_bits, mantissa_bits, bias, nan=nan,
                                                    subnormals=subnormals))
    import ipywidgets as w

    from fpsim.widgets import live

    e = w.IntSlider(value=exponent_bits, min=1, max=8, description="E bits")
    m = w.IntSlider(value=mantissa_bits, min=0, max=10, description="M bits")
    default = w.Checkbox(value=bias is None, description="default bias 2^(E-1) - 1")
    b = w.IntText(value=bias if bias is not None else 2 ** (exponent_bits - 1) - 1,
                  description="bias")
    nan_box = w.Dropdown(options=list(NAN_KINDS), value=nan, description="NaN/inf")
    sub = w.Checkbox(value=subnormals, description="subnormals")

    def draw() -> StaticView:
        if 1 + e.value + m.value > 16:
            raise ValueError(f"1 + E + M = {1 + e.value + m.value} bits: the builder draws "
                             "every value, so it stops at 16 bits")
        fmt = logic.build_format(e.value, m.value, None if default.value else b.value,
                                 nan=nan_box.value, subnormals=sub.value)
        return views.format_view(fmt)

    return live.explorer([e, m, default, b, nan_box, sub], draw)


def loss_scale_slider(gradients: np.ndarray, fmt: Format | str = "float16",
                      log2_scale: int = 0, lo: int = -8, hi: int = 40) -> Any:
    """Slide the loss scale 2^k over a gradient histogram against the format's range and see
    how many gradients underflow, turn subnormal or overflow."""
    f = get_format(fmt)
    g = np.asarray(gradients, dtype=np.float64)
    if rendering() == "static":
        return views.fates_view(g, logic.scaled_fates(g, log2_scale, f), f)
    import ipywidgets as w

    from fpsim.widgets import live

    k = w.IntSlider(value=log2_scale, min=lo, max=hi, description="log2 scale")
    return live.explorer([k], lambda: views.fates_view(g, logic.scaled_fates(g, k.value, f), f))
