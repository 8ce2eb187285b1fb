"""Checks for the classroom exercises in this folder.

Every ``check_...(answer)`` runs the student's answer on a set of inputs, compares each result
with an oracle (fpsim itself, or nn's loss-scale state machine), prints one line of feedback and
returns True or False. A wrong answer, an exception raised by the answer, or a result of the wrong
type is reported (which input, expected vs got, a hint), never raised: the notebook runs through.

    >>> from checks import check_fp16_bits
    >>> check_fp16_bits(lambda x: 0)            # doctest: +ELLIPSIS
    ❌ FAIL check_fp16_bits: ... of 3030 inputs differ. First: x = 1.0 ...
    False
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

import fpsim
import nn

PASS = "✅ PASS"
FAIL = "❌ FAIL"
FP16 = fpsim.FP16


@dataclass
class Failure:
    """One input on which the answer disagrees with the oracle."""

    case: str
    expected: str
    got: str
    hint: str = ""
    raised: bool = False


def _report(name: str, total: int, failures: list[Failure], success: str,
            unit: str = "inputs") -> bool:
    """Print the verdict for ``total`` cases and return True if none failed."""
    if not failures:
        print(f"{PASS} {name}: {success}")
        return True
    first = failures[0]
    if first.raised:
        head = f"your function raised an exception on {first.case}"
    else:
        head = f"{len(failures)} of {total} {unit} differ. First: {first.case}"
    lines = [f"{FAIL} {name}: {head}",
             f"    expected {first.expected}",
             f"    got      {first.got}"]
    if first.hint:
        lines.append(f"    hint: {first.hint}")
    print("\n".join(lines))
    return False


def _call(fn: Callable[..., Any], *args: Any) -> tuple[Any, str | None]:
    """fn(*args), or (None, a description of the exception it raised)."""
    try:
        return fn(*args), None
    except NotImplementedError:
        return None, "NotImplementedError: not done yet (replace the `raise` line with your code)"
    except Exception as e:  # noqa: BLE001  (the student's code: report, never propagate)
        return None, f"{type(e).__name__}: {e}"


def _raised(case: str, expected: str, error: str) -> Failure:
    return Failure(case, expected, error, raised=True)


def _float32_hex(x: float) -> str:
    return f"0x{int(np.float32(x).view(np.uint32)):08X}"


def twice_or_half(got: float, want: float) -> str | None:
    """"twice" or "half" when ``got`` is exactly 2x or 0.5x a finite non-zero ``want`` (the
    mark of an exponent, or a bias, off by one), else None. Shared by the exercises' checks."""
    if not (math.isfinite(got) and math.isfinite(want)) or want == 0:
        return None
    return {2.0: "twice", 0.5: "half"}.get(got / want)


def off_by_one_hint(word: str, rule: str) -> str:
    """The hint for an answer that is ``word`` ("twice" or "half") the right value; ``rule``
    says how this exercise's exponent is formed."""
    side = "large" if word == "twice" else "small"
    return (f"your value is exactly {word} the right one: the exponent is one too {side}, "
            f"so look at the bias or an exponent formula off by one ({rule}).")


# --- exercise 1: round to nearest even, with integer operations ------------------------------
def fp16_bits_cases() -> np.ndarray:
    """float32 inputs: ties, subnormals, overflow, signs and zeros, then a seeded random sweep."""
    sub = FP16.smallest_subnormal
    edges = [1.0, 1.5, -2.0, 0.0, -0.0, math.inf, -math.inf, 0.1, 1 / 3,
             1 + 2**-11,            # a tie between 1 and 1 + 2^-10: goes to the even code, 1
             1 + 3 * 2**-11,        # a tie that goes up, to 1 + 2^-9
             1 + 2**-11 + 2**-20,   # just above a tie: up
             2049.0, 2051.0,        # ties between integers above 2048
             65504.0, 65519.0, 65520.0, -65520.0, 1e6,  # the overflow threshold is 65520
             sub, sub / 2, 3 * sub / 2, 5 * sub / 2, 0.75 * sub, sub / 4,
             2.0**-14, 2.0**-14 - sub / 2, 2.0**-14 - sub, 1e-7, -1e-7]
    rng = np.random.default_rng(7)
    exponents = rng.integers(-30, 18, 3000)
    sweep = rng.uniform(1, 2, 3000) * 2.0**exponents * rng.choice([-1, 1], 3000)
    return np.concatenate([np.float32(edges), NAN_INPUTS.view(np.float32),
                           sweep.astype(np.float32)])


