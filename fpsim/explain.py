"""``explain``: how one number is rounded to a format, step by step, in words and bits.

The text is the ``RoundingTrace`` of ``fpsim.rounding.trace`` (the steps of ``round_scalar``, the
specification) put into words; no rounding decision is taken here:

1. the exact input (decimal, hex, binary) and the grid spacing ``2^q`` where it lies;
2. its two neighbours on that grid, ``k * 2^q <= |x| < (k + 1) * 2^q``, with their bit fields;
3. the bits of ``|x| / 2^q`` after the kept significand ``k``: guard (the first dropped bit,
   worth half an ulp), round (the next) and sticky (OR of all the rest); the mode's rule (from
   ``MODE_RULES``) and its choice;
4. overflow past ``max`` and underflow to zero, in words;
5. the result: bit fields ``S EEEEE MMMMMMMMMM``, value as ``sign × 2^e × significand``, class,
   and the absolute, relative and ulp error (ulp = ``2^q``, the spacing at the input).

The input is taken at its exact float value (a Python float is a float64; the command line
parses VALUE to the nearest float64). Stochastic rounding shows both possible results with
their probabilities. How numbers and codes are written is in ``fpsim.explain_numbers``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from fpsim.bits import decompose
from fpsim.catalog import get_format
from fpsim.explain_numbers import (
    binary_digits,
    binary_point,
    exact_decimal,
    field_string,
    fields_of,
    num,
    pow2,
    sci,
    value_bits,
)
from fpsim.formats import Format
from fpsim.rounding import (
    Outcome,
    RoundingMode,
    RoundingTrace,
    Why,
    exact_value,
    floor_log2,
    get_mode,
    mode_rule,
    resolve_overflow,
    trace,
)

__all__ = ["Explanation", "ExplanationText", "explain", "explanation", "field_string"]

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


class ExplanationText(str):
    """The text ``explain`` returns: a ``str`` (equal to the text, every str method works and
    returns a plain str) whose ``repr`` is the text itself, so a REPL or notebook shows the
    lines instead of one quoted string full of ``\\n``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str.__str__(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython's display
        printer.text(str.__str__(self))


def _line(label: str, text: str) -> str:
    return f"{label:<{_LABEL}}{text}"


# --- step 3: the mode's decision, one sentence per reason ---------------------------------------
def _keep(t: RoundingTrace) -> str:
    return f"keep k = {t.k} (toward zero)"


def _bump(t: RoundingTrace) -> str:
    return f"k + 1 = {t.k + 1} (away from zero)"


def _parity(t: RoundingTrace) -> str:
    word = "odd" if t.odd else "even"
    if not t.fmt.zero:
        return "the significand 1 is odd (exponent-only format, ml_dtypes' E8M0 rule)"
    if t.fmt.mantissa_bits == 0 and t.k > 0:  # every significand is 1: the exponent's parity
        return f"the code of k × 2^q ends in {int(t.odd)} (exponent field {word})"
    return f"kept significand {t.k} is {word}"


def _directed(t: RoundingTrace) -> str:
    up = t.pick > t.k
    direction = "+inf" if up != t.negative else "-inf"  # away from zero on the + side: +inf
    side = "negative" if t.negative else "positive"
    return (f"{t.mode.value} (toward {direction}) on a {side} inexact value -> "
            + (_bump(t) if up else _keep(t)))


def _draw(t: RoundingTrace) -> str:
    return (f"{t.mode.value}: k + 1 = {t.k + 1} with probability f = {float(t.f):.6g} (the "
            f"fraction of an ulp beyond k), else k = {t.k}")


_TIE = "tie (guard 1, round 0, sticky 0)"
WHY_TEXT: dict[Why, Callable[[RoundingTrace], str]] = {
    Why.EXACT: lambda t: "exact: guard, round and sticky are all 0 -> no rounding",
    Why.BELOW_HALF: lambda t: f"guard 0: less than half an ulp -> {_keep(t)}",
    Why.ABOVE_HALF: lambda t: (
        f"guard 1, round/sticky not all 0: more than half an ulp -> {_bump(t)}"),
    Why.TIE_KEEPS_EVEN: lambda t: f"{_TIE}, {_parity(t)} -> {_keep(t)}",
    Why.TIE_LEAVES_ODD: lambda t: (
        f"{_TIE}, {_parity(t)} -> k + 1 = {t.k + 1} (away from zero, to even)"),
    Why.HALF_OR_MORE: lambda t: (
        f"guard 1: half an ulp or more (ties away from zero) -> {_bump(t)}"),
    Why.TRUNCATED: lambda t: (
        f"{t.mode.value} drops the guard, round and sticky bits -> {_keep(t)}"),
    Why.TOWARD_ZERO_FOR_SIGN: _directed,
    Why.AWAY_FOR_SIGN: _directed,
    Why.KEPT_ODD: lambda t: f"inexact and {_parity(t)} -> {_keep(t)}",
    Why.MADE_ODD: lambda t: (
        f"inexact and {_parity(t)} -> k + 1 = {t.k + 1} (odd: marks inexact)"),
    Why.DRAW_BELOW_F: _draw,
    Why.DRAW_NOT_BELOW_F: _draw,
    Why.LOWEST_BINADE_UP: lambda t: (
        f"inexact in the lowest binade of {t.fmt.name}: ml_dtypes rounds it up (it holds only "
        f"float32 subnormals, rounded in float32's bit pattern) -> {_bump(t)}"),
}


def decision_text(t: RoundingTrace) -> str:
    """Why the mode kept k or took k + 1 (magnitudes), from guard, round and sticky."""
    if t.why is None:
        raise ValueError("only a finite non-zero input has a rounding decision")
    return WHY_TEXT[t.why](t)


# --- step 4: overflow and underflow, one sentence per outcome -----------------------------------
def _size(t: RoundingTrace) -> str:
    assert t.exact is not None
    return f"|x| = {num(abs(t.exact))}" if t.negative else num(t.exact)  # compares magnitudes


def _zero_text(t: RoundingTrace) -> str:
    no_minus = t.negative and not t.fmt.has_negative_zero
    return num(t.result) + (f" ({t.fmt.name} has no -0)" if no_minus else "")


def _overflow(t: RoundingTrace) -> str:
    fmt = t.fmt
    ulp_max = Fraction(2) ** (fmt.emax - fmt.mantissa_bits)
    if mode_rule(t.mode).nearest:
        why = (f"{_size(t)} is at least max + ulp/2 = {num(fmt.max)} + {num(ulp_max)}/2 = "
               f"{num(fmt.max_exact + ulp_max / 2)}")
    else:
        why = f"{_size(t)} rounds away from zero past max = {num(fmt.max)}"
    what = {"inf": f"overflows to {num(t.result)}", "saturate": f"saturates to {num(t.result)}",
            "nan": "becomes NaN"}[t.policy]
    why_policy = f"overflow policy {t.policy!r}" + ("" if fmt.inf else f": {fmt.name} has no inf")
    return f"{why} -> {what} ({why_policy})"


def _underflow(t: RoundingTrace) -> str:
    tiny = t.fmt.smallest_subnormal if t.subnormals else t.fmt.smallest_normal
    return (f"{_size(t)} is below the smallest subnormal {num(tiny)} and rounds to zero "
            f"-> {_zero_text(t)}")


OUTCOME_TEXT: dict[Outcome, tuple[str, Callable[[RoundingTrace], str]] | None] = {
    Outcome.IN_RANGE: None,
    Outcome.CLAMPED: ("overflow:", lambda t: (
        f"{_size(t)} rounds past max = {num(t.fmt.max)}, but {t.mode.value} rounds toward "
        f"zero here -> clamps to {num(t.result)}")),
    Outcome.OVERFLOW: ("overflow:", _overflow),
    Outcome.UNDERFLOW: ("underflow:", _underflow),
    Outcome.FLUSHED: ("underflow:", lambda t: (
        f"subnormals are off and {num(t.magnitude)} is below the smallest normal "
        f"{num(t.fmt.smallest_normal)} -> flushed to {_zero_text(t)}")),
    Outcome.RAISED: ("underflow:", lambda t: (
        f"{_size(t)} is below the smallest value {num(t.fmt.smallest_normal)} and "
        f"{t.fmt.name} has no zero -> {num(t.result)}")),
}


def _nan_input(t: RoundingTrace) -> str:
    return "NaN stays NaN" if t.fmt.has_nan else (
        f"{t.fmt.name} has no NaN; fpsim keeps NaN in the float32 carrier, with no bit pattern "
        "of the format")


def _inf_input(t: RoundingTrace) -> str:
    if t.fmt.inf:
        return f"{num(t.result)} stays {num(t.result)}"
    shown = num(t.result) if not math.isnan(t.result) else "NaN"
    return f"{t.fmt.name} has no inf: overflow policy {t.policy!r} -> {shown}"


def _zero_input(t: RoundingTrace) -> str:
    if t.negative and not t.fmt.has_negative_zero:
        return f"{t.fmt.name} has no -0: -0 becomes +0"
    return "zero is exact (its sign is kept)"


SPECIAL_TEXT: dict[Outcome, Callable[[RoundingTrace], str]] = {
    Outcome.NAN: _nan_input, Outcome.INFINITY: _inf_input, Outcome.ZERO: _zero_input,
    Outcome.NEGATIVE: lambda t: (
        f"{t.fmt.name} is unsigned: a negative number is outside its range -> "
        + ("NaN" if t.fmt.has_nan else "0")),
    Outcome.NO_ZERO: lambda t: f"{t.fmt.name} has no zero: zero becomes NaN",
}


# --- steps 1, 2 and 5 --------------------------------------------------------------------------
def _input_lines(x: float) -> list[str]:
    lines = [_line("input:", f"{x!r} (exact decimal {exact_decimal(x)})")]
    v = abs(Fraction(x))
    e = floor_log2(v)
    mant = v / Fraction(2) ** e
    sign = "-" if x < 0 else ""
    lines.append(_line("", f"= {x.hex()}"))
    lines.append(_line("", f"= {sign}1.{binary_digits(mant - 1, 64) or '0'} × 2^{e} (binary)"))
    return lines


def _grid_line(t: RoundingTrace) -> str:
    fmt, q = t.fmt, t.q
    where = "normal range" if t.e >= fmt.emin else (
        f"subnormal range: below {pow2(fmt.emin)} the spacing stays {pow2(q)}" if t.subnormals
        else "below the normal range; subnormals off: rounded at full precision, then flushed "
        "to zero" if fmt.zero else "below the smallest value: raised to it (no zero)")
    spacing = pow2(q) + (f" = {num(2.0**q)}" if -1074 <= q else "")  # float64 shows 2^-1074+
    return _line("grid:", f"spacing (ulp) {spacing} here ({where})")


def _neighbours_line(t: RoundingTrace) -> str:
    fmt = t.fmt
    lo, hi = t.k * Fraction(2) ** t.q, (t.k + 1) * Fraction(2) ** t.q
    if t.f == 0 and not t.subnormals and t.e < fmt.emin:
        return _line("neighbours:", "none needed: x lies on the full-precision grid")
    if t.f == 0:
        return _line("neighbours:", f"none needed: x is a value of {fmt.name}")
    if lo > fmt.max_exact:
        return _line("neighbours:", (
            f"none: |x| is beyond max = {num(fmt.max)} [{fields_of(fmt.max, fmt)}]; "
            f"the grid continued past max has {num(lo)} <= |x| < {num(hi)}"))
    ends = [(-hi, "k + 1"), (-lo, "k")] if t.negative else [(lo, "k"), (hi, "k + 1")]
    shown = [_neighbour(val, name, fmt, t.negative) for val, name in ends]
    return _line("neighbours:", f"{shown[0]} < x < {shown[1]}")


def _neighbour(val: Fraction, name: str, fmt: Format, negative: bool) -> str:
    """A grid neighbour of x with its bit fields, or a note when it lies beyond max."""
    if abs(val) > fmt.max_exact:
        return f"{num(val)} ({name}: beyond max = {num(fmt.max)}, not in {fmt.name})"
    fv = float(val)
    if fv == 0 and negative and fmt.has_negative_zero:
        fv = -0.0
    try:
        return f"{num(fv)} [{fields_of(fv, fmt)}]"
    except ValueError:  # subnormals off: the unbounded-precision grid is finer than the format
        return f"{num(fv)} (below the smallest normal; subnormals are off)"


def _carry_line(t: RoundingTrace) -> str:
    into = ("out of the subnormals into the smallest normal" if t.e < t.fmt.emin
            and t.subnormals else "into the next binade")
    return _line("carry:", (
        f"k + 1 = {t.k + 1} is a power of two: the significand carries {into}, "
        f"{num(t.magnitude)}"))


def _result_lines(
    result: float, fmt: Format, x: float, q: int, probability: float | None = None
) -> list[str]:
    shown = num(result) if not math.isnan(result) else "nan"
    if probability is not None:
        shown += f" with probability {probability:.6g}"
    lines = [_line("result:", shown), _line("  bits:", value_bits(result, fmt))]
    if math.isnan(result):
        lines.append(_line("  class:", "nan"))
        lines.append(_line("error:", "undefined (the result is NaN)"))
        return lines
    d = decompose(result, fmt)
    if math.isinf(result):
        lines.append(_line("  value:", f"{'-' if d.sign else '+'}1 × inf"))
    else:
        sig = Fraction(float(d.significand))
        sig_bits = binary_point(int(sig), binary_digits(sig % 1, 64).ljust(fmt.mantissa_bits, "0"))
        lines.append(_line("  value:", (
            f"{'-' if d.sign else '+'}1 × {pow2(int(d.exponent))} × {num(sig)} "
            f"(significand {sig_bits} in binary)")))
    lines.append(_line("  class:", str(d.cls)))
    if math.isinf(result) or math.isinf(x):
        lines.append(_line("error:", "infinite" if math.isinf(result) != math.isinf(x) else "0"))
        return lines
    err = abs(Fraction(result) - Fraction(x))
    if err == 0:
        lines.append(_line("error:", "0 (exact)"))
        return lines
    ulps = err / Fraction(2) ** q
    lines.append(_line("error:", (
        f"absolute {sci(err)}, relative {sci(err / abs(Fraction(x)))}, {sci(ulps)} ulp "
        f"(ulp = {pow2(q)} at x)")))
    return lines


def _float64(x: object) -> float:
    """x as the float64 it is; a number that is not one (a Fraction such as 1/3, a numpy
    integer beyond 2^53, a longdouble with more bits, an int beyond float64's range) is
    refused: explaining its nearest float64 would explain another rounding than fpsim.round's,
    which rounds the exact value. A 0-d array is its element; other arrays are refused."""
    value = exact_value(x)  # type: ignore[arg-type]  # (it refuses what is not one number)
    if not isinstance(value, Fraction):
        return value
    try:
        nearest = float(value)
    except OverflowError:
        nearest = math.inf
    if math.isfinite(nearest) and Fraction(nearest) == value:
        return nearest
    if not math.isfinite(nearest):
        raise ValueError(
            f"x = {x!r:.60} is beyond float64's range; explain shows how a float64 rounds "
            f"(fpsim.round and fpsim.round_scalar round this exact value)"
        )
    raise ValueError(
        f"x = {x!r:.60} is not a float64 (its nearest float64 is {nearest!r}); explain shows "
        f"how a float64 rounds: pass float(x) to explain that one (fpsim.round and "
        f"fpsim.round_scalar round the exact value, which may round differently)"
    )


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
    resolve_overflow(fmt, overflow)  # validate before x, as round does
    if isinstance(x, (str, bytes, complex)) or not hasattr(x, "__float__"):
        raise TypeError(f"x must be a real number, got {x!r} ({type(x).__name__})")
    x = _float64(x)
    # u = 0 takes k + 1 whenever a draw decides; the draw u = f then gives the k outcome
    t = trace(x, fmt, mode, subnormals=subnormals, overflow=overflow, u=0.0)
    outcomes: tuple[RoundingTrace, ...] = (t,)
    probs: tuple[float, ...] = (1.0,)
    if t.why is Why.DRAW_BELOW_F:
        down = trace(x, fmt, mode, subnormals=subnormals, overflow=overflow, u=t.f)
        outcomes, probs = (down, t), (float(1 - t.f), float(t.f))
    fields = ("S" * fmt.signed, "E" * fmt.exponent_bits, "M" * fmt.mantissa_bits)
    layout = "|".join(part for part in fields if part)
    lines = [f"{x!r} -> {fmt.name} ({layout}, bias {fmt.bias}), rounding {mode.value}"]

    if t.why is None:  # NaN, inf or zero: nothing to round
        lines.append(_line("input:", num(x) if not math.isnan(x) else "nan"))
        lines.append(_line("decision:", SPECIAL_TEXT[t.outcome](t)))
        lines += _result_lines(t.result, fmt, x, 0)
        return Explanation((t.result,), (1.0,), tuple(lines))

    lines += _input_lines(x)
    lines.append(_grid_line(t))
    lines.append(_neighbours_line(t))
    lines.append(_line("bits:", (
        f"|x| / {pow2(t.q)} = {binary_point(t.k, binary_digits(t.f, 40))}  -> kept k = "
        f"{t.k:b} (= {t.k}), guard {t.guard}, round {t.round_bit}, sticky {t.sticky}")))
    lines.append(_line("rule:", f"{mode.value}: {mode_rule(mode).math}"))
    lines.append(_line("decision:", decision_text(t)))
    for outcome, prob in zip(outcomes, probs, strict=True):
        if outcome.carries:
            lines.append(_carry_line(outcome))
        note = OUTCOME_TEXT[outcome.outcome]
        if note is not None:
            lines.append(_line(note[0], note[1](outcome)))
        lines += _result_lines(outcome.result, fmt, x, t.q, None if len(outcomes) == 1 else prob)
    return Explanation(tuple(o.result for o in outcomes), probs, tuple(lines))


def explain(
    x: float,
    fmt: Format | str,
    mode: str | RoundingMode = "nearest_even",
    *,
    subnormals: bool | None = None,
    overflow: str | None = None,
) -> ExplanationText:
    """How ``x`` rounds to ``fmt`` under ``mode``, step by step (the text of ``explanation``).

    The text is an ``ExplanationText``: a ``str`` equal to the text, shown as its lines (not
    as an escaped string) when a REPL or notebook displays it.

    The result always equals ``fpsim.round(x, fmt, mode)`` (for stochastic rounding: one of the
    two results shown, with the probabilities shown).

    >>> print(explain(65520.0, "fp16"))  # doctest: +ELLIPSIS
    65520.0 -> float16 (S|EEEEE|MMMMMMMMMM, bias 15), rounding nearest_even
    ...
    overflow:   65520 is at least max + ulp/2 = 65504 + 32/2 = 65520 -> overflows to inf ...
    result:     inf
    ...
    """
    return ExplanationText(explanation(x, fmt, mode, subnormals=subnormals, overflow=overflow))
