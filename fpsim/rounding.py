"""Rounding modes and ``round_scalar``: the readable, exact specification of rounding.

``round_scalar`` works on the exact rational value of its input (``fractions.Fraction``), so it
has no double rounding and no carrier-precision effects. The numba kernels behind
``fpsim.round`` are tested against it, bit for bit, in every mode.

How a finite non-zero value ``x`` is rounded to a format with M mantissa bits:

1. ``e = floor(log2 |x|)`` (exactly, from the integer numerator and denominator).
2. The grid spacing (quantum) at ``x`` is ``2^q`` with ``q = max(e, emin) - M``; below the normal
   range the spacing stays that of the subnormals. With subnormals off, ``q = e - M`` (the
   exponent range is unbounded below) and a result below ``smallest_normal`` is then flushed to
   signed zero, as flush-to-zero hardware does.
3. ``|x| / 2^q = k + f`` with integer ``k`` and ``0 <= f < 1``; the mode picks ``k`` or ``k + 1``.
   "Even" and "odd" are the last bit of the code of ``k * 2^q``: the significand's last bit, or,
   in a format without mantissa bits (where every significand is 1), the exponent field's.
4. If the result exceeds ``max`` it overflows: modes that rounded toward zero for this sign clamp
   to ``max``; the others follow the overflow policy (``inf``, ``nan`` or ``saturate``).
"""

from __future__ import annotations

import math
from enum import Enum
from fractions import Fraction

from fpsim._names import unknown_name
from fpsim.catalog import get_format
from fpsim.formats import OVERFLOW_KINDS, Format


class RoundingMode(str, Enum):
    """The rounding modes; each line gives the rule for ``|x| / 2^q = k + f`` with ``f > 0``
    (k "odd": the code of k * 2^q ends in 1)."""

    NEAREST_EVEN = "nearest_even"  # k + 1 if f > 1/2, or f == 1/2 and k is odd; else k
    NEAREST_AWAY = "nearest_away"  # k + 1 if f >= 1/2; else k (ties away from zero)
    TOWARD_ZERO = "toward_zero"  # k (truncate the magnitude)
    UP = "up"  # toward +inf: k + 1 for positive x, k for negative x
    DOWN = "down"  # toward -inf: k for positive x, k + 1 for negative x
    ODD = "odd"  # k if k is odd, else k + 1: the last bit records "inexact"
    STOCHASTIC = "stochastic"  # k + 1 with probability f, else k (exact values never move)

    def __str__(self) -> str:
        return self.value


MODE_NAMES = tuple(m.value for m in RoundingMode)


def get_mode(mode: str | RoundingMode) -> RoundingMode:
    """Validate a rounding-mode name (or enum member) and return the enum member."""
    if isinstance(mode, RoundingMode):
        return mode
    if isinstance(mode, str):
        key = mode.strip().lower().replace("-", "_")
        for m in RoundingMode:
            if key == m.value:
                return m
    raise ValueError(unknown_name("rounding mode", mode, MODE_NAMES, "known modes"))


def resolve_overflow(fmt: Format, overflow: str | None) -> str:
    """The overflow policy in force: the override if given (validated), else the format's."""
    if overflow is None:
        return fmt.overflow  # type: ignore[return-value]
    if overflow not in OVERFLOW_KINDS:
        raise ValueError(f"overflow must be one of {OVERFLOW_KINDS}, got {overflow!r}")
    if overflow == "inf" and not fmt.inf:
        raise ValueError(f"overflow='inf' needs a format with inf; {fmt.name} has none")
    if overflow == "nan" and not fmt.has_nan:
        raise ValueError(f"overflow='nan' needs a format with NaN; {fmt.name} has none")
    return overflow


def rounds_toward_zero(mode: RoundingMode, negative: bool) -> bool:
    """True when the mode never increases the magnitude for this sign (overflow then clamps)."""
    return (
        mode is RoundingMode.TOWARD_ZERO
        or (mode is RoundingMode.DOWN and not negative)
        or (mode is RoundingMode.UP and negative)
    )


def floor_log2(v: Fraction) -> int:
    """The exact ``floor(log2(v))`` of a positive rational."""
    e = v.numerator.bit_length() - v.denominator.bit_length()
    return e if Fraction(2) ** e <= v else e - 1


