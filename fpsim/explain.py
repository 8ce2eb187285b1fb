"""``explain``: how one number is rounded to a format, step by step, in words and bits.

The steps follow ``fpsim.round_scalar`` (the specification) on the exact value of the input:

1. the exact input (decimal, hex, binary) and the grid spacing ``2^q`` where it lies;
2. its two neighbours on that grid, ``k * 2^q <= |x| < (k + 1) * 2^q``, with their bit fields;
3. the bits of ``|x| / 2^q`` after the kept significand ``k``: guard (the first dropped bit,
   worth half an ulp), round (the next) and sticky (OR of all the rest), and the mode's choice;
4. overflow past ``max`` and underflow to zero, in words;
5. the result: bit fields ``S EEEEE MMMMMMMMMM``, value as ``sign × 2^e × significand``, class,
   and the absolute, relative and ulp error (ulp = ``2^q``, the spacing at the input).

The input is taken at its exact float value (a Python float is a float64; the command line
parses VALUE to the nearest float64). Stochastic rounding shows both possible results with
their probabilities.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from fpsim.bits import decompose, nan_code, to_bits
from fpsim.catalog import get_format
from fpsim.formats import Format
from fpsim.rounding import (
    RoundingMode,
    code_is_odd,
    floor_log2,
    get_mode,
    quantum_exponent,
    resolve_overflow,
    round_integer,
    rounds_toward_zero,
)

_LABEL = 12  # width of the label column


@dataclass(frozen=True)
class Explanation:
    """The explanation's text and its outcome(s): one result, or (k, k + 1) for stochastic."""

    results: tuple[float, ...]
    probabilities: tuple[float, ...]
    lines: tuple[str, ...]

    @property
    def result(self) -> float:
        """The rounded value (for stochastic rounding of an inexact value: the up outcome)."""
        return self.results[-1]

    def __str__(self) -> str:
        return "\n".join(self.lines)


def _line(label: str, text: str) -> str:
    return f"{label:<{_LABEL}}{text}" if label else f"{'':<{_LABEL}}{text}"


def _num(v: float | Fraction) -> str:
    """A value as Python prints the float (shortest repr), without a trailing '.0' on integers;
    a grid point beyond float64's range as ``m × 2^e``."""
    try:
        f = float(v)
    except OverflowError:
        e = floor_log2(abs(Fraction(v)))
        return f"{float(v / Fraction(2) ** e)!r} × 2^{e}"
    if math.isfinite(f) and f == int(f) and abs(f) < 2**53:
        return str(int(f)) if f != 0 else ("-0" if math.copysign(1, f) < 0 else "0")
    return repr(f)


def _binary_digits(frac: Fraction, limit: int) -> str:
    """The binary digits of a dyadic ``frac`` in [0, 1) after the point ('' for 0), capped."""
    digits = []
    while frac and len(digits) < limit:
        frac *= 2
        digits.append("1" if frac >= 1 else "0")
        frac -= int(frac)
    return "".join(digits) + ("..." if frac else "")


def _point(whole: int, digits: str) -> str:
    """``whole`` in binary, then the fraction digits after a point (no point if none)."""
    return f"{whole:b}.{digits}" if digits else f"{whole:b}"


def _pow2(e: int) -> str:
    return f"2^{e}"


def field_string(code: int, fmt: Format) -> str:
    """A code as ``S EEEEE MMMMMMMMMM`` (fp16); no mantissa part when M = 0."""
    m_bits, e_bits = fmt.mantissa_bits, fmt.exponent_bits
    sign = code >> (e_bits + m_bits)
    e = (code >> m_bits) & ((1 << e_bits) - 1)
    parts = [str(sign), format(e, f"0{e_bits}b")]
    if m_bits:
        parts.append(format(code & ((1 << m_bits) - 1), f"0{m_bits}b"))
    return " ".join(parts)


def _fields_of(v: float, fmt: Format) -> str:
    return field_string(int(to_bits(v, fmt)), fmt)


def _code_text(code: int, fmt: Format) -> str:
    return f"{field_string(code, fmt)} (0x{code:0{(fmt.bits + 3) // 4}x})"