# float32 NaNs: quiet, negative, and one whose only set mantissa bit is among the 13 that fp16
# drops (cut to 10 bits it would read as inf). Any fp16 NaN code is a right answer for them.
NAN_INPUTS = np.array([0x7FC00000, 0xFFC00000, 0x7F800001], dtype=np.uint32)


def _is_fp16_nan(code: int) -> bool:
    return 0 <= code <= 0xFFFF and (code & 0x7C00) == 0x7C00 and (code & 0x3FF) != 0


class BitsOnly:
    """The x a bits exercise hands the answer: a float (float32 by default, or float64) whose
    only door is ``x.view(np.uint32)`` (``np.uint64``). Arithmetic, comparisons and
    float()/numpy conversions raise, so an answer that computes with floating-point operations
    on x is reported. (Reinterpreting the bits as a float again is possible: that is beyond
    what a check can forbid.)"""

    __slots__ = ("_x", "_uint")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, x: float, dtype: type[np.floating] = np.float32) -> None:
        self._x = dtype(x)
        self._uint = np.dtype(f"uint{8 * self._x.itemsize}")

    def view(self, dtype: Any) -> Any:
        if np.dtype(dtype) != self._uint:
            raise TypeError(f"x.view({np.dtype(dtype).name}): only x.view(np.{self._uint.name}) "
                            "is allowed here (integer operations only)")
        return self._x.view(self._uint)

    def __repr__(self) -> str:
        return f"BitsOnly({float(self._x)!r}, {self._x.dtype.name})"

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"integer operations only: x allows x.view(np.{self._uint.name}) and "
                        "nothing else (no arithmetic, comparison, float(x) or np.float32(x))")

    __float__ = __int__ = __index__ = __bool__ = __array__ = __abs__ = __neg__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse
    __truediv__ = __rtruediv__ = __floordiv__ = __mod__ = __pow__ = _refuse
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse  # type: ignore[assignment]


def _fp16_hint(x: np.float32, got: int, want: int) -> str:
    if np.isnan(x):
        return ("x is a NaN, and a NaN must stay NaN: exponent field all ones (0x7C00) and a "
                "non-zero mantissa. Keeping only float32's top 10 mantissa bits can leave 0, "
                "which reads as inf; set a mantissa bit (0x7E00 is the usual NaN), sign on top.")
    if got ^ want == 0x8000:
        return ("only the sign bit is wrong: float32's bit 31 becomes fp16's bit 15 "
                "(shift it right by 16), for zeros, infinities and NaNs too.")
    fx = float(x)
    if not math.isfinite(fx) or abs(fx) >= 65504:
        return ("fp16's largest value is 65504; anything that rounds past it (from 65520 up) "
                "becomes inf, 0x7C00 with the sign bit on top.")
    word = (twice_or_half(float(fpsim.from_bits(got, FP16)), float(fpsim.from_bits(want, FP16)))
            if 0 <= got <= 0xFFFF else None)
    if word:
        return off_by_one_hint(word, "fp16's exponent field is float32's - 127 + 15; below "
                               "2^-14 the significand shifts right by one more bit per binade")
    if abs(fx) < FP16.smallest_normal:
        return ("below 2^-14 fp16 is subnormal: a fixed step of 2^-24, exponent field 0. "
                "Shift the full significand (with its implicit 1) right by more bits.")
    rounded = float(fpsim.round(np.float32(fx), FP16))
    lo, hi = float(fpsim.next_down(rounded, FP16)), float(fpsim.next_up(rounded, FP16))
    if fx in ((rounded + lo) / 2, (rounded + hi) / 2):
        return "this input is a tie (exactly halfway): ties go to the neighbour with an even code."
    return ("keep the top 10 mantissa bits; round up when the dropped 13 bits are more than "
            "half (0x1000), or exactly half and the kept last bit is 1.")


