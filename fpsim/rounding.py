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
   to ``max``; the others follow the overflow policy (``inf``, ``nan`` or ``saturate``; a NaN
   keeps the input's sign, as ``fpsim.round`` and ml_dtypes keep it in the carrier).

Two kinds of format add a step. An unsigned format (``signed=False``) holds no negative number:
a negative non-zero input (``-inf`` too) becomes NaN (0 in an unsigned format without NaN), -0
becomes +0. An exponent-only format without zero (``zero=False``, E8M0FNU) follows ml_dtypes'
conversion to ``float8_e8m0fnu``: every significand is the hidden 1, so under nearest-even a tie
``1.5 * 2^k`` goes up (3 -> 4; "even" is read on the significand, as ml_dtypes reads it, not
on the exponent field as for the P3109 p = 1 formats); the round-to-nearest modes take every
value of the lowest binade ``(2^emin, 2^(emin+1))`` up (for E8M0 that binade holds only float32
subnormals, which ml_dtypes rounds in float32's bit pattern: 1.01 * 2^-127 -> 2^-126); every
positive value below ``2^emin`` becomes ``2^emin`` in every mode (there is no zero); zero, like
negatives, becomes NaN. Round-to-odd is truncation there (every code's significand is odd).

``trace`` performs these steps and records each one in a ``RoundingTrace`` (``round_scalar`` is
its result, ``fpsim.explain`` its text). ``MODE_RULES`` is the one table of the modes' rules.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from fractions import Fraction
from functools import partial
from numbers import Integral
from types import MappingProxyType

import numpy as np

from fpsim._names import unknown_name
from fpsim._validate import check_bool
from fpsim.catalog import get_format
from fpsim.formats import OVERFLOW_KINDS, Format


class RoundingMode(str, Enum):
    """The rounding modes; ``MODE_RULES[mode].math`` states each one's rule in one line."""

    NEAREST_EVEN = "nearest_even"
    NEAREST_AWAY = "nearest_away"
    TOWARD_ZERO = "toward_zero"
    UP = "up"
    DOWN = "down"
    ODD = "odd"
    STOCHASTIC = "stochastic"

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


RNG_BITS_MAX = 56  # the kernels draw 56 random bits per element


def check_rng_bits(rng_bits: object, mode: RoundingMode) -> int | None:
    """``rng_bits`` checked: None (the full-precision draw) or an int 1..56, stochastic only.

    With r random bits, stochastic rounding goes up with probability ``floor(f * 2^r) / 2^r``
    for the fraction ``f`` of the last place that is dropped (r bits added at the top of the
    dropped bits, then truncation): f itself when f has at most r bits, else a little less,
    a bias toward zero below ``2^-r`` of the last place (Fitzgibbon and Felix, "On Stochastic
    Rounding with Few Random Bits", ARITH 2025).
    """
    if rng_bits is None:
        return None
    if (isinstance(rng_bits, bool) or not isinstance(rng_bits, Integral)
            or not 1 <= int(rng_bits) <= RNG_BITS_MAX):
        raise ValueError(f"rng_bits must be None (the full-precision draw) or an int from 1 to "
                         f"{RNG_BITS_MAX}, got {rng_bits!r}")
    if mode is not RoundingMode.STOCHASTIC:
        raise ValueError(f"rng_bits applies to mode='stochastic' only, got mode={mode.value!r} "
                         f"with rng_bits={rng_bits!r}")
    return int(rng_bits)


def resolve_subnormals(fmt: Format, subnormals: object) -> bool:
    """The subnormal rule in force: the override if given (a bool), else the format's. A format
    without zero has no subnormals to keep: ``subnormals=True`` is refused there."""
    checked = check_bool("subnormals", subnormals)
    if checked and not fmt.zero:
        raise ValueError(f"subnormals=True needs a format with zero and subnormals; {fmt.name} "
                         "has neither (leave subnormals=None)")
    return fmt.subnormals if checked is None else checked


# --- the modes' rules: one table keyed by RoundingMode -------------------------------------------
HALF = Fraction(1, 2)
Draw = float | Fraction | None  # stochastic rounding's uniform draw u in [0, 1)


class Why(Enum):
    """Why a mode kept ``k`` or took ``k + 1`` for ``|x| / 2^q = k + f`` (``up``: took k + 1)."""

    EXACT = ("f = 0: x is on the grid", False)
    BELOW_HALF = ("f < 1/2", False)
    ABOVE_HALF = ("f > 1/2", True)
    TIE_KEEPS_EVEN = ("f = 1/2 and k is even", False)
    TIE_LEAVES_ODD = ("f = 1/2 and k is odd", True)
    HALF_OR_MORE = ("f >= 1/2", True)
    TRUNCATED = ("f is dropped", False)
    TOWARD_ZERO_FOR_SIGN = ("the direction is toward zero for this sign", False)
    AWAY_FOR_SIGN = ("the direction is away from zero for this sign", True)
    KEPT_ODD = ("k is odd", False)
    MADE_ODD = ("k is even", True)
    DRAW_BELOW_F = ("the draw u < f", True)
    DRAW_NOT_BELOW_F = ("the draw u >= f", False)
    LOWEST_BINADE_UP = ("f > 0 in the lowest binade of a format without zero (ml_dtypes' "
                        "E8M0 rule)", True)

    condition: str
    up: bool

    def __init__(self, condition: str, up: bool) -> None:
        self.condition = condition
        self.up = up


def _nearest_even(f: Fraction, negative: bool, odd: bool, u: Draw) -> Why:
    if f != HALF:
        return Why.ABOVE_HALF if f > HALF else Why.BELOW_HALF
    return Why.TIE_LEAVES_ODD if odd else Why.TIE_KEEPS_EVEN


def _nearest_away(f: Fraction, negative: bool, odd: bool, u: Draw) -> Why:
    return Why.HALF_OR_MORE if f >= HALF else Why.BELOW_HALF


def _toward_zero(f: Fraction, negative: bool, odd: bool, u: Draw) -> Why:
    return Why.TRUNCATED


def _up(f: Fraction, negative: bool, odd: bool, u: Draw) -> Why:
    return Why.TOWARD_ZERO_FOR_SIGN if negative else Why.AWAY_FOR_SIGN


def _down(f: Fraction, negative: bool, odd: bool, u: Draw) -> Why:
    return Why.AWAY_FOR_SIGN if negative else Why.TOWARD_ZERO_FOR_SIGN


def _odd(f: Fraction, negative: bool, odd: bool, u: Draw) -> Why:
    return Why.KEPT_ODD if odd else Why.MADE_ODD


def _stochastic(f: Fraction, negative: bool, odd: bool, u: Draw) -> Why:
    if u is None or not 0 <= u < 1:
        raise ValueError(f"stochastic rounding needs a uniform draw u in [0, 1), got {u!r}")
    return Why.DRAW_BELOW_F if Fraction(u) < f else Why.DRAW_NOT_BELOW_F


@dataclass(frozen=True)
class ModeRule:
    """How a mode picks ``k`` or ``k + 1`` for ``|x| / 2^q = k + f`` with ``0 < f < 1``."""

    math: str  # the rule in one line ("k odd": the code of k * 2^q ends in 1)
    decide: Callable[[Fraction, bool, bool, Draw], Why]  # (f, negative, k odd, u) -> Why
    toward_zero: Callable[[bool], bool]  # (negative) -> never grows |x| (overflow clamps)
    nearest: bool = False  # rounds to nearest: overflow starts at max + ulp/2


def _never(negative: bool) -> bool:
    return False


MODE_RULES: Mapping[RoundingMode, ModeRule] = MappingProxyType({
    RoundingMode.NEAREST_EVEN: ModeRule(
        "k + 1 if f > 1/2, or f = 1/2 and k is odd; else k", _nearest_even, _never, nearest=True),
    RoundingMode.NEAREST_AWAY: ModeRule(
        "k + 1 if f >= 1/2; else k (ties away from zero)", _nearest_away, _never, nearest=True),
    RoundingMode.TOWARD_ZERO: ModeRule(
        "k (truncate the magnitude)", _toward_zero, lambda negative: True),
    RoundingMode.UP: ModeRule(
        "toward +inf: k + 1 for positive x, k for negative x", _up, lambda negative: negative),
    RoundingMode.DOWN: ModeRule(
        "toward -inf: k for positive x, k + 1 for negative x", _down,
        lambda negative: not negative),
    RoundingMode.ODD: ModeRule(
        "k if k is odd, else k + 1 (the last bit records 'inexact')", _odd, _never),
    RoundingMode.STOCHASTIC: ModeRule(
        "k + 1 with probability f (if the draw u < f), else k", _stochastic, _never),
})


def mode_rule(mode: RoundingMode) -> ModeRule:
    """The rule of ``mode`` from ``MODE_RULES``; a mode without one is an error, never a default."""
    try:
        return MODE_RULES[mode]
    except KeyError:
        raise NotImplementedError(f"rounding mode {mode!r} has no rule in MODE_RULES") from None


def rounds_toward_zero(mode: RoundingMode, negative: bool) -> bool:
    """True when the mode never increases the magnitude for this sign (overflow then clamps)."""
    return mode_rule(mode).toward_zero(negative)


# --- the steps ---------------------------------------------------------------------------------
def floor_log2(v: Fraction) -> int:
    """The exact ``floor(log2(v))`` of a positive rational."""
    e = v.numerator.bit_length() - v.denominator.bit_length()
    return e if Fraction(2) ** e <= v else e - 1


def code_is_odd(k: int, q: int, fmt: Format) -> bool:
    """Whether the code of the value ``k * 2^q`` (k the multiple of the spacing) ends in 1."""
    if fmt.mantissa_bits > 0 or k == 0:
        return k % 2 == 1
    if not fmt.zero:
        return True  # exponent-only scale format: the significand 1 is odd (ml_dtypes' E8M0)
    assert fmt.bias is not None  # set by Format's construction
    return (q + fmt.bias) % 2 == 1  # no mantissa bits: k == 1 and the exponent field is q + bias


def overflow_value(fmt: Format, policy: str, negative: bool) -> float:
    """What a too-large magnitude becomes under an overflow policy (NaN keeps the sign)."""
    sign = -1.0 if negative else 1.0
    if policy == "inf":
        return sign * math.inf
    if policy == "saturate":
        return sign * fmt.max
    return math.copysign(math.nan, sign)


def signed_zero(fmt: Format, negative: bool) -> float:
    """Zero with the input's sign; formats without -0 (fnuz) give +0."""
    return -0.0 if negative and fmt.has_negative_zero else 0.0


class Outcome(Enum):
    """Where the rounding ended."""

    NAN = "NaN input: stays NaN, with its sign"
    INFINITY = "inf input: kept, or mapped by the overflow policy"
    ZERO = "zero input: kept with its sign (+0 without -0)"
    IN_RANGE = "the picked grid point is a value of the format"
    CLAMPED = "past max, but the mode rounds toward zero here: clamps to max"
    OVERFLOW = "past max: the overflow policy decides"
    UNDERFLOW = "rounded to zero"
    FLUSHED = "below smallest_normal with subnormals off: flushed to zero"
    NEGATIVE = "negative input to an unsigned format: out of its range, NaN"
    NO_ZERO = "zero input to a format without zero: NaN"
    RAISED = "below the smallest value of a format without zero: raised to it"


@dataclass(frozen=True, slots=True)
class RoundingTrace:
    """Every step of rounding one number (see ``trace``). Finite non-zero inputs fill ``exact``
    (the input as a Fraction), ``e = floor(log2|x|)``, the spacing exponent ``q``, and
    ``|x| / 2^q = k + f``; ``why`` is the mode's reason for ``k`` or ``k + 1``."""

    fmt: Format
    mode: RoundingMode
    subnormals: bool
    policy: str  # the overflow policy in force
    negative: bool  # the input's sign bit
    outcome: Outcome
    result: float
    exact: Fraction | None = None
    e: int = 0
    q: int = 0
    k: int = 0
    f: Fraction = Fraction(0)
    why: Why | None = None

    @property
    def pick(self) -> int:
        """The multiple of ``2^q`` the mode chose: ``k`` or ``k + 1``."""
        return self.k + 1 if self.why is not None and self.why.up else self.k

    @property
    def magnitude(self) -> Fraction:
        """``pick * 2^q``, before the range checks."""
        return self.pick * Fraction(2) ** self.q

    @property
    def odd(self) -> bool:
        """Whether the code of ``k * 2^q`` ends in 1 (the parity ties and "odd" look at)."""
        return code_is_odd(self.k, self.q, self.fmt)

    @property
    def guard(self) -> int:
        """The first bit of ``f`` (worth half an ulp)."""
        return int(self.f * 2)

    @property
    def round_bit(self) -> int:
        """The second bit of ``f``."""
        return int(self.f * 4) % 2

    @property
    def sticky(self) -> int:
        """The OR of every bit of ``f`` after the round bit."""
        return int((self.f * 4) % 1 != 0)

    @property
    def carries(self) -> bool:
        """Whether picking ``k + 1`` carried out of the significand into the next binade (or out
        of the subnormals into the smallest normal)."""
        if self.pick != self.k + 1:
            return False
        if self.e >= self.fmt.emin or not self.subnormals:
            return self.pick == 2 ** (self.fmt.mantissa_bits + 1)
        return self.pick == 2**self.fmt.mantissa_bits


# what trace and round_scalar take, each at its exact value
ScalarInput = float | int | Fraction | Decimal | str


# decimal exponents round_scalar and trace take (beyond, building the exact number takes long)
MAX_DECIMAL_EXPONENT = 100_000


def exact_value(x: ScalarInput) -> float | Fraction:
    """``x`` at its exact value: a float (numpy's too) as it is, NaN, inf and -0 included; an
    int (numpy's too), Fraction, Decimal or decimal string as the exact non-zero Fraction it
    denotes, or as a float when it is zero, NaN or infinite (so ``"1e400"`` is exactly 10^400,
    not inf). A numpy integer or ``np.longdouble`` is not rounded to float64 first either
    (``np.int64(2**62 + 1)`` is that integer), as in ``fpsim.round``."""
    if isinstance(x, float):
        return x
    if isinstance(x, numbers.Integral):  # int, bool and the numpy integers, exactly
        x = int(x)
    elif isinstance(x, np.floating):
        with np.errstate(over="ignore", invalid="ignore"):
            nearest = float(x)
            if nearest == x or x - x != 0:  # float16/32/64, or an exact longdouble, NaN, inf
                return nearest
        x = Fraction(*x.as_integer_ratio())  # np.longdouble with bits float64 has not
    if isinstance(x, (Decimal, str)):
        try:
            x = Decimal(x.strip() if isinstance(x, str) else x)
        except ArithmeticError:
            raise ValueError(f"x must be a number, got {x!r}") from None
        if not x.is_finite():
            return float(x)
        if x and abs(x.adjusted()) > MAX_DECIMAL_EXPONENT:  # 10^(10^9): minutes to build
            raise ValueError(f"x = {str(x)[:40]!r} has a decimal exponent beyond "
                             f"+-{MAX_DECIMAL_EXPONENT}; every format rounds it as it rounds "
                             f"1e{MAX_DECIMAL_EXPONENT} (or 1e-{MAX_DECIMAL_EXPONENT}): pass that")
    if isinstance(x, (int, Fraction, Decimal)):
        return Fraction(x) if x != 0 else float(x)
    try:
        return float(x)
    except (TypeError, ValueError):
        raise TypeError(f"x must be one real number, got {x!r:.80} (a {type(x).__name__})"
                        ) from None


def trace(
    x: ScalarInput,
    fmt: Format | str,
    mode: str | RoundingMode = "nearest_even",
    *,
    subnormals: bool | None = None,
    overflow: str | None = None,
    u: Draw = None,
    rng_bits: int | None = None,
) -> RoundingTrace:
    """Round one number to ``fmt`` exactly, recording each step (the module docstring's 1-4).

    ``x`` is taken at its exact value (a float64 is not rounded to float32 first; an int,
    Fraction, Decimal or decimal string is not rounded to float64 first: see ``exact_value``).
    ``u`` is the uniform draw in [0, 1) that stochastic rounding compares with ``f`` (a Fraction
    is allowed); with ``rng_bits=r`` it is compared with ``floor(f * 2^r) / 2^r`` instead, the
    probability of going up with r random bits (see ``check_rng_bits``).

    >>> t = trace(1e-5, "fp16")
    >>> t.q, t.k, (t.guard, t.round_bit, t.sticky), t.why, t.result
    (-24, 167, (1, 1, 1), <Why.ABOVE_HALF: ('f > 1/2', True)>, 1.0013580322265625e-05)
    """
    fmt = get_format(fmt)
    mode = get_mode(mode)
    rng_bits = check_rng_bits(rng_bits, mode)
    subnormals = resolve_subnormals(fmt, subnormals)
    policy = resolve_overflow(fmt, overflow)
    value = exact_value(x)
    negative = value < 0 if isinstance(value, Fraction) else math.copysign(1.0, value) < 0
    ended = partial(RoundingTrace, fmt, mode, subnormals, policy, negative)
    if isinstance(value, float) and math.isnan(value):
        return ended(Outcome.NAN, value)
    if negative and not fmt.signed and value != 0:
        return ended(Outcome.NEGATIVE, math.nan if fmt.has_nan else 0.0)
    if isinstance(value, float):
        if math.isinf(value):
            return ended(Outcome.INFINITY, value if fmt.inf else overflow_value(fmt, policy,
                                                                                negative))
        if value == 0:
            if not fmt.zero:
                return ended(Outcome.NO_ZERO, math.nan)
            return ended(Outcome.ZERO, signed_zero(fmt, negative))

    exact = Fraction(value)
    v = abs(exact)
    e = floor_log2(v)
    q = (max(e, fmt.emin) if subnormals else e) - fmt.mantissa_bits
    scaled = v / Fraction(2) ** q
    k = math.floor(scaled)
    f = scaled - k
    rule = mode_rule(mode)
    drawn = f if rng_bits is None else Fraction(math.floor(f * 2**rng_bits), 2**rng_bits)
    why = rule.decide(drawn, negative, code_is_odd(k, q, fmt), u) if f else Why.EXACT
    if f and not fmt.zero and e == fmt.emin and rule.nearest:
        why = Why.LOWEST_BINADE_UP
    magnitude = (k + why.up) * Fraction(2) ** q
    rounded = partial(ended, exact=exact, e=e, q=q, k=k, f=f, why=why)

    if magnitude > fmt.max_exact:
        if rule.toward_zero(negative):
            return rounded(Outcome.CLAMPED, -fmt.max if negative else fmt.max)
        return rounded(Outcome.OVERFLOW, overflow_value(fmt, policy, negative))
    if magnitude == 0:
        return rounded(Outcome.UNDERFLOW, signed_zero(fmt, negative))
    if not fmt.zero and magnitude < Fraction(2) ** fmt.emin:
        return rounded(Outcome.RAISED, fmt.smallest_normal)
    if not subnormals and magnitude < Fraction(2) ** fmt.emin:
        return rounded(Outcome.FLUSHED, signed_zero(fmt, negative))
    return rounded(Outcome.IN_RANGE, float(-magnitude if negative else magnitude))


def round_scalar(
    x: ScalarInput,
    fmt: Format | str,
    mode: str | RoundingMode = "nearest_even",
    *,
    subnormals: bool | None = None,
    overflow: str | None = None,
    u: Draw = None,
    rng_bits: int | None = None,
) -> float:
    """Round one number to ``fmt`` exactly; the specification that ``fpsim.round`` must equal.

    ``x`` is taken at its exact value (a float64 is not rounded to float32 first; an int,
    Fraction, Decimal or decimal string not to float64). ``u`` is the uniform draw in [0, 1)
    that stochastic rounding compares with the fraction (with ``rng_bits=r``, with the fraction
    cut to r bits: see ``check_rng_bits``). The steps are those of ``trace``; a NaN result
    keeps the input's sign.

    >>> round_scalar(65519.99, "fp16"), round_scalar(65520.0, "fp16")
    (65504.0, inf)
    >>> round_scalar(1 + 2**-8 + 2**-40, "bf16")
    1.0078125
    >>> round_scalar(-500.0, "e4m3fn"), round_scalar("1e400", "fp16")
    (nan, inf)
    """
    return trace(x, fmt, mode, subnormals=subnormals, overflow=overflow, u=u,
                 rng_bits=rng_bits).result