def quantum_exponent(v: Fraction, fmt: Format, subnormals: bool) -> int:
    """``q`` such that the format's grid spacing at the positive value ``v`` is ``2^q``."""
    e = floor_log2(v)
    return (max(e, fmt.emin) if subnormals else e) - fmt.mantissa_bits


def code_is_odd(k: int, q: int, fmt: Format) -> bool:
    """Whether the code of the value ``k * 2^q`` (k the multiple of the spacing) ends in 1."""
    if fmt.mantissa_bits > 0 or k == 0:
        return k % 2 == 1
    return (q + fmt.bias) % 2 == 1  # no mantissa bits: k == 1 and the exponent field is q + bias


def round_integer(
    k: int, f: Fraction, mode: RoundingMode, negative: bool, u: float | None, odd: bool
) -> int:
    """Choose ``k`` or ``k + 1`` for the magnitude ``k + f`` (``0 <= f < 1``) under ``mode``;
    ``odd`` says whether k's code ends in 1."""
    if f == 0:
        return k
    if mode is RoundingMode.NEAREST_EVEN:
        return k + 1 if f > Fraction(1, 2) or (f == Fraction(1, 2) and odd) else k
    if mode is RoundingMode.NEAREST_AWAY:
        return k + 1 if f >= Fraction(1, 2) else k
    if mode is RoundingMode.TOWARD_ZERO:
        return k
    if mode is RoundingMode.UP:
        return k if negative else k + 1
    if mode is RoundingMode.DOWN:
        return k + 1 if negative else k
    if mode is RoundingMode.ODD:
        return k if odd else k + 1
    if u is None or not 0 <= u < 1:
        raise ValueError(f"stochastic rounding needs a uniform draw u in [0, 1), got {u!r}")
    return k + 1 if Fraction(u) < f else k


def overflow_value(fmt: Format, policy: str, negative: bool) -> float:
    """What a too-large magnitude becomes under an overflow policy."""
    sign = -1.0 if negative else 1.0
    if policy == "inf":
        return sign * math.inf
    if policy == "saturate":
        return sign * fmt.max
    return math.nan


def signed_zero(fmt: Format, negative: bool) -> float:
    """Zero with the input's sign; formats without -0 (fnuz) give +0."""
    return -0.0 if negative and fmt.has_negative_zero else 0.0


def round_scalar(
    x: float,
    fmt: Format | str,
    mode: str | RoundingMode = "nearest_even",
    *,
    subnormals: bool | None = None,
    overflow: str | None = None,
    u: float | None = None,
) -> float:
    """Round one number to ``fmt`` exactly; the specification that ``fpsim.round`` must equal.

    ``x`` is taken at its exact value (a float64 is not rounded to float32 first).
    ``u`` is the uniform draw in [0, 1) that stochastic rounding compares with the fraction.

    >>> round_scalar(65519.99, "fp16"), round_scalar(65520.0, "fp16")
    (65504.0, inf)
    >>> round_scalar(1 + 2**-8 + 2**-40, "bf16")
    1.0078125
    """
    fmt = get_format(fmt)
    mode = get_mode(mode)
    subnormals = fmt.subnormals if subnormals is None else bool(subnormals)
    policy = resolve_overflow(fmt, overflow)
    x = float(x)
    negative = math.copysign(1.0, x) < 0
    if math.isnan(x):
        return math.nan
    if math.isinf(x):
        return (-math.inf if negative else math.inf) if fmt.inf else overflow_value(
            fmt, policy, negative
        )
    if x == 0:
        return signed_zero(fmt, negative)

    v = abs(Fraction(x))
    q = quantum_exponent(v, fmt, subnormals)
    scaled = v / Fraction(2) ** q
    k = math.floor(scaled)
    odd = code_is_odd(k, q, fmt)
    magnitude = round_integer(k, scaled - k, mode, negative, u, odd) * Fraction(2) ** q

    if magnitude > fmt.max_exact:
        if rounds_toward_zero(mode, negative):
            return -fmt.max if negative else fmt.max
        return overflow_value(fmt, policy, negative)
    if magnitude == 0 or (not subnormals and magnitude < Fraction(2) ** fmt.emin):
        return signed_zero(fmt, negative)
    return float(-magnitude if negative else magnitude)
