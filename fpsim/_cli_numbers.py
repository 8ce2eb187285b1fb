"""Numbers typed on the command line, read exactly, and what became of them as float64.

fpsim rounds float64 values. A decimal such as ``0.1`` or ``1e400`` is read exactly (as a
``Fraction``) and converted to its nearest float64 (correctly rounded, ``inf`` beyond the
range); ``float64_note`` says, in one line, when that conversion changes what fpsim's answer
means: the decimal was beyond float64's range, or rounding the exact decimal could give another
result than rounding its float64 (it lies between two float64 values that round differently).
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from fpsim.formats import Format
from fpsim.rounding import RoundingMode, get_mode, round_scalar

_HEX = re.compile(r"([+-]?)0x([0-9a-f]*)(?:\.([0-9a-f]*))?(?:p([+-]?[0-9]+))?")


@dataclass(frozen=True)
class Number:
    """A command-line number: its ``text``, its exact value (None for inf and NaN) and its
    nearest float64 ``value``."""

    text: str
    exact: Fraction | None
    value: float


# A number written with a decimal exponent beyond +-_FAR (1e999999999) is read as the stand-in
# +-10^(+-400): building the exact integer 10^999999999 would take minutes. Both are beyond
# float64's range (or below its smallest subnormal), so the float64 and the note are the same.
_FAR = 10_000
_BIG = Fraction(10) ** 400


def _stand_in(exponent: int, negative: bool) -> Fraction | None:
    """The stand-in for a number of decimal exponent ``exponent`` beyond +-_FAR, else None."""
    if abs(exponent) <= _FAR:
        return None
    magnitude = _BIG if exponent > 0 else 1 / _BIG
    return -magnitude if negative else magnitude


def _parse_hex(s: str) -> Fraction | None:
    m = _HEX.fullmatch(s.lower())
    if m is None or not (m.group(2) or m.group(3)):
        return None
    sign, whole, frac, exp = m.groups()
    digits = whole + (frac or "")
    if int(digits, 16) and abs(int(exp or 0)) > _FAR * 4:  # (4 bits a hex digit, roughly)
        scale = int(exp or 0) + 4 * (len(whole) - 1)
        return _stand_in(scale // 4, sign == "-")
    magnitude = Fraction(int(digits, 16), 16 ** len(frac or "")) * Fraction(2) ** int(exp or 0)
    return -magnitude if sign == "-" else magnitude


def _nearest_float(exact: Fraction, negative: bool) -> float:
    if exact == 0:
        return -0.0 if negative else 0.0
    try:
        return float(exact)  # int / int: correctly rounded
    except OverflowError:
        return -math.inf if exact < 0 else math.inf


def parse_number(text: str) -> Number:
    """Read ``text`` (decimal, ``inf``, ``nan`` or hex float ``0x1p-24``) exactly.

    >>> parse_number("1e400").value, parse_number("0x1p-2000").exact == Fraction(1, 2**2000)
    (inf, True)
    """
    s = text.strip()
    negative = s.startswith("-")
    if "0x" in s.lower():
        exact = _parse_hex(s)
    else:
        try:
            d = Decimal(s)
        except InvalidOperation:
            exact = None
        else:
            if d.is_nan():
                return Number(s, None, math.nan)
            if d.is_infinite():
                return Number(s, None, -math.inf if negative else math.inf)
            exact = _stand_in(d.adjusted(), negative) or Fraction(d)
    if exact is None:
        raise ValueError(f"{s!r} is not a number (examples: 1e-5, -65520, 0.1, inf, nan, "
                         "0x1p-24)")
    return Number(s, exact, _nearest_float(exact, negative))


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) ==
                                                 math.copysign(1, b))


def float64_note(number: Number, fmt: Format, mode: str | RoundingMode,
                 overflow: str | None = None) -> str | None:
    """One line when rounding ``number.value`` is not the same as rounding the exact number,
    else None (exact float64 input, or a decimal whose float64 neighbours round alike)."""
    exact, value = number.exact, number.value
    if exact is None or (math.isfinite(value) and Fraction(value) == exact):
        return None
    head = f"note: {number.text} is not a float64;"
    if math.isinf(value):
        return f"{head} it is beyond float64's range and became {value}"
    if value == 0:
        return (f"{head} it is below float64's smallest subnormal (2^-1074) and became "
                f"{value}")
    if get_mode(mode) is RoundingMode.STOCHASTIC:
        return None  # the probabilities move by less than one float64 ulp
    toward = math.inf if Fraction(value) < exact else -math.inf
    other = math.nextafter(value, toward)
    a = round_scalar(value, fmt, mode, overflow=overflow)
    b = round_scalar(other, fmt, mode, overflow=overflow)
    if _same(a, b):
        return None
    return (f"{head} fpsim rounds its nearest float64, {value!r}; the exact number lies between "
            f"{min(value, other)!r} and {max(value, other)!r}, which round to different values "
            f"({a!r}, {b!r}), so its own rounding may differ")


def print_note(note: str | None) -> None:
    if note is not None:
        print(note, file=sys.stderr)