def _value_bits(v: float, fmt: Format) -> str:
    """The fields of a value of fmt, or why it has none."""
    if math.isnan(v):
        code = nan_code(fmt, math.copysign(1, v) < 0)
        return _code_text(code, fmt) if code is not None else f"none ({fmt.name} has no NaN code)"
    if abs(v) > fmt.max and not math.isinf(v):
        return f"none (beyond max = {_num(fmt.max)})"
    if math.isinf(v) and not fmt.inf:
        return f"none ({fmt.name} has no inf)"
    return _code_text(int(to_bits(v, fmt)), fmt)


def _exact_decimal(x: float, limit: int = 80) -> str:
    """The exact decimal value of a float; past ``limit`` significant digits, the first ones."""
    d = Decimal(x)
    digits = "".join(map(str, d.as_tuple().digits))
    if len(digits) <= limit:
        return str(d)
    sign = "-" if d < 0 else ""
    return (f"{sign}{digits[0]}.{digits[1:limit]}...e{d.adjusted()}, "
            f"{len(digits)} significant digits")


def _sci(v: Fraction) -> str:
    """A positive rational to 6 significant digits, as ``m × 2^e`` beyond float64's range."""
    try:
        return f"{float(v):.6g}"
    except OverflowError:
        e = floor_log2(v)
        return f"{float(v / Fraction(2) ** e):.6g} × 2^{e}"


def _input_lines(x: float) -> list[str]:
    lines = [_line("input:", f"{x!r} (exact decimal {_exact_decimal(x)})")]
    v = abs(Fraction(x))
    e = floor_log2(v)
    mant = v / Fraction(2) ** e
    sign = "-" if x < 0 else ""
    lines.append(_line("", f"= {x.hex()}"))
    lines.append(_line("", f"= {sign}1.{_binary_digits(mant - 1, 64) or '0'} × 2^{e} (binary)"))
    return lines


def _outcome(
    magnitude: Fraction, negative: bool, fmt: Format, mode: RoundingMode, subnormals: bool,
    policy: str, v: Fraction,
) -> tuple[float, list[str]]:
    """The rounded magnitude after the range checks, with the overflow/underflow sentences."""
    sign = -1.0 if negative else 1.0
    size = f"|x| = {_num(v)}" if negative else _num(v)  # the checks compare magnitudes
    if magnitude > fmt.max_exact:
        ulp_max = Fraction(2) ** (fmt.emax - fmt.mantissa_bits)
        threshold = fmt.max_exact + ulp_max / 2
        if rounds_toward_zero(mode, negative):
            return sign * fmt.max, [_line("overflow:", (
                f"{size} rounds past max = {_num(fmt.max)}, but {mode.value} rounds toward "
                f"zero here -> clamps to {_num(sign * fmt.max)}"))]
        result, what = {
            "inf": (sign * math.inf, f"overflows to {_num(sign * math.inf)}"),
            "saturate": (sign * fmt.max, f"saturates to {_num(sign * fmt.max)}"),
            "nan": (math.nan, "becomes NaN"),
        }[policy]
        why_policy = f"overflow policy {policy!r}" + ("" if fmt.inf else f": {fmt.name} has no inf")
        if mode in (RoundingMode.NEAREST_EVEN, RoundingMode.NEAREST_AWAY):
            why = (f"{size} is at least max + ulp/2 = {_num(fmt.max)} + {_num(ulp_max)}/2 = "
                   f"{_num(threshold)}")
        else:
            why = f"{size} rounds away from zero past max = {_num(fmt.max)}"
        return result, [_line("overflow:", f"{why} -> {what} ({why_policy})")]
    zero = -0.0 if negative and fmt.has_negative_zero else 0.0
    zero_text = _num(zero) + ("" if fmt.has_negative_zero or not negative
                              else f" ({fmt.name} has no -0)")
    if magnitude == 0:
        tiny = fmt.smallest_subnormal if subnormals else fmt.smallest_normal
        return zero, [_line("underflow:", (
            f"{size} is below the smallest subnormal {_num(tiny)} and rounds to zero "
            f"-> {zero_text}"))]
    if not subnormals and magnitude < Fraction(2) ** fmt.emin:
        return zero, [_line("underflow:", (
            f"subnormals are off and {_num(magnitude)} is below the smallest normal "
            f"{_num(fmt.smallest_normal)} -> flushed to {zero_text}"))]
    return float(-magnitude if negative else magnitude), []