def check_fp16_bits(fp16_bits: Callable[[np.float32], int]) -> bool:
    """``fp16_bits(x)`` must return the fp16 code (an int in 0..0xFFFF) of float32 x rounded to
    nearest, ties to even. x arrives as a ``BitsOnly`` float32: only ``x.view(np.uint32)`` works."""
    name = "check_fp16_bits"
    cases = fp16_bits_cases()
    with np.errstate(invalid="ignore"):  # widening the signalling NaN 0x7F800001 flags invalid
        expected = fpsim.to_bits(fpsim.round(cases, FP16), FP16).astype(int)
    failures = []
    for x, want in zip(cases, expected, strict=True):
        got, error = _call(fp16_bits, BitsOnly(x))
        case = f"x = {float(x)!r} (float32 bits {_float32_hex(x)})"
        want_text = ("a NaN code (exponent field 0x1F, mantissa not 0), e.g. 0x7E00"
                     if np.isnan(x) else f"0x{want:04X} ({float(fpsim.from_bits(want, FP16))!r})")
        if error is not None:
            failures.append(_raised(case, want_text, error))
            break
        try:
            ok = (_is_fp16_nan(int(got)) if np.isnan(x) else
                  int(got) == want and 0 <= int(got) <= 0xFFFF)
        except (TypeError, ValueError, OverflowError):
            failures.append(Failure(case, want_text, f"{got!r} (not an integer code)",
                                    "return the 16-bit code as an int, e.g. 0x3C00 for 1.0."))
            continue
        if not ok:
            got_code = int(got)
            got_value = (repr(float(fpsim.from_bits(got_code, FP16)))
                         if 0 <= got_code <= 0xFFFF else "not a 16-bit code")
            failures.append(Failure(case, want_text, f"0x{got_code:04X} ({got_value})",
                                    _fp16_hint(x, got_code, int(want))))
    return _report(name, len(cases), failures,
                   f"all {len(cases):,} inputs give fpsim's fp16 code. Well done!")


# --- exercise 2: the largest x whose square does not overflow --------------------------------
# The last one is where round_down(sqrt(max)) fails: max 30, sqrt 5.48 -> 5, but 5.5^2 = 30.25
# still rounds to 30 (overflow starts at 31 = max + ulp(max)/2).
SQUARE_FORMATS = ("float16", "bfloat16", "float8_e5m2", "float8_e4m3fn", "float8_e4m3b11fnuz")


def largest_safe_square(fmt: str) -> float:
    """The oracle: the largest positive value x of ``fmt`` with round(x * x) finite, found by
    squaring every positive value (exact in float64) and rounding it with fpsim."""
    v = fpsim.values(fmt).astype(np.float64)
    v = v[v > 0]
    with np.errstate(over="ignore", invalid="ignore"):
        ok = np.isfinite(fpsim.round(v * v, fmt))
    return float(v[ok].max())


def check_largest_safe_square(answer: Callable[[str], float]) -> bool:
    """``answer(fmt_name)`` must return the largest x in the format whose square, rounded to the
    format, is finite (not inf, not NaN)."""
    name = "check_largest_safe_square"
    failures = []
    for fmt in SQUARE_FORMATS:
        want = largest_safe_square(fmt)
        f = fpsim.get_format(fmt)
        case = f"format {fmt!r} (max {f.max:g}, bias {f.bias})"
        got, error = _call(answer, fmt)
        if error is not None:
            failures.append(_raised(case, repr(want), error))
            break
        try:
            got_f = float(got)
        except (TypeError, ValueError):
            failures.append(Failure(case, repr(want), f"{got!r} (not a number)"))
            continue
        if got_f == want:
            continue
        with np.errstate(over="ignore", invalid="ignore"):
            square = fpsim.round(np.float64(got_f) ** 2, fmt)
        if float(fpsim.round(got_f, fmt)) != got_f:
            hint = f"{got_f!r} is not a value of {fmt}: round your candidate to the format."
        elif not np.isfinite(square):
            hint = (f"{got_f!r}^2 rounds to {float(square)} in {fmt}: too large. Round-to-"
                    f"nearest overflows from max + ulp(max)/2, not from max.")
        elif got_f == float(fpsim.round(math.sqrt(f.max), fmt, mode="down")):
            hint = (f"{got_f!r} is round_down(sqrt(max)), but a square overflows only from "
                    f"max + ulp(max)/2 = {f.max + float(fpsim.ulp(f.max, fmt)) / 2:g} up: "
                    f"{float(fpsim.next_up(got_f, fmt))!r}^2 is still finite. Take the square "
                    "root of the overflow threshold, not of max.")
        else:
            hint = (f"{got_f!r}^2 rounds to {float(square):g}, still finite: a larger value of "
                    f"{fmt} works too (the next one up is {float(fpsim.next_up(got_f, fmt))!r}).")
        failures.append(Failure(case, repr(want), repr(got_f), hint))
    return _report(name, len(SQUARE_FORMATS), failures,
                   f"right for all {len(SQUARE_FORMATS)} formats. Well done!")


