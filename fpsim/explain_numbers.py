"""How ``fpsim.explain`` writes numbers and codes: shortest decimals, exact decimals, binary
digits, powers of two and bit fields (``S EEEEE MMMMMMMMMM``)."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

from fpsim.bits import nan_code, to_bits
from fpsim.formats import Format
from fpsim.rounding import floor_log2


def num(v: float | Fraction) -> str:
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


def binary_digits(frac: Fraction, limit: int) -> str:
    """The binary digits of a dyadic ``frac`` in [0, 1) after the point ('' for 0), capped."""
    digits: list[str] = []
    while frac and len(digits) < limit:
        frac *= 2
        digits.append("1" if frac >= 1 else "0")
        frac -= int(frac)
    return "".join(digits) + ("..." if frac else "")


def binary_point(whole: int, digits: str) -> str:
    """``whole`` in binary, then the fraction digits after a point (no point if none)."""
    return f"{whole:b}.{digits}" if digits else f"{whole:b}"


def pow2(e: int) -> str:
    return f"2^{e}"


def field_string(code: int, fmt: Format) -> str:
    """A code as ``S EEEEE MMMMMMMMMM`` (fp16); no mantissa part when M = 0, no sign part in an
    unsigned format."""
    m_bits, e_bits = fmt.mantissa_bits, fmt.exponent_bits
    sign = code >> (e_bits + m_bits)
    e = (code >> m_bits) & ((1 << e_bits) - 1)
    parts = ([str(sign)] if fmt.signed else []) + [format(e, f"0{e_bits}b")]
    if m_bits:
        parts.append(format(code & ((1 << m_bits) - 1), f"0{m_bits}b"))
    return " ".join(parts)


def fields_of(v: float, fmt: Format) -> str:
    return field_string(int(to_bits(v, fmt)), fmt)


def code_text(code: int, fmt: Format) -> str:
    return f"{field_string(code, fmt)} (0x{code:0{(fmt.bits + 3) // 4}x})"


def value_bits(v: float, fmt: Format) -> str:
    """The fields of a value of fmt, or why it has none."""
    if math.isnan(v):
        code = nan_code(fmt, math.copysign(1, v) < 0)
        return code_text(code, fmt) if code is not None else f"none ({fmt.name} has no NaN code)"
    if abs(v) > fmt.max and not math.isinf(v):
        return f"none (beyond max = {num(fmt.max)})"
    if math.isinf(v) and not fmt.inf:
        return f"none ({fmt.name} has no inf)"
    return code_text(int(to_bits(v, fmt)), fmt)


def exact_decimal(x: float, limit: int = 80) -> str:
    """The exact decimal value of a float; past ``limit`` significant digits, the first ones."""
    d = Decimal(x)
    digits = "".join(map(str, d.as_tuple().digits))
    if len(digits) <= limit:
        return str(d)
    sign = "-" if d < 0 else ""
    return (f"{sign}{digits[0]}.{digits[1:limit]}...e{d.adjusted()}, "
            f"{len(digits)} significant digits")


def sci(v: Fraction) -> str:
    """A positive rational to 6 significant digits, as ``m × 2^e`` beyond float64's range."""
    try:
        return f"{float(v):.6g}"
    except OverflowError:
        e = floor_log2(v)
        return f"{float(v / Fraction(2) ** e):.6g} × 2^{e}"