def _decision(
    k: int, f: Fraction, mode: RoundingMode, negative: bool, odd: bool, m_bits: int
) -> str:
    """Why the mode keeps k or takes k + 1 (magnitudes), from guard, round and sticky.

    ``odd``: the code of ``k * 2^q`` ends in 1 (its significand's last bit, or with no mantissa
    bits the exponent field's)."""
    guard = f >= Fraction(1, 2)
    rest = (f * 2) % 1 != 0
    keep = f"keep k = {k} (toward zero)"
    bump = f"k + 1 = {k + 1} (away from zero)"
    if f == 0:
        return "exact: guard, round and sticky are all 0 -> no rounding"
    if mode is RoundingMode.NEAREST_EVEN:
        if not guard:
            return f"guard 0: less than half an ulp -> {keep}"
        if rest:
            return f"guard 1, round/sticky not all 0: more than half an ulp -> {bump}"
        choice = f"k + 1 = {k + 1} (away from zero, to even)" if odd else keep
        return f"tie (guard 1, round 0, sticky 0), {_parity(k, odd, m_bits)} -> {choice}"
    if mode is RoundingMode.NEAREST_AWAY:
        if guard:
            return f"guard 1: half an ulp or more (ties away from zero) -> {bump}"
        return f"guard 0: less than half an ulp -> {keep}"
    if mode is RoundingMode.TOWARD_ZERO:
        return f"toward_zero drops the guard, round and sticky bits -> {keep}"
    if mode in (RoundingMode.UP, RoundingMode.DOWN):
        direction = "+inf" if mode is RoundingMode.UP else "-inf"
        side = "negative" if negative else "positive"
        away = (mode is RoundingMode.UP) != negative
        return f"{mode.value} (toward {direction}) on a {side} inexact value -> " + (
            bump if away else keep)
    if mode is RoundingMode.ODD:
        if odd:
            return f"inexact and {_parity(k, odd, m_bits)} -> {keep}"
        return (f"inexact and {_parity(k, odd, m_bits)} -> k + 1 = {k + 1} "
                "(odd: marks inexact)")
    return (f"stochastic: k + 1 = {k + 1} with probability f = {float(f):.6g} (the fraction of "
            f"an ulp beyond k), else k = {k}")


def _parity(k: int, odd: bool, m_bits: int) -> str:
    word = "odd" if odd else "even"
    if m_bits == 0 and k > 0:  # every significand is 1: parity is the exponent field's
        return f"the code of k × 2^q ends in {int(odd)} (exponent field {word})"
    return f"kept significand {k} is {word}"


def _result_lines(
    result: float, fmt: Format, x: float, q: int, probability: float | None = None
) -> list[str]:
    shown = _num(result) if not math.isnan(result) else "nan"
    if probability is not None:
        shown += f" with probability {probability:.6g}"
    lines = [_line("result:", shown)]
    lines.append(_line("  bits:", _value_bits(result, fmt)))
    if math.isnan(result):
        lines.append(_line("  class:", "nan"))
        lines.append(_line("error:", "undefined (the result is NaN)"))
        return lines
    d = decompose(result, fmt)
    if math.isinf(result):
        lines.append(_line("  value:", f"{'-' if d.sign else '+'}1 × inf"))
    else:
        sig = Fraction(d.significand)
        sig_bits = _point(int(sig), _binary_digits(sig % 1, 64).ljust(fmt.mantissa_bits, "0"))
        lines.append(_line("  value:", (
            f"{'-' if d.sign else '+'}1 × {_pow2(d.exponent)} × {_num(sig)} "
            f"(significand {sig_bits} in binary)")))
    lines.append(_line("  class:", d.cls))
    if math.isinf(result) or math.isinf(x):
        lines.append(_line("error:", "infinite" if math.isinf(result) != math.isinf(x) else "0"))
        return lines
    err = abs(Fraction(result) - Fraction(x))
    if err == 0:
        lines.append(_line("error:", "0 (exact)"))
        return lines
    rel = _sci(err / abs(Fraction(x)))
    ulps = err / Fraction(2) ** q
    lines.append(_line("error:", (
        f"absolute {_sci(err)}, relative {rel}, {_sci(ulps)} ulp "
        f"(ulp = {_pow2(q)} at x)")))
    return lines