# --- exercise 3: which gradients underflow ----------------------------------------------------
def underflow_cases() -> list[tuple[np.ndarray, float]]:
    """(gradients, loss scale) pairs: a seeded spread over 2^-40 .. 2^-10 plus boundary values."""
    rng = np.random.default_rng(3)
    spread = (rng.uniform(1, 2, 400) * 2.0 ** rng.integers(-40, -10, 400)
              * rng.choice([-1, 1], 400)).astype(np.float32)
    t = 2.0**-25  # half of fp16's smallest subnormal
    boundary = np.float32([t, -t, np.nextafter(np.float32(t), np.float32(1)), 0.75 * 2**-24,
                           np.nextafter(np.float32(t), np.float32(0)), 0.0, 2**-24, 1e-3])
    g = np.concatenate([boundary, spread])
    return [(g, 1.0), (g / np.float32(2**8), 2.0**8), (g * np.float32(2**-20), 2.0**15)]


def underflow_oracle(g: np.ndarray, scale: float) -> np.ndarray:
    """True where a non-zero g becomes 0 when g * scale (exact in float64) is stored in fp16."""
    stored = fpsim.round(np.asarray(g, np.float64) * scale, FP16)
    return (stored == 0) & (np.asarray(g) != 0)


def check_underflows(underflows: Callable[[np.ndarray, float], np.ndarray]) -> bool:
    """``underflows(g, scale)`` must return a boolean array: True where the non-zero gradient
    g[i] becomes 0 when g[i] * scale is stored in fp16."""
    name = "check_underflows"
    failures = []
    total = 0
    for g, scale in underflow_cases():
        want = underflow_oracle(g, scale)
        total += len(g)
        got, error = _call(underflows, g.copy(), scale)
        case_all = f"the {len(g)} gradients with scale 2^{math.log2(scale):g}"
        if error is not None:
            failures.append(_raised(case_all, "a boolean array", error))
            break
        got_arr = np.asarray(got)
        if got_arr.shape != want.shape:
            failures.append(Failure(case_all, f"a boolean array of shape {want.shape}",
                                    f"shape {got_arr.shape}"))
            continue
        for i in np.flatnonzero(got_arr.astype(bool) != want):
            v = float(g[i]) * scale
            failures.append(Failure(
                f"g = {float(g[i])!r} with scale 2^{math.log2(scale):g} "
                f"(g * scale = {v!r} = 2^{math.log2(abs(v)) if v else -math.inf:.3f})",
                str(bool(want[i])), str(bool(got_arr[i])),
                "fp16's smallest subnormal is 2^-24; |g * scale| <= 2^-25 (half of it, a tie "
                "that goes to the even 0) rounds to zero, anything above rounds up to 2^-24. "
                "A gradient that is already 0 did not underflow."))
    return _report(name, total, failures,
                   f"all {total:,} gradients predicted right, for all three scales. Well done!")


# --- exercise 4: the dynamic loss scaler's update rule -----------------------------------------
@dataclass
class ScalerCase:
    """A run of steps (True: finite gradients) from a start scale, Keras's rule."""

    initial_scale: float
    growth_interval: int
    finite: tuple[bool, ...]


SCALER_CASES = (
    ScalerCase(2.0**15, 3, (True,) * 7),                      # growth after every 3 steps
    ScalerCase(2.0**15, 2000, (True, False, True, False)),    # backoff, counter resets
    ScalerCase(4.0, 3, (False,) * 4),                         # the floor: never below 1
    ScalerCase(8.0, 2, (True, False, True, True, True)),      # an inf resets the counter
    ScalerCase(2.0**127, 1, (True, True, False, True)),       # doubling 2^127 is inf: kept
)


def scaler_oracle(case: ScalerCase) -> list[tuple[float, int]]:
    """(scale, counter) after each step, from nn's own ``DynamicLossScale`` (Keras's settings:
    x2 growth, x0.5 backoff, floor 1)."""
    s = nn.DynamicLossScale(case.initial_scale, case.growth_interval, growth_factor=2.0,
                            backoff_factor=0.5, min_scale=1.0)
    out = []
    for finite in case.finite:
        s.update(finite)
        out.append((s.scale, s.counter))
    return out


