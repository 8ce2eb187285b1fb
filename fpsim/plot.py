"""matplotlib pictures of a format: its number line, an exponent histogram, rounding error.

matplotlib is an optional extra (``pip install fpsim[plot]``); it is imported inside the
functions, so ``import fpsim`` works without it. Every helper draws on ``ax`` (a new figure if
None), returns the Axes (``ax.figure`` is the Figure) and never calls ``show()``.

``save(figure, path)`` writes a picture atomically (``fpsim.atomic``): a full disk leaves the
previous file as it was, where ``figure.savefig(path)`` would leave half a file.

>>> ax = fpsim.plot.number_line("e4m3fn", 0, 1)
>>> fpsim.plot.save(ax, "e4m3fn.png")  # doctest: +SKIP
PosixPath('e4m3fn.png')
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from fpsim import _validate
from fpsim.atomic import write_atomic
from fpsim.catalog import get_format
from fpsim.formats import Format
from fpsim.monitor import Monitor
from fpsim.quantize import as_float_array
from fpsim.quantize import round as _round

MAX_POINTS = 200_000  # values one picture lists (ours)
MAX_SAMPLES = 10_000_000  # points rounding_error may sample (ours: 80 MB of float64 a copy)
_COLORS = {"normal": "tab:blue", "subnormal": "tab:orange", "zero": "black"}


def _axes(ax: Any) -> Any:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=(9, 3.2), layout="constrained")
    return ax


def save(figure: Any, path: str | os.PathLike[str], **savefig_kwargs: Any) -> Path:
    """Write ``figure`` (a matplotlib Figure, or an Axes: its figure) to ``path``, all or
    nothing (``fpsim.atomic.write_atomic``); returns the path.

    The picture's format is ``savefig_kwargs["format"]`` if given, else the file's suffix
    (``.png``, ``.svg``, ``.pdf``), else matplotlib's default; the other keyword arguments go
    to ``Figure.savefig``. A failed write raises ``fpsim.atomic.WriteError`` (an ``OSError``)
    and leaves the previous file at ``path`` unchanged.
    """
    fig = figure if hasattr(figure, "savefig") else getattr(figure, "figure", None)
    if fig is None or not hasattr(fig, "savefig"):
        raise TypeError(f"figure must be a matplotlib Figure or Axes, got {figure!r:.60} "
                        f"(a {type(figure).__name__})")
    kwargs = dict(savefig_kwargs)
    suffix = Path(os.fspath(path)).suffix.lstrip(".").lower()
    kwargs["format"] = kwargs.get("format") or suffix or None
    return write_atomic(path, lambda f: fig.savefig(f, **kwargs), what="picture")


class _TooMany(Exception):
    """More than MAX_POINTS values (values_in_range names the range the caller asked for)."""


def _range(lo: object, hi: object, *, finite: bool) -> tuple[float, float]:
    """(lo, hi) as floats: real numbers (numpy's too, not str or bool) with lo <= hi, finite
    where ``finite``; else a ValueError naming them."""
    for name, v in (("lo", lo), ("hi", hi)):
        if isinstance(v, (str, bytes, bool, np.bool_)) or not hasattr(v, "__float__"):
            raise ValueError(f"{name} must be a real number, got {v!r} (a {type(v).__name__})")
    a, b = float(lo), float(hi)  # type: ignore[arg-type]  # (checked above)
    if np.isnan(a) or np.isnan(b) or not a <= b:
        raise ValueError(f"need lo <= hi (real numbers, not NaN), got lo={a}, hi={b}")
    if finite and not (np.isfinite(a) and np.isfinite(b)):
        raise ValueError(f"lo and hi must be finite here, got lo={a}, hi={b}")
    return a, b


def _positive_values(fmt: Format, lo: float, hi: float) -> np.ndarray:
    """The positive finite values of fmt in [lo, hi] (0 < lo), ascending, from the fields.

    Subnormals are k * 2^(emin - M) for k = 1 .. 2^M - 1; the binade with exponent e holds
    (2^M + m) * 2^(e - M) for m = 0 .. 2^M - 1, up to fmt.max.
    """
    m_bits = fmt.mantissa_bits
    chunks: list[np.ndarray] = []
    grids = [(fmt.emin - m_bits, 1, 2**m_bits - 1)] if fmt.subnormals else []
    grids += [(e - m_bits, 2**m_bits, 2 ** (m_bits + 1) - 1) for e in range(fmt.emin, fmt.emax + 1)]
    for q, kmin, kmax in grids:
        step = 2.0**q
        k0 = max(kmin, int(np.ceil(lo / step)))
        k1 = min(kmax, int(np.floor(min(hi, fmt.max) / step)))
        if k1 >= k0:
            if sum(c.size for c in chunks) + (k1 - k0 + 1) > MAX_POINTS:
                raise _TooMany
            chunks.append(np.arange(k0, k1 + 1, dtype=np.float64) * step)
    return np.concatenate(chunks) if chunks else np.empty(0)


def values_in_range(fmt: Format | str, lo: float, hi: float) -> np.ndarray:
    """Every finite value of ``fmt`` in [lo, hi] (one zero), ascending, as float64.

    ``lo <= hi`` are real numbers (infinite ends allowed, NaN refused); at most MAX_POINTS
    values, else a ValueError naming the range.

    >>> values_in_range("e2m1fn", 0, 6)
    array([0. , 0.5, 1. , 1.5, 2. , 3. , 4. , 6. ])
    """
    fmt = get_format(fmt)
    lo, hi = _range(lo, hi, finite=False)
    from fpsim.grid import values as all_values  # every value of formats up to 16 bits

    if fmt.bits <= 16:
        v = np.unique(np.asarray(all_values(fmt), dtype=np.float64))
        return v[(v >= lo) & (v <= hi)]
    try:
        pos = _positive_values(fmt, max(lo, 0.0), hi) if hi > 0 else np.empty(0)
        neg = -_positive_values(fmt, max(-hi, 0.0), -lo)[::-1] if lo < 0 else np.empty(0)
    except _TooMany:
        raise ValueError(f"more than {MAX_POINTS} values of {fmt.name} in [{lo}, {hi}]; "
                         "narrow the range") from None
    zero = np.zeros(1) if lo <= 0 <= hi else np.empty(0)
    return np.concatenate([neg, zero, pos])


def number_line(fmt: Format | str, lo: float, hi: float, *, ax: Any = None) -> Any:
    """Every representable value of ``fmt`` in [lo, hi] as a dot on a line.

    Normals, subnormals and zero are coloured apart; the number of dots is the number of values.
    """
    fmt = get_format(fmt)
    v = values_in_range(fmt, lo, hi)
    lo, hi = max(float(lo), -fmt.max), min(float(hi), fmt.max)  # an infinite end: the format's
    ax = _axes(ax)
    kinds = {
        "zero": v == 0,
        "subnormal": (v != 0) & (np.abs(v) < fmt.smallest_normal),
        "normal": np.abs(v) >= fmt.smallest_normal,
    }
    for kind, mask in kinds.items():
        if mask.any():
            ax.scatter(v[mask], np.zeros(int(mask.sum())), s=12, color=_COLORS[kind],
                       label=f"{kind} ({int(mask.sum())})", zorder=3)
    ax.axhline(0, color="0.7", lw=1, zorder=1)
    ax.set_yticks([])
    ax.set_xlim(lo - 0.02 * (hi - lo or 1), hi + 0.02 * (hi - lo or 1))
    ax.set_xlabel("value")
    ax.set_title(f"{fmt.name}: the {v.size} representable values in [{lo:g}, {hi:g}]")
    if v.size:
        ax.legend(loc="upper right", fontsize="small")
    return ax


def exponent_histogram(values: Any, fmt: Format | str, *, bins: Any = None, ax: Any = None) -> Any:
    """Histogram of log2|x| over the non-zero finite values, against fmt's range.

    Shaded: the normal range [emin, log2 max], the subnormal range [emin - M, emin), the
    underflow zone below (values there round to zero: |x| <= smallest_subnormal / 2) and the
    overflow zone above log2 max. The title gives the share of non-zero values that round to
    zero and to inf/NaN/max in fmt (counted by rounding them, not from the picture).
    """
    fmt = get_format(fmt)
    x = as_float_array(values, "values").astype(np.float64).ravel()
    x = x[np.isfinite(x) & (x != 0)]
    with Monitor() as m:  # the exact event counts of rounding these values to fmt
        _round(x, fmt, site="histogram")
    counts = m.counts.get("histogram", {"underflow": 0, "overflow": 0})
    under = counts["underflow"] / x.size if x.size else 0.0
    over = counts["overflow"] / x.size if x.size else 0.0
    e = np.log2(np.abs(x))
    lo_sub = np.log2(fmt.smallest_subnormal)
    top = np.log2(fmt.max)
    if bins is None:
        left = np.floor(min(e.min(), lo_sub - 2)) if e.size else lo_sub - 2
        right = np.ceil(max(e.max(), top + 2)) if e.size else top + 2
        bins = np.arange(left, right + 1)
    ax = _axes(ax)
    x0, x1 = (bins[0], bins[-1]) if np.ndim(bins) else (lo_sub - 4, top + 4)
    under_edge = lo_sub - 1 if fmt.subnormals else fmt.emin
    zones = [(x0, under_edge, "tab:red", 0.15, "underflow to 0"),
             (lo_sub - 1, fmt.emin, "tab:orange", 0.15, "subnormal") if fmt.subnormals else None,
             (fmt.emin, top, "tab:green", 0.12, "normal range"),
             (top, x1, "tab:purple", 0.15, "overflow")]
    for zone in zones:
        if zone is None:
            continue
        lo, hi, color, alpha, label = zone
        lo, hi = max(lo, x0), min(hi, x1)  # only the part inside the plotted range
        if lo < hi:
            ax.axvspan(lo, hi, color=color, alpha=alpha, label=label)
    ax.hist(e, bins=bins, color="tab:blue", label=f"log2|x| ({x.size} non-zero values)")
    ax.set_xlabel("log2 |x|")
    ax.set_ylabel("count")
    ax.set_title(f"{fmt.name}: {under:.1%} underflow to 0, {over:.1%} overflow")
    ax.legend(loc="upper left", fontsize="small")
    return ax


def rounding_error(
    fmt: Format | str, lo: float, hi: float, *, n: int = 4001, ax: Any = None
) -> Any:
    """Absolute error of rounding ``n`` evenly spaced points of [lo, hi] to fmt (nearest-even).

    The sawtooth's teeth are the ulp steps; the dashed lines are +-ulp/2. A second y axis shows
    the relative error |err| / |x| (zero where x is 0). ``lo <= hi`` must be finite and ``n``
    an integer in 1..MAX_SAMPLES (a bool or a float is refused, naming it).
    """
    fmt = get_format(fmt)
    lo, hi = _range(lo, hi, finite=True)
    n = _validate.integer("n", n, 1, MAX_SAMPLES, "(points on [lo, hi])")
    x = np.linspace(lo, hi, n)
    r = _round(x, fmt)
    err = r - x
    finite = np.isfinite(r)
    ax = _axes(ax)
    ax.plot(x[finite], err[finite], color="tab:blue", lw=1, label="rounded - x")
    # half the spacing of fmt's grid around each point: the largest error nearest-even allows
    mag = np.maximum(np.abs(x), fmt.smallest_normal)
    ulp = 2.0 ** (np.floor(np.log2(mag)) - fmt.mantissa_bits)
    ax.plot(x, ulp / 2, "k--", lw=0.8, label="+-ulp/2")
    ax.plot(x, -ulp / 2, "k--", lw=0.8)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(x != 0, np.abs(err) / np.abs(x), 0.0)
    twin = ax.twinx()
    twin.plot(x[finite], rel[finite], color="tab:orange", lw=0.8, alpha=0.7,
              label="relative |error|")
    twin.set_ylabel("relative error")
    ax.set_xlabel("x")
    ax.set_ylabel("absolute error")
    ax.set_title(f"rounding to {fmt.name} (nearest-even) on [{lo:g}, {hi:g}]")
    lines = ax.get_legend_handles_labels()
    more = twin.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], loc="upper left", fontsize="small")
    return ax