def _special(x: float, fmt: Format, policy: str) -> tuple[float, str]:
    """Result and reason for NaN, inf and zero inputs."""
    negative = math.copysign(1.0, x) < 0
    if math.isnan(x):
        if fmt.has_nan:
            return math.nan, "NaN stays NaN"
        return math.nan, (f"{fmt.name} has no NaN; fpsim keeps NaN in the float32 carrier, "
                          "with no bit pattern of the format")
    if math.isinf(x):
        if fmt.inf:
            return x, f"{_num(x)} stays {_num(x)}"
        sign = -1.0 if negative else 1.0
        result = {"saturate": sign * fmt.max, "nan": math.nan}[policy]
        return result, (f"{fmt.name} has no inf: overflow policy {policy!r} -> "
                        f"{_num(result) if not math.isnan(result) else 'NaN'}")
    if negative and not fmt.has_negative_zero:
        return 0.0, f"{fmt.name} has no -0: -0 becomes +0"
    return x, "zero is exact (its sign is kept)"


def explanation(
    x: float,
    fmt: Format | str,
    mode: str | RoundingMode = "nearest_even",
    *,
    subnormals: bool | None = None,
    overflow: str | None = None,
) -> Explanation:
    """The steps of rounding ``x`` to ``fmt`` as an ``Explanation`` (text plus result(s))."""
    fmt = get_format(fmt)
    mode = get_mode(mode)
    subnormals = fmt.subnormals if subnormals is None else bool(subnormals)
    policy = resolve_overflow(fmt, overflow)
    if isinstance(x, (str, bytes, complex)) or not hasattr(x, "__float__"):
        raise TypeError(f"x must be a real number, got {x!r} ({type(x).__name__})")
    x = float(x)
    layout = "|".join(part for part in ("S", "E" * fmt.exponent_bits, "M" * fmt.mantissa_bits)
                      if part)
    lines = [f"{x!r} -> {fmt.name} ({layout}, bias {fmt.bias}), rounding {mode.value}"]

    if not math.isfinite(x) or x == 0:
        result, why = _special(x, fmt, policy)
        lines.append(_line("input:", _num(x) if not math.isnan(x) else "nan"))
        lines.append(_line("decision:", why))
        lines += _result_lines(result, fmt, x, 0)
        return Explanation((result,), (1.0,), tuple(lines))

    negative = x < 0
    v = abs(Fraction(x))
    lines += _input_lines(x)
    e = floor_log2(v)
    q = quantum_exponent(v, fmt, subnormals)
    where = "normal range" if e >= fmt.emin else (
        f"subnormal range: below {_pow2(fmt.emin)} the spacing stays {_pow2(q)}" if subnormals
        else "below the normal range; subnormals off: rounded at full precision, then flushed "
        "to zero")
    spacing = _pow2(q) + (f" = {_num(2.0**q)}" if -1074 <= q else "")  # float64 shows 2^-1074+
    lines.append(_line("grid:", f"spacing (ulp) {spacing} here ({where})"))

    scaled = v / Fraction(2) ** q
    k = math.floor(scaled)
    f = scaled - k
    lo, hi = k * Fraction(2) ** q, (k + 1) * Fraction(2) ** q
    if f == 0 and not subnormals and e < fmt.emin:
        lines.append(_line("neighbours:", "none needed: x lies on the full-precision grid"))
    elif f == 0:
        lines.append(_line("neighbours:", f"none needed: x is a value of {fmt.name}"))
    elif lo > fmt.max_exact:
        lines.append(_line("neighbours:", (
            f"none: |x| is beyond max = {_num(fmt.max)} [{_fields_of(fmt.max, fmt)}]; "
            f"the grid continued past max has {_num(lo)} <= |x| < {_num(hi)}")))
    else:
        ends = [(lo, "k"), (hi, "k + 1")]
        if negative:
            ends = [(-hi, "k + 1"), (-lo, "k")]
        shown = [_neighbour(val, name, fmt, negative) for val, name in ends]
        lines.append(_line("neighbours:", f"{shown[0]} < x < {shown[1]}"))
    guard, round_bit = int(f * 2), int(f * 4) % 2
    sticky = int((f * 4) % 1 != 0)
    lines.append(_line("bits:", (
        f"|x| / {_pow2(q)} = {_point(k, _binary_digits(f, 40))}  -> kept k = {k:b} (= {k}), "
        f"guard {guard}, round {round_bit}, sticky {sticky}")))
    odd = code_is_odd(k, q, fmt)
    lines.append(_line("decision:", _decision(k, f, mode, negative, odd, fmt.mantissa_bits)))

    if mode is RoundingMode.STOCHASTIC and f != 0:
        picks, probs = (k, k + 1), (float(1 - f), float(f))
    else:
        picks, probs = (round_integer(k, f, mode, negative, None, odd),), (1.0,)
    results = []
    for pick, prob in zip(picks, probs, strict=True):
        if pick == k + 1 and _carries(k, e, fmt, subnormals):
            into = ("out of the subnormals into the smallest normal" if e < fmt.emin
                    and subnormals else "into the next binade")
            lines.append(_line("carry:", (
                f"k + 1 = {k + 1} is a power of two: the significand carries {into}, "
                f"{_num(Fraction(k + 1) * Fraction(2) ** q)}")))
        result, notes = _outcome(pick * Fraction(2) ** q, negative, fmt, mode, subnormals,
                                 policy, v)
        lines += notes
        lines += _result_lines(result, fmt, x, q, None if len(picks) == 1 else prob)
        results.append(result)
    return Explanation(tuple(results), probs, tuple(lines))


