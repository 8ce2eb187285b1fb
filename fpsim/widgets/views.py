"""Draw each explorer's state (from ``fpsim.widgets.logic``) as a ``StaticView``."""

from __future__ import annotations

from typing import Any

import numpy as np

from fpsim.catalog import get_format
from fpsim.formats import Format
from fpsim.plot import exponent_histogram, values_in_range
from fpsim.widgets.logic import (
    CodeView,
    ModeResult,
    Neighbourhood,
    ScaledFates,
    bit_roles,
    format_facts,
)
from fpsim.widgets.render import StaticView, new_figure

COLORS = {"sign": "tab:red", "exponent": "tab:green", "mantissa": "tab:blue",
          "subnormal": "tab:orange", "normal": "tab:blue", "zero": "k"}


def code_view(view: CodeView) -> StaticView:
    """The bit explorer: the code's bits by role, its value and class, then ``explain``."""
    roles = bit_roles(view.fmt)
    legend = " ".join(r[0].upper() for r in roles)  # S E E E E E M M ...
    bits = " ".join(format(view.code, f"0{view.fmt.bits}b"))
    text = (f"{view.fmt.name} code 0x{view.code:0{(view.fmt.bits + 3) // 4}X}\n"
            f"  {legend}\n  {bits}\n"
            f"sign {view.sign}, exponent field {view.exponent_field}, mantissa field "
            f"{view.mantissa_field} -> value {view.value!r} ({view.cls})\n\n{view.explanation}")
    return StaticView(text)


def _mark_values(ax: Any, fmt: Format, lo: float, hi: float) -> None:
    v = values_in_range(fmt, lo, hi)
    sub = (v != 0) & (np.abs(v) < fmt.smallest_normal)
    ax.scatter(v[~sub], np.zeros((~sub).sum()), s=18, color=COLORS["normal"], zorder=3,
               label="values of the format")
    if sub.any():
        ax.scatter(v[sub], np.zeros(sub.sum()), s=18, color=COLORS["subnormal"], zorder=3,
                   label="subnormal values")


def neighbourhood_view(n: Neighbourhood, fmt: Format | str, mode: str = "nearest_even"
                       ) -> StaticView:
    """The value slider: x between its neighbours, the rounded value and the error."""
    f = get_format(fmt)
    text = (f"x = {n.x!r} in {f.name}: neighbours {n.below!r} <= x <= {n.above!r} "
            f"(ulp {n.ulp:g})\n{mode}: {n.rounded!r} ({n.cls}), error {n.abs_error:.3g} = "
            f"{n.error_ulps:.3f} ulp, relative {n.rel_error:.3g}")
    fig, ax = new_figure(height=1.8)
    finite = [v for v in (n.below, n.above) if np.isfinite(v)]
    span = max(n.ulp, max(finite) - min(finite))
    lo, hi = min(finite) - 1.5 * span, max(finite) + 1.5 * span
    _mark_values(ax, f, lo, hi)
    ax.axvline(n.x, color="k", lw=1, label=f"x = {n.x:.6g}")
    if np.isfinite(n.rounded):
        ax.scatter([n.rounded], [0], s=160, facecolors="none", edgecolors="tab:red", zorder=4,
                   label=f"{mode}: {n.rounded:.6g}")
    ax.set_xlim(lo, hi)
    ax.set_yticks([])
    ax.set_title(f"{f.name} near x: error {n.error_ulps:.3f} ulp")
    ax.legend(loc="upper left", fontsize="small", ncols=2)
    return StaticView(text, fig)


def modes_view(results: list[ModeResult], x: float, fmt: Format | str) -> StaticView:
    """The rounding-mode comparer: a table and one row of the picture per mode."""
    f = get_format(fmt)
    lines = [f"x = {float(x)!r} rounded to {f.name}:", f"  {'mode':14s}{'result':>22s}  error"]
    for r in results:
        extra = f"   (expected value; P(up) = {r.p_up:.4f})" if r.p_up is not None else ""
        lines.append(f"  {r.mode:14s}{r.value!r:>22}  {r.error:+.4g}{extra}")
    fig, ax = new_figure(height=0.35 * len(results) + 1)
    shown = [r.value for r in results if np.isfinite(r.value)] + [float(x)]
    pad = (max(shown) - min(shown)) * 0.3 or 1.0
    for row, r in enumerate(results):
        ax.scatter([r.value], [row], color="tab:red" if r.p_up is None else "tab:purple", zorder=3)
    ax.axvline(float(x), color="k", lw=1, label=f"x = {float(x):.6g}")
    for v in values_in_range(f, min(shown) - pad, max(shown) + pad):
        ax.axvline(v, color="0.8", lw=1, zorder=1)
    ax.set_yticks(range(len(results)), [r.mode for r in results])
    ax.set_xlim(min(shown) - pad, max(shown) + pad)
    ax.set_title(f"every mode picks one of x's two neighbours in {f.name} (grey lines)")
    ax.legend(loc="lower right", fontsize="small")
    return StaticView("\n".join(lines), fig)


def format_view(fmt: Format) -> StaticView:
    """The format builder: what the fields give, and every positive value on a linear and on a
    log2 axis (the log axis shows the subnormals a linear one squeezes against 0)."""
    facts = format_facts(fmt)
    text = "\n".join(f"{k:>19s}: {v:g}" if isinstance(v, float) else f"{k:>19s}: {v}"
                     for k, v in facts.items())
    fig, (lin, log) = new_figure(rows=2, height=1.7)
    for ax, lo in ((lin, 0.0), (log, fmt.smallest_subnormal)):
        v = values_in_range(fmt, lo, fmt.max)
        v = v[v > 0] if ax is log else v
        sub = (v != 0) & (v < fmt.smallest_normal)
        ax.scatter(v[~sub], np.zeros((~sub).sum()), s=6, color=COLORS["normal"],
                   label=f"normal ({(~sub & (v != 0)).sum()})")
        ax.scatter(v[sub], np.zeros(sub.sum()), s=6, color=COLORS["subnormal"],
                   label=f"subnormal ({sub.sum()})")
        ax.set_yticks([])
    log.set_xscale("log", base=2)
    lin.set_title(f"{fmt.name}: the positive values, linear axis")
    log.set_title("the same values on a log2 axis: each binade holds 2^M of them")
    lin.legend(loc="upper left", fontsize="small")
    return StaticView(text, fig)


def fates_view(gradients: np.ndarray, fates: ScaledFates, fmt: Format | str) -> StaticView:
    """The loss-scale slider: the scaled gradients' exponents against the format's range."""
    f = get_format(fmt)
    n = max(fates.nonzero, 1)
    text = (f"scale 2^{fates.log2_scale}: of {fates.nonzero:,} non-zero gradients in {f.name}, "
            f"{fates.underflow / n:.1%} underflow to 0, {fates.subnormal / n:.1%} are "
            f"subnormal, {fates.overflow / n:.1%} overflow")
    fig, ax = new_figure(height=3.2)
    g = np.asarray(gradients, dtype=np.float64).ravel()
    exponent_histogram(np.ldexp(g[np.isfinite(g) & (g != 0)], fates.log2_scale), f, ax=ax)
    return StaticView(text, fig)
