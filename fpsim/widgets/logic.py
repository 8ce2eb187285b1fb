"""The explorers' logic as pure functions: every widget callback is one of these plus drawing.

Nothing here imports ipywidgets; each function takes plain values (a code, a value, a format,
a mode) and returns a small frozen record, so the explorers are tested without a frontend.

    >>> decode_code(0x3C00, "fp16").value
    1.0
    >>> hex(toggle_bit(0x3C00, 15, "fp16"))  # the sign bit of fp16
    '0xbc00'
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fpsim import _validate
from fpsim.bits import classify, from_bits, to_bits
from fpsim.catalog import get_format
from fpsim.explain import explain, field_string
from fpsim.formats import Format
from fpsim.grid import ulp, values
from fpsim.monitor import monitor
from fpsim.quantize import as_float_array
from fpsim.quantize import round as round_array
from fpsim.rounding import MODE_NAMES, get_mode

# --- the bit-toggle explorer -----------------------------------------------------------------


@dataclass(frozen=True)
class CodeView:
    """One code of a format, decoded: its fields, value, class and ``fpsim.explain`` text."""

    fmt: Format
    code: int
    sign: int
    exponent_field: int
    mantissa_field: int
    value: float
    cls: str
    fields: str
    explanation: str


def bit_roles(fmt: Format | str) -> list[str]:
    """The role of each bit, most significant first: "sign", "exponent" or "mantissa"."""
    f = get_format(fmt)
    return (["sign"] * int(f.signed) + ["exponent"] * f.exponent_bits
            + ["mantissa"] * f.mantissa_bits)


def _check_code(code: int, f: Format) -> int:
    return _validate.integer("code", code, 0, 2**f.bits - 1, f"for {f.name}")


def toggle_bit(code: int, bit: int, fmt: Format | str) -> int:
    """``code`` with bit number ``bit`` flipped (0 is the least significant mantissa bit)."""
    f = get_format(fmt)
    code = _check_code(code, f)
    bit = _validate.integer("bit", bit, 0, f.bits - 1, f"for {f.name}")
    return code ^ (1 << bit)


def decode_code(code: int, fmt: Format | str) -> CodeView:
    """Decode ``code`` of ``fmt``: the three fields, the value, its class and its explanation."""
    f = get_format(fmt)
    code = _check_code(code, f)
    m, e = f.mantissa_bits, f.exponent_bits
    value = float(from_bits(code, f))
    sign = (code >> (m + e)) & 1 if f.signed else 0
    return CodeView(
        fmt=f, code=code, sign=sign, exponent_field=(code >> m) & (2**e - 1),
        mantissa_field=code & (2**m - 1), value=value, cls=str(classify(value, f)),
        fields=field_string(code, f), explanation=explain(value, f),
    )


# --- the value slider -----------------------------------------------------------------------


@dataclass(frozen=True)
class Neighbourhood:
    """Where x falls in a format: its neighbours below and above, the rounded value, the error."""

    x: float
    below: float
    above: float
    rounded: float
    ulp: float
    abs_error: float
    rel_error: float
    error_ulps: float
    cls: str


def neighbourhood(x: float, fmt: Format | str, mode: str = "nearest_even") -> Neighbourhood:
    """x's neighbours in ``fmt`` (equal to x when x is a value), x rounded with ``mode``
    (``stochastic`` is refused: it has no single result) and the error of that rounding.

    The ulp is the gap at x (``fpsim.ulp``); relative error is against |x| (inf at x = 0 unless
    the error is 0)."""
    f = get_format(fmt)
    if get_mode(mode).name.lower() == "stochastic":
        raise ValueError("mode must be a deterministic rounding mode, got 'stochastic' "
                         "(use compare_modes for its probability of rounding up)")
    x = _number("x", x)
    if not np.isfinite(x):
        raise ValueError(f"x must be a finite number, got {x!r}")
    below = float(round_array(x, f, "down"))
    above = float(round_array(x, f, "up"))
    rounded = float(round_array(x, f, mode))
    gap = float(ulp(x, f))
    err = abs(rounded - x)
    rel = err / abs(x) if x else (0.0 if err == 0 else np.inf if err == err else np.nan)
    return Neighbourhood(x=x, below=below, above=above, rounded=rounded, ulp=gap, abs_error=err,
                         rel_error=rel, error_ulps=err / gap, cls=str(classify(rounded, f)))


# --- the rounding-mode comparer -------------------------------------------------------------


@dataclass(frozen=True)
class ModeResult:
    """x rounded in one mode; for ``stochastic``, ``p_up`` is the probability of the upper
    neighbour and ``value`` the expected result."""

    mode: str
    value: float
    error: float
    p_up: float | None = None


def compare_modes(x: float, fmt: Format | str) -> list[ModeResult]:
    """x rounded to ``fmt`` in every mode of ``fpsim.MODE_NAMES``, in that order."""
    f = get_format(fmt)
    near = neighbourhood(x, f)
    lo, hi = near.below, near.above
    # Past max one neighbour is infinite: the stochastic odds use the gap max would have to
    # the next binade's first value (lo + ulp), as fpsim's kernel does.
    lo_p = lo if np.isfinite(lo) else hi - near.ulp
    hi_p = hi if np.isfinite(hi) else lo + near.ulp
    p_up = (near.x - lo_p) / (hi_p - lo_p) if hi_p != lo_p else 0.0
    p_up = min(max(p_up, 0.0), 1.0)  # past that virtual neighbour: overflow for certain
    if p_up in (0.0, 1.0):
        mean = lo if p_up == 0.0 else hi
    elif np.isfinite(lo) and np.isfinite(hi):
        mean = lo + p_up * (hi - lo)
    else:
        mean = hi if not np.isfinite(hi) else lo  # an infinite neighbour: infinite mean
    out = []
    for mode in MODE_NAMES:
        if mode == "stochastic":
            out.append(ModeResult(mode, mean, mean - near.x, p_up))
        else:
            value = float(round_array(near.x, f, mode))
            out.append(ModeResult(mode, value, value - near.x))
    return out


# --- the format builder ---------------------------------------------------------------------


def build_format(exponent_bits: int, mantissa_bits: int, bias: int | None = None, *,
                 nan: str = "ieee", subnormals: bool = True) -> Format:
    """A Format from the builder's controls, named like ml_dtypes (``e4m3``, ``e4m3fn``,
    ``e5m2b11``, ``..._ftz`` without subnormals). ``nan`` is the Format's: "ieee" keeps inf,
    the others ("fn", "fnuz", "none") have none. Format itself validates every field."""
    inf = nan == "ieee"
    default_bias = 2 ** (exponent_bits - 1) - 1 if isinstance(exponent_bits, int) else None
    name = f"e{exponent_bits}m{mantissa_bits}"
    name += "" if bias is None or bias == default_bias else f"b{bias}"
    name += "" if nan in ("ieee", "none") else nan
    name += "" if subnormals else "_ftz"
    return Format(name, exponent_bits, mantissa_bits, bias=bias,  # type: ignore[arg-type]
                  subnormals=subnormals, inf=inf, nan=nan)  # (None: Format derives the bias)


def format_facts(fmt: Format | str) -> dict[str, float | int | str]:
    """What a format's fields give: bits, bias, range, eps and how many finite values it has
    (formats of at most 16 bits; +0 and -0 count once)."""
    f = get_format(fmt)
    facts: dict[str, float | int | str] = {
        "name": f.name, "bits": f.bits, "bias": f.bias, "max": f.max,
        "smallest normal": f.smallest_normal,
        "smallest subnormal": f.smallest_subnormal if f.subnormals else f.smallest_normal,
        "eps": f.eps, "overflow": str(f.overflow),
    }
    if f.bits <= 16:
        facts["finite values"] = len(values(f))
    return facts


# --- the loss-scale slider ------------------------------------------------------------------


@dataclass(frozen=True)
class ScaledFates:
    """What happens to gradients multiplied by 2^log2_scale and stored in a format: counts of
    the non-zero gradients that underflow to 0, become subnormal or overflow, as
    ``fpsim.monitor`` counts them."""

    log2_scale: int
    nonzero: int
    underflow: int
    subnormal: int
    overflow: int

    @property
    def kept(self) -> int:
        """Non-zero gradients that neither underflowed nor overflowed."""
        return self.nonzero - self.underflow - self.overflow


# Past these, every non-zero float64 times 2^log2_scale lies beyond float64's max (2^1024 >
# 2^-1074 * 2^2100) or below half its smallest subnormal (2^-1075 > 2^1024 * 2^-2100).
_LOG2_SCALE_CLAMP = 2100


def scaled_fates(gradients: np.ndarray, log2_scale: int, fmt: Format | str = "fp16"
                 ) -> ScaledFates:
    """Round ``gradients * 2**log2_scale`` to ``fmt`` (nearest even) and count the events.

    The product is exact in float64 while it stays inside float64's range. Where it leaves it
    (``scaled_fates(g, 2000)``, ``scaled_fates(g, -2000)``), the float64 product would be inf
    or 0, an input the monitor counts as no event; each such element is rounded as
    +-float64 max or +-2^-1074 instead, a stand-in whose fate in every format is that of the
    exact product (far beyond the format's max, or far below half its smallest value): it
    counts as an overflow or an underflow. float64 products below 2^-1022 lose bits, but
    they lie far below the smallest value of every fpsim format (>= 2^-149), so their fate is
    that of the exact product too.

    >>> scaled_fates(np.ones(4), 2000).overflow, scaled_fates(np.ones(4), -2000).underflow
    (4, 4)
    """
    f = get_format(fmt)
    if isinstance(log2_scale, bool | np.bool_) or not isinstance(log2_scale, int | np.integer):
        raise ValueError(f"log2_scale must be an integer (the scale is 2**log2_scale), "
                         f"got {log2_scale!r}")  # any integer: past +-2100 all fates are alike
    g = as_float_array(gradients, "gradients").astype(np.float64).ravel()
    g = g[np.isfinite(g) & (g != 0)]
    k = min(max(int(log2_scale), -_LOG2_SCALE_CLAMP), _LOG2_SCALE_CLAMP)
    with np.errstate(over="ignore", under="ignore"):
        scaled = np.ldexp(g, k)
    tiny = np.copysign(np.ldexp(1.0, -1074), g)
    scaled = np.where(scaled == 0, tiny, scaled)  # below float64: the exact product's fate
    scaled = np.where(np.isinf(scaled), np.copysign(np.finfo(np.float64).max, g), scaled)
    with monitor() as m:
        round_array(scaled, f)
    counts = m.total()
    return ScaledFates(int(log2_scale), int(g.size), counts["underflow"], counts["subnormal"],
                       counts["overflow"])


def to_code(x: float, fmt: Format | str) -> int:
    """The code of x rounded to nearest even in ``fmt`` (the explorer's starting code)."""
    f = get_format(fmt)
    return int(to_bits(round_array(_number("x", x), f), f))


def _number(name: str, x: object) -> float:
    """x as one float: a real number (numpy's too, a 0-d array, a numeric string as float()
    reads it); else a ValueError naming ``name`` (an array of several is not one number)."""
    try:
        if getattr(x, "ndim", 0) != 0 or isinstance(x, (list, tuple)):
            raise TypeError
        return float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be one real number, got {x!r:.60} "
                         f"(a {type(x).__name__})") from None