def _carries(k: int, e: int, fmt: Format, subnormals: bool) -> bool:
    """Does k + 1 leave the binade of k (a carry out of the significand)?"""
    m = fmt.mantissa_bits
    if e >= fmt.emin or not subnormals:
        return k + 1 == 2 ** (m + 1)
    return k + 1 == 2**m  # the largest subnormal carries into the smallest normal


def _neighbour(val: Fraction, name: str, fmt: Format, negative: bool) -> str:
    """A grid neighbour of x with its bit fields, or a note when it lies beyond max."""
    if abs(val) > fmt.max_exact:
        return f"{_num(val)} ({name}: beyond max = {_num(fmt.max)}, not in {fmt.name})"
    fv = float(val)
    if fv == 0 and negative and fmt.has_negative_zero:
        fv = -0.0
    try:
        return f"{_num(fv)} [{_fields_of(fv, fmt)}]"
    except ValueError:  # subnormals off: the unbounded-precision grid is finer than the format
        return f"{_num(fv)} (below the smallest normal; subnormals are off)"


def explain(
    x: float,
    fmt: Format | str,
    mode: str | RoundingMode = "nearest_even",
    *,
    subnormals: bool | None = None,
    overflow: str | None = None,
) -> str:
    """How ``x`` rounds to ``fmt`` under ``mode``, step by step (the text of ``explanation``).

    The result always equals ``fpsim.round(x, fmt, mode)`` (for stochastic rounding: one of the
    two results shown, with the probabilities shown).

    >>> print(explain(65520.0, "fp16"))  # doctest: +ELLIPSIS
    65520.0 -> float16 (S|EEEEE|MMMMMMMMMM, bias 15), rounding nearest_even
    ...
    overflow:   65520 is at least max + ulp/2 = 65504 + 32/2 = 65520 -> overflows to inf ...
    result:     inf
    ...
    """
    return str(explanation(x, fmt, mode, subnormals=subnormals, overflow=overflow))