def check_update_scale(update_scale: Callable[[float, int, bool, int], tuple[float, int]]
                       ) -> bool:
    """``update_scale(scale, counter, finite, growth_interval)`` must return the new
    ``(scale, counter)`` under Keras's rule."""
    name = "check_update_scale"
    failures = []
    for n, case in enumerate(SCALER_CASES, 1):
        scale, counter = case.initial_scale, 0
        for step, (finite, want) in enumerate(zip(case.finite, scaler_oracle(case),
                                                  strict=True), 1):
            where = (f"run {n} (start scale {case.initial_scale:g}, growth_interval "
                     f"{case.growth_interval}), step {step}: update_scale({scale:g}, {counter}, "
                     f"finite={finite}, {case.growth_interval})")
            got, error = _call(update_scale, scale, counter, finite, case.growth_interval)
            if error is not None:
                failures.append(_raised(where, str(want), error))
                break
            try:
                got_scale, got_counter = float(got[0]), int(got[1])
            except (TypeError, ValueError, IndexError, KeyError):
                failures.append(Failure(where, str(want), f"{got!r} (not a pair)",
                                        "return a tuple (new_scale, new_counter)."))
                break
            if (got_scale, got_counter) != want:
                failures.append(Failure(where, str(want), str((got_scale, got_counter)),
                                        _scaler_hint(scale, finite, want)))
                break
            scale, counter = want  # continue from the right state
    steps = sum(len(c.finite) for c in SCALER_CASES)
    return _report(name, len(SCALER_CASES), failures,
                   f"all {steps} steps of {len(SCALER_CASES)} runs follow the rule. Well done!",
                   unit="runs")


def _scaler_hint(scale: float, finite: bool, want: tuple[float, int]) -> str:
    if not finite and scale <= 1.0:
        return "the scale halves on inf/NaN but never goes below 1."
    if not finite:
        return "inf/NaN: halve the scale and reset the counter to 0."
    if want[1] == 0 and want[0] == scale:
        return ("the counter reached growth_interval but doubling would give inf in float32 "
                "(max about 3.4e38): keep the scale, reset the counter.")
    if want[1] == 0:
        return "after growth_interval finite steps in a row: double the scale, counter back to 0."
    return "a finite step only counts up; the scale changes after growth_interval of them."


# --- exercise 5: a static loss scale from a histogram ------------------------------------------
@dataclass
class Histogram:
    """counts[i] gradients with 2^exps[i] <= |g| < 2^(exps[i] + 1)."""

    name: str
    exps: np.ndarray
    counts: np.ndarray


def gradient_histograms() -> list[Histogram]:
    """Three bell-shaped exponent histograms at different heights (integers), and one whose
    range of bins runs past its gradients: empty bins (count 0) on top, below and inside, as a
    histogram over fixed edges has them."""
    out = []
    for name, centre, width in (("narrow, low", -30, 3), ("wide", -20, 8),
                                ("already high", 5, 4)):
        exps = np.arange(centre - 3 * width, centre + 3 * width + 1)
        counts = np.round(1000 * np.exp(-0.5 * ((exps - centre) / width) ** 2)).astype(int)
        keep = counts > 0
        out.append(Histogram(name, exps[keep], counts[keep]))
    exps = np.arange(-34, -5)  # fixed edges 2^-34 .. 2^-5; the gradients stop below 2^-11
    counts = np.round(1000 * np.exp(-0.5 * ((exps + 20) / 3.0) ** 2)).astype(int)
    counts[exps > -12] = 0
    counts[exps == -22] = 0
    out.append(Histogram("empty bins on top", exps, counts))
    return out


def _top_exponent(h: Histogram) -> int:
    """The highest bin that holds a gradient (count > 0)."""
    return int(h.exps[h.counts > 0].max())


def _top_of_bin(e: int) -> np.float64:
    """The largest float32 value in [2^e, 2^(e+1))."""
    return np.float64(np.nextafter(np.float32(2.0 ** (e + 1)), np.float32(0)))


