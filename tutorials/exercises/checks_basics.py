"""Checks for the exercises on float anatomy and rounding: 06 (decode a code by hand) and
07 (double rounding). Same contract as ``checks.py``, whose reporting they share: one line of
feedback naming the first failing input with expected versus got, and a hint; never a raise.

    >>> from checks_basics import check_decode
    >>> check_decode(lambda code, fmt: 0.0)     # doctest: +ELLIPSIS
    ❌ FAIL check_decode: ... differ. First: code 0x01 of float8_e5m2 ...
    False
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np
from checks import (
    BitsOnly,
    Failure,
    _call,
    _raised,
    _report,
    off_by_one_hint,
    twice_or_half,
)

import fpsim

FP32, BF16 = fpsim.FP32, fpsim.BF16


# --- exercise 6: decode a code by hand -----------------------------------------------------------
# IEEE-style formats (the all-ones exponent holds inf and NaN), smallest first, then one with a
# bias that is not 2^(E-1) - 1, so an answer that hard-codes the usual bias fails.
DECODE_FORMATS = (fpsim.E5M2, fpsim.E4M3, fpsim.E3M4, fpsim.FP16, fpsim.BF16,
                  fpsim.Format("e5m2b11", 5, 2, bias=11))


def _same(got: float, want: float) -> bool:
    if math.isnan(want):
        return math.isnan(got)
    return got == want and math.copysign(1, got) == math.copysign(1, want)  # -0.0 counts


def _decode_hint(code: int, f: fpsim.Format, got: float, want: float) -> str:
    m, e = f.mantissa_bits, f.exponent_bits
    sign, field, frac = code >> (e + m), (code >> m) & (2**e - 1), code & (2**m - 1)
    s = -1.0 if sign else 1.0
    if field == 2**e - 1:
        return ("an all-ones exponent field is special: mantissa 0 is +-inf, anything else NaN "
                "(compare with math.isnan: NaN != NaN).")
    if _same(got, -want) or (want == 0 and got == 0):
        return ("the sign: the top bit is S, and the value is (-1)^S times the magnitude, "
                "-0.0 included.")
    word = twice_or_half(got, want)
    if word:
        return off_by_one_hint(word, f"the exponent is field - bias, with this format's bias "
                               f"{f.bias} (fmt.bias), and 2^(1 - bias) for exponent field 0")
    if field == 0 and got in (s * 2.0 ** (-f.bias) * (1 + frac / 2**m),
                              s * 2.0 ** (-f.bias) * (frac / 2**m),
                              s * 2.0 ** (1 - f.bias) * (1 + frac / 2**m)):
        return (f"exponent field 0 is zero or a subnormal: 2^(1 - bias) x (0 + M / 2^{m}): no "
                "implicit 1, and the exponent of the smallest normal, 1 - bias.")
    if field != 0 and got == s * 2.0 ** (field - f.bias) * (frac / 2**m):
        return f"a normal number has an implicit leading 1: significand 1 + M / 2^{m}."
    if want != 0 and got != 0 and math.isfinite(got) and math.log2(abs(got / want)).is_integer():
        return (f"right significand, wrong power of two: the exponent is field - bias with "
                f"this format's bias, {f.bias} (read fmt.bias; do not assume 2^(E-1) - 1).")
    if field == 0:
        return f"exponent field 0: the value is (-1)^S x 2^(1 - bias) x M / 2^{m}."
    return f"a normal number is (-1)^S x 2^(field - bias) x (1 + M / 2^{m})."


def check_decode(decode: Callable[[int, fpsim.Format], float]) -> bool:
    """``decode(code, fmt)`` must return the value of the integer ``code`` in the IEEE-style
    format ``fmt`` (a ``fpsim.Format``: use ``exponent_bits``, ``mantissa_bits``, ``bias``),
    for every code of each format in ``DECODE_FORMATS``; the oracle is ``fpsim.from_bits``."""
    name = "check_decode"
    failures: list[Failure] = []
    total = 0
    for f in DECODE_FORMATS:
        codes = np.arange(2**f.bits)
        wants = fpsim.from_bits(codes, f).astype(np.float64)
        total += codes.size
        for code, want in zip(codes.tolist(), wants.tolist(), strict=True):
            case = (f"code 0x{code:0{f.bits // 4}X} of {f.name} (fields {_fields(code, f)}, "
                    f"bias {f.bias})")
            got, error = _call(decode, code, f)
            if error is not None:
                failures.append(_raised(case, repr(want), error))
                return _report(name, len(DECODE_FORMATS), failures, "")
            try:
                got_f = float(got)
            except (TypeError, ValueError):
                failures.append(Failure(case, repr(want), f"{got!r} (not a number)",
                                        "return a float, e.g. 1.0 for 0x3C00 in fp16."))
                break
            if not _same(got_f, want):
                failures.append(Failure(case, repr(want), repr(got_f),
                                        _decode_hint(code, f, got_f, want)))
                break  # the first wrong code of each format is enough feedback
    return _report(name, len(DECODE_FORMATS), failures,
                   f"all {total:,} codes of {len(DECODE_FORMATS)} formats decoded. Well done!",
                   unit="formats")


def _fields(code: int, f: fpsim.Format) -> str:
    bits = format(code, f"0{f.bits}b")
    return f"{bits[0]} {bits[1:1 + f.exponent_bits]} {bits[1 + f.exponent_bits:]}"


# --- exercise 7: double rounding ----------------------------------------------------------------
def double_rounding_cases() -> np.ndarray:
    """Positive float64 values in bf16's normal range: near every kind of bf16 tie (exactly on
    it, on it after float32 rounding, just either side), then a seeded random spread."""
    rng = np.random.default_rng(11)
    base = fpsim.round(rng.uniform(1, 2, 60) * 2.0 ** rng.integers(-20, 20, 60), BF16)
    ulp = fpsim.ulp(base, BF16).astype(np.float64)
    half = base + ulp / 2  # the bf16 tie: half with an odd or even kept bit
    eps32 = ulp * 2.0**-16  # float32's ulp at these values
    near = [half, half + eps32 * 2.0**-10, half - eps32 * 2.0**-10,  # float32 rounds onto the tie
            half + eps32 * 0.75, half - eps32 * 0.75,  # float32 rounds away from the tie
            half + eps32 * 0.5, half - eps32 * 0.5,   # float32 ties that go either way
            base + ulp / 4, base + 3 * ulp / 4]
    spread = rng.uniform(1, 2, 300) * 2.0 ** rng.integers(-60, 60, 300)
    return np.concatenate([np.float64([1 + 2**-8 + 2**-40, 1 + 3 * 2**-8 - 2**-40]),
                           *near, spread])


def double_rounding_oracle(x: float) -> bool:
    """True when float64 -> float32 -> bf16 (nearest even twice) differs from float64 -> bf16."""
    direct = fpsim.round(np.float64(x), BF16)
    twice = fpsim.round(fpsim.round(np.float64(x), FP32), BF16)
    return bool(direct != twice)


def check_double_rounding(differs: Callable[[BitsOnly], bool]) -> bool:
    """``differs(x)`` must predict, from x's float64 bits, whether rounding to float32 first and
    then to bf16 gives another result than rounding x to bf16 once."""
    name = "check_double_rounding"
    cases = double_rounding_cases()
    failures: list[Failure] = []
    for x in cases.tolist():
        want = double_rounding_oracle(x)
        direct = float(fpsim.round(np.float64(x), BF16))
        via = float(fpsim.round(fpsim.round(np.float64(x), FP32), BF16))
        case = (f"x = {x!r} (float64 bits 0x{int(np.float64(x).view(np.uint64)):016X}; bf16 "
                f"directly {direct!r}, via float32 {via!r})")
        got, error = _call(differs, BitsOnly(x, np.float64))
        if error is not None:
            failures.append(_raised(case, str(want), error))
            break
        if not isinstance(got, bool | np.bool_):
            failures.append(Failure(case, str(want), f"{got!r} (not a bool)", "return True "
                                    "or False."))
            break
        if bool(got) != want:
            failures.append(Failure(case, str(want), str(bool(got)), _double_hint(x, want)))
    return _report(name, len(cases), failures,
                   f"all {len(cases)} predictions right. Well done!")


def _double_hint(x: float, want: bool) -> str:
    if want:
        return ("the direct rounding is not a tie, but float32's rounding moved the 45 dropped "
                "bits onto exactly half a bf16 ulp (1 then fifteen 0s in float32's 16 extra "
                "bits), and that tie then went the other way.")
    return ("no double-rounding error here: either x is not within half a float32 ulp of a bf16 "
            "tie, or the tie that float32 produced goes the same way as the direct rounding.")


def round_to_odd_cases() -> np.ndarray:
    """float64 values in float32's normal range, both signs: exact float32 values, float32
    ties, and a seeded spread (all inexact in float32 but these)."""
    rng = np.random.default_rng(12)
    spread = rng.uniform(1, 2, 400) * 2.0 ** rng.integers(-120, 120, 400)
    exact = np.float64(np.float32(rng.uniform(-4, 4, 20)))
    ties = np.float64(np.float32([1.0, 3.0, 1.5])) * (1 + 2.0**-24)
    signs = rng.choice([-1, 1], spread.size)
    return np.concatenate([exact, ties, spread * signs])


def check_round_to_odd(to_fp32_odd: Callable[[BitsOnly], int]) -> bool:
    """``to_fp32_odd(x)`` must return the float32 bits (an int) of x rounded to odd: truncate
    to float32's 23 mantissa bits and set the last one when anything dropped was non-zero."""
    name = "check_round_to_odd"
    cases = round_to_odd_cases()
    failures: list[Failure] = []
    for x in cases.tolist():
        want = int(np.float32(fpsim.round(np.float64(x), FP32, "odd")).view(np.uint32))
        case = f"x = {x!r} (float64 bits 0x{int(np.float64(x).view(np.uint64)):016X})"
        got, error = _call(to_fp32_odd, BitsOnly(x, np.float64))
        if error is not None:
            failures.append(_raised(case, f"0x{want:08X}", error))
            break
        try:
            got_i = int(got)
        except (TypeError, ValueError, OverflowError):
            failures.append(Failure(case, f"0x{want:08X}", f"{got!r} (not an int)",
                                    "return the 32-bit code as an int."))
            break
        if got_i != want:
            hint = ("round to odd sets the last kept bit when any dropped bit is 1 (sticky), "
                    "and leaves an exact value alone; it never adds a carry.")
            if got_i == want ^ 1:
                hint = ("off by the last bit: it must be 1 exactly when the 29 dropped bits are "
                        "not all 0 (OR it in), and untouched when they are.")
            elif got_i ^ want == 0x80000000:
                hint = "the sign: float64's bit 63 becomes float32's bit 31."
            elif word := _code_ratio(got_i, want):
                hint = off_by_one_hint(word, "float32's exponent field is float64's - 1023 + 127")
            failures.append(Failure(case, f"0x{want:08X}", f"0x{got_i:08X}", hint))
    return _report(name, len(cases), failures,
                   f"all {len(cases)} float32 codes rounded to odd. Well done!")


def _code_ratio(got: int, want: int) -> str | None:
    """twice_or_half of two float32 codes' values (None for a code out of range)."""
    if not 0 <= got <= 0xFFFFFFFF:
        return None
    return twice_or_half(float(np.uint32(got).view(np.float32)),
                         float(np.uint32(want).view(np.float32)))


def all_checks() -> Iterable[str]:
    """The names of this module's checks."""
    return ("check_decode", "check_double_rounding", "check_round_to_odd")