def safe_scale_oracle(h: Histogram) -> int:
    """The largest k such that no value of any bin overflows fp16 once multiplied by 2^k, found
    by rounding the largest float32 value of the top bin, times 2^k, with fpsim."""
    top = _top_of_bin(_top_exponent(h))
    with np.errstate(over="ignore"):
        ok = [k for k in range(-60, 80) if np.isfinite(fpsim.round(top * 2.0**k, FP16))]
    return max(ok)


def zero_share_oracle(h: Histogram, k: int) -> float:
    """The share of gradients in bins whose largest value, times 2^k, still rounds to 0 in fp16."""
    zero = [fpsim.round(_top_of_bin(int(e)) * 2.0**k, FP16) == 0 for e in h.exps]
    return float(h.counts[np.array(zero)].sum() / h.counts.sum())


def _int_or_none(x: Any) -> int | None:
    try:
        if float(x) == int(x):
            return int(x)
    except (TypeError, ValueError, OverflowError):
        pass
    return None


def check_choose_scale(choose_scale: Callable[[np.ndarray, np.ndarray], int]) -> bool:
    """``choose_scale(exps, counts)`` must return the largest integer k such that no gradient
    of the histogram overflows fp16 when multiplied by 2^k."""
    name = "check_choose_scale"
    failures = []
    hists = gradient_histograms()
    for h in hists:
        want = safe_scale_oracle(h)
        case = (f"histogram {h.name!r} (exponents {h.exps.min()} .. {h.exps.max()}, "
                f"{h.counts.sum():,} gradients)")
        got, error = _call(choose_scale, h.exps.copy(), h.counts.copy())
        if error is not None:
            failures.append(_raised(case, f"k = {want}", error))
            break
        k = _int_or_none(got)
        if k is None:
            failures.append(Failure(case, f"k = {want}", f"{got!r} (not an integer)",
                                    "return the exponent k of the scale 2^k, e.g. 15."))
        elif k != want:
            top = _top_exponent(h)
            if k > want:
                hint = (f"with k = {k} the largest gradients (just below 2^{top + 1}) reach "
                        f"2^{top + 1 + k} in fp16, past 65520 (max 65504 + half an ulp): they "
                        "overflow.")
            elif top < int(h.exps.max()) and k == want - (int(h.exps.max()) - top):
                hint = (f"the bins above exponent {top} have a count of 0: they hold no "
                        f"gradients, so the top bin is {top}, not exps.max() = "
                        f"{int(h.exps.max())}.")
            else:
                hint = (f"k = {k} is safe but k = {k + 1} is too: a larger scale rescues more "
                        "small gradients.")
            failures.append(Failure(case, f"k = {want}", f"k = {k}", hint))
    return _report(name, len(hists), failures,
                   f"the largest safe scale for all {len(hists)} histograms. Well done!")


def check_zero_share(zero_share: Callable[[np.ndarray, np.ndarray, int], float]) -> bool:
    """``zero_share(exps, counts, k)`` must return the share of the histogram's gradients in
    bins that round to 0 in fp16 even after scaling by 2^k (the bin's largest value does)."""
    name = "check_zero_share"
    failures = []
    cases = [(h, k) for h in gradient_histograms() for k in (0, 8, safe_scale_oracle(h))]
    for h, k in cases:
        want = zero_share_oracle(h, k)
        case = f"histogram {h.name!r} with k = {k}"
        got, error = _call(zero_share, h.exps.copy(), h.counts.copy(), k)
        if error is not None:
            failures.append(_raised(case, f"{want:.6f}", error))
            break
        try:
            got_f = float(got)
        except (TypeError, ValueError):
            failures.append(Failure(case, f"{want:.6f}", f"{got!r} (not a number)"))
            continue
        if not abs(got_f - want) <= 1e-9:
            failures.append(Failure(
                case, f"{want:.6f}", f"{got_f:.6f}",
                "bin e holds [2^e, 2^(e+1)); scaled it is [2^(e+k), 2^(e+k+1)). The whole bin "
                "rounds to 0 when even its top is at most 2^-25, i.e. e + k + 1 <= -25. "
                "Return a share (0..1), not a percentage."))
    return _report(name, len(cases), failures,
                   f"all {len(cases)} shares match. Well done!")


def all_checks() -> Iterable[str]:
    """The names of the checks, for listing in a notebook or a test."""
    return ("check_fp16_bits", "check_largest_safe_square", "check_underflows",
            "check_update_scale", "check_choose_scale", "check_zero_share")
