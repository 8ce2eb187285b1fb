"""Checks for exercises 08-12: Kahan summation, swamping, the softmax in fp16, an fp8 scale and
an MX block by hand.

They follow ``checks.py`` (whose report helpers they use): each ``check_...(answer)`` runs the
answer on named inputs, compares with an oracle (fpsim itself, or the algorithm written out
here with every operation rounded by fpsim), prints one line of feedback naming the first
failing input with expected vs got and a hint, and returns True or False; an exception raised by
the answer is reported, never raised.

    >>> from checks_numerics import check_stall_value
    >>> check_stall_value(lambda step, fmt: 0.0)            # doctest: +ELLIPSIS
    ❌ FAIL check_stall_value: ... of 8 inputs differ. First: step = 1.0 in 'float16' ...
    False
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from checks import Failure, _call, _raised, _report, off_by_one_hint

import fpsim


def _rnd(x: float, fmt: str) -> float:
    """x rounded to ``fmt`` (nearest-even), as a Python float."""
    return float(fpsim.round(np.float64(x), fmt))


# --- exercise 8: Kahan summation ---------------------------------------------------------------
def kahan_reference(values: Sequence[float], fmt: str) -> float:
    """Kahan's compensated sum with every operation rounded to ``fmt`` (the oracle)."""
    s = c = 0.0
    for x in values:
        y = _rnd(x - c, fmt)          # the value, corrected by what the last addition lost
        t = _rnd(s + y, fmt)          # the new sum: low bits of y are lost here ...
        c = _rnd(_rnd(t - s, fmt) - y, fmt)  # ... and recovered: (t - s) - y is minus them
        s = t
    return s


def running_sum(values: Sequence[float], fmt: str) -> float:
    """The plain running sum, rounded to ``fmt`` after every addition."""
    s = 0.0
    for x in values:
        s = _rnd(s + x, fmt)
    return s


def _kahan_wrong_sign(values: Sequence[float], fmt: str) -> float:
    s = c = 0.0
    for x in values:
        y = _rnd(x + c, fmt)
        t = _rnd(s + y, fmt)
        c = _rnd(_rnd(t - s, fmt) - y, fmt)
        s = t
    return s


def kahan_cases() -> list[tuple[str, list[float], str]]:
    """(description, values already in the format, format name)."""
    rng = np.random.default_rng(8)
    tenth = _rnd(0.1, "float16")
    uniform = [_rnd(v, "bfloat16") for v in rng.uniform(0, 1, 1000)]
    mixed = [_rnd(v, "float16") for v in rng.normal(0, 1, 500) * 2.0 ** rng.integers(-4, 8, 500)]
    singles = [float(np.float32(v)) for v in rng.uniform(0, 1, 3000)]
    return [
        ("[] (no values)", [], "float16"),
        ("4096 copies of fp16(0.1) = 0.0999755859375", [tenth] * 4096, "float16"),
        ("1.0 followed by 1000 copies of 2^-12", [1.0] + [2.0**-12] * 1000, "float16"),
        ("1000 seeded uniform [0, 1) values in bf16", uniform, "bfloat16"),
        ("500 seeded values of both signs, magnitudes 2^-4 .. 2^8, in fp16", mixed, "float16"),
        ("3000 seeded uniform [0, 1) values in fp32", singles, "float32"),
        # Kahan's blind spot: the correction -0.01 is itself swamped by -1000, so the result is
        # 0, not 0.01; only a sum that skips some rounding gets 0.01
        ("[1000, fp16(0.01), -1000]", [1000.0, _rnd(0.01, "float16"), -1000.0], "float16"),
    ]


def _unrounded(values: Sequence[float], fmt: str) -> float:
    return _rnd(math.fsum(values), fmt)


_KAHAN_MISTAKES: tuple[tuple[Callable[[Sequence[float], str], float], str], ...] = (
    (running_sum, "that is the plain running sum. Keep what each addition lost, "
                  "c = (t - s) - y, and subtract it from the next value: y = x - c."),
    (_kahan_wrong_sign, "the compensation has the wrong sign: c = (t - s) - y is what the "
                        "addition added too much, so the next value is corrected by y = x - c."),
    (_unrounded, "closer than Kahan can get in this format: some step was not rounded. Round "
                 "every operation to the format (fpsim.round), the way the hardware would."),
)


def check_kahan_sum(kahan_sum: Callable[[list[float], str], float]) -> bool:
    """``kahan_sum(values, fmt)`` must return Kahan's compensated sum of ``values`` with every
    operation (x - c, s + y, t - s, (t - s) - y) rounded to ``fmt``.

    The hint names the mistake whose result matches the answer on every failing input (the
    plain running sum, a compensation of the wrong sign, a sum not rounded at every step)."""
    name = "check_kahan_sum"
    failures = []
    wrong: list[tuple[list[float], str, float]] = []
    cases = kahan_cases()
    for text, values, fmt in cases:
        want = kahan_reference(values, fmt)
        case = f"{text}, format {fmt!r}"
        got, error = _call(kahan_sum, list(values), fmt)
        if error is not None:
            failures.append(_raised(case, repr(want), error))
            break
        try:
            got_f = float(got)
        except (TypeError, ValueError):
            failures.append(Failure(case, repr(want), f"{got!r} (not a number)"))
            continue
        if got_f != want:
            failures.append(Failure(case, repr(want), repr(got_f)))
            wrong.append((values, fmt, got_f))
    if wrong and not failures[0].raised:
        failures[0].hint = next(
            (hint for mistake, hint in _KAHAN_MISTAKES
             if all(mistake(v, f) == g for v, f, g in wrong)),
            "follow the four steps in order, each rounded: y = rnd(x - c); t = rnd(s + y); "
            "c = rnd(rnd(t - s) - y); s = t. Start with s = c = 0.")
    return _report(name, len(cases), failures,
                   f"Kahan's sum, bit for bit, on all {len(cases)} inputs. Well done!")


# --- exercise 9: swamping --------------------------------------------------------------------
STALL_CASES: tuple[tuple[float, str], ...] = (
    (1.0, "float16"), (0.5, "float16"), (3.0, "float16"), (1.0, "bfloat16"),
    (1.0, "float8_e4m3fn"), (1.0, "tf32"), (_rnd(0.1, "float16"), "float16"),
    (_rnd(0.1, "bfloat16"), "bfloat16"),
)


def stall_reference(step: float, fmt: str) -> float:
    """The value where s = rnd(s + step), s starting at 0, stops changing (fpsim.sum of enough
    copies: the accumulator is rounded to ``fmt`` after every addition)."""
    n = 1 << 16
    s = float(fpsim.sum(np.full(n, step), accumulate=fmt, fmt=fmt))
    assert s == _rnd(s + step, fmt), "not stalled: more copies needed"
    return s


def check_stall_value(stall_value: Callable[[float, str], float]) -> bool:
    """``stall_value(step, fmt)`` must return the value at which a running sum of copies of
    ``step``, rounded to ``fmt`` after every addition, stops growing."""
    name = "check_stall_value"
    failures = []
    for step, fmt in STALL_CASES:
        want = stall_reference(step, fmt)
        precision = fpsim.get_format(fmt).precision
        case = f"step = {step!r} in {fmt!r} ({precision} significant bits)"
        got, error = _call(stall_value, step, fmt)
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
        power_of_two = math.frexp(step)[0] == 0.5
        if power_of_two and got_f == want * 2:
            hint = (f"one binade too far: at {want!r} the step is exactly half an ulp, a tie, "
                    "and a tie goes to the even neighbour, the sum itself.")
        elif got_f == want / 2:
            hint = (f"at {got_f!r} the step is a whole ulp (or more than half of one): "
                    "s + step still rounds up. The sum stalls once step <= ulp(s) / 2.")
        elif not power_of_two and got_f == step * 2.0**precision:
            hint = (f"2^p * step holds for a power-of-two step only; {step!r} is not one, so "
                    "the sum's last bits wander. Add step with rounding until s stops moving.")
        else:
            hint = (f"add step to s = 0 again and again, rounding to {fmt} each time; return "
                    "s once rnd(s + step) == s.")
        failures.append(Failure(case, repr(want), repr(got_f), hint))
    return _report(name, len(STALL_CASES), failures,
                   f"the stall value for all {len(STALL_CASES)} steps and formats. Well done!")


# --- exercise 10: the softmax in fp16 --------------------------------------------------------
SOFTMAX_TOLERANCE = 2.0**-9  # a few fp16 ulps of a probability near 1


def softmax_cases() -> list[tuple[str, np.ndarray]]:
    """Logit vectors (fp16 values) that break a naive fp16 softmax in different ways."""
    rng = np.random.default_rng(10)
    cases = [
        ("z = [1, 2, 3]", [1.0, 2.0, 3.0]),
        ("z = [12, 0, -1] (exp(12) = 162755 > 65504)", [12.0, 0.0, -1.0]),
        ("z = [-20, -21, -22] (exp(-20) = 2.1e-9, below fp16's 6e-8)", [-20.0, -21.0, -22.0]),
        ("z = [11, 11] (each exp finite, their sum 119748 is not)", [11.0, 11.0]),
        ("z = [30, 0, 0, 0] (z - mean(z) still overflows)", [30.0, 0.0, 0.0, 0.0]),
        ("z = [100, 100, 100, 100]", [100.0] * 4),
        ("64 seeded logits, N(0, 4^2)", list(rng.normal(0, 4, 64))),
    ]
    return [(text, fpsim.round(np.float32(z), "float16")) for text, z in cases]


def softmax_reference(z: np.ndarray) -> np.ndarray:
    """The exact softmax, in float64."""
    e = np.exp(np.asarray(z, np.float64) - np.max(z))
    return e / e.sum()


def softmax_fp16_references(z: np.ndarray) -> list[np.ndarray]:
    """The fp16 computation the exercise asks for, each step rounded to fp16 (nearest-even):
    ``z - max(z)``, the exponentials, their sum and the quotients. The sum may be rounded once
    (as an fp32 accumulator nearly does) or after every addition (an fp16 running sum): either
    result, bit for bit, is right."""
    def r16(x: Any) -> np.ndarray:
        return fpsim.round(np.asarray(x, np.float64), "float16")

    e = r16(np.exp(r16(np.asarray(z, np.float64) - np.max(z))))
    running = 0.0
    for v in e.tolist():
        running = float(r16(running + v))
    return [r16(e / r16(np.sum(e))), r16(e / running)]


def check_softmax_fp16(softmax_fp16: Callable[[np.ndarray], np.ndarray]) -> bool:
    """``softmax_fp16(z)`` must return the softmax of the fp16 logits ``z``, computed in fp16:
    finite, within 2^-9 of the exact softmax in every entry, and bit for bit one of
    ``softmax_fp16_references(z)`` (so an unrounded sum or quotient is caught)."""
    name = "check_softmax_fp16"
    failures: list[Failure] = []
    not_fp16: list[Failure] = []  # close enough, but not fp16's bits: reported after the rest
    cases = softmax_cases()
    for text, z in cases:
        want = softmax_reference(z)
        want_text = np.array2string(want, precision=4, threshold=6)
        got, error = _call(softmax_fp16, z.copy())
        if error is not None:
            failures.append(_raised(text, want_text, error))
            break
        try:
            p = np.asarray(got, np.float64)
        except (TypeError, ValueError):
            failures.append(Failure(text, want_text, f"{got!r} (not an array)"))
            continue
        if p.shape != want.shape:
            failures.append(Failure(text, f"an array of shape {want.shape}", f"shape {p.shape}"))
            continue
        with np.errstate(invalid="ignore"):
            bad = ~(np.abs(p - want) <= SOFTMAX_TOLERANCE)
        got_text = np.array2string(p, precision=4, threshold=6)
        if not bad.any():
            if any(np.array_equal(p, ref) for ref in softmax_fp16_references(z)):
                continue
            fp16 = softmax_fp16_references(z)[0]
            first = int(np.flatnonzero(p != fp16)[0])
            not_fp16.append(Failure(
                text, f"{np.array2string(fp16, precision=6, threshold=6)} (fp16's bits)",
                np.array2string(p, precision=6, threshold=6),
                f"close to the softmax, but entry {first} ({p[first]!r}) is not fp16's "
                f"{fp16[first]!r}: round every step with r16, the sum included "
                "(r16(np.sum(e))); an unrounded sum or quotient gives other bits."))
            continue
        if np.isnan(p).any():
            hint = ("NaN: exp overflowed to inf (fp16's exp(z) is inf from z = 11.09 up) and "
                    "inf / inf is NaN, or every exp underflowed to 0 and 0 / 0 is NaN. Subtract "
                    "max(z) first: the largest exponential is then exp(0) = 1.")
        elif (p[bad] == 0).all():
            hint = ("0 where the answer is not: the sum of the exponentials overflowed to inf. "
                    "After subtracting max(z) every exponential is at most 1 and the sum stays "
                    "finite.")
        else:
            hint = (f"entry {int(np.flatnonzero(bad)[0])} is off by more than 2^-9: compute "
                    "exp(z - max(z)), divide by its sum, rounding each step to fp16.")
        failures.append(Failure(text, want_text, got_text, hint))
    return _report(name, len(cases), failures + not_fp16,
                   f"finite and right for all {len(cases)} logit vectors. Well done!")


# --- exercise 11: choosing an fp8 scale ----------------------------------------------------------
FP8_SCALE_CASES: tuple[tuple[float, str], ...] = (
    (1.0, "float8_e4m3fn"), (448.0, "float8_e4m3fn"), (449.0, "float8_e4m3fn"),
    (3.5, "float8_e4m3fn"), (3.6, "float8_e4m3fn"), (0.3, "float8_e4m3fn"),
    (1e-3, "float8_e5m2"), (60000.0, "float8_e5m2"),
)


def fp8_scale_reference(amax: float, fmt: str) -> int:
    """The largest integer k with amax * 2^k <= the format's max (exact in float64)."""
    top = fpsim.get_format(fmt).max
    return max(k for k in range(-40, 60) if amax * 2.0**k <= top)


def check_fp8_scale(fp8_scale: Callable[[float, str], int]) -> bool:
    """``fp8_scale(amax, fmt)`` must return the largest integer k such that amax * 2^k is at
    most the format's max: the largest power-of-two scale under which nothing saturates."""
    name = "check_fp8_scale"
    failures = []
    for amax, fmt in FP8_SCALE_CASES:
        top = fpsim.get_format(fmt).max
        want = fp8_scale_reference(amax, fmt)
        case = f"amax = {amax!r} in {fmt!r} (max {top:g})"
        got, error = _call(fp8_scale, amax, fmt)
        if error is not None:
            failures.append(_raised(case, f"k = {want}", error))
            break
        try:
            k = int(got)
            assert k == float(got)
        except (TypeError, ValueError, OverflowError, AssertionError):
            failures.append(Failure(case, f"k = {want}", f"{got!r} (not an integer)",
                                    "return the exponent k of the scale 2^k."))
            continue
        if k == want:
            continue
        if k > want:
            hint = (f"amax * 2^{k} = {amax * 2.0**k:g} > {top:g}: the largest values saturate. "
                    "Compare amax * 2^k with the max itself, not only their exponents.")
        else:
            hint = (f"amax * 2^{k + 1} = {amax * 2.0 ** (k + 1):g} <= {top:g} still fits: a "
                    "larger scale keeps more small values away from the subnormals.")
        failures.append(Failure(case, f"k = {want}", f"k = {k}", hint))
    return _report(name, len(FP8_SCALE_CASES), failures,
                   f"the largest safe scale for all {len(FP8_SCALE_CASES)} cases. Well done!")


def flushed_cases() -> list[tuple[np.ndarray, int, str]]:
    """(tensor, k, format): a seeded log-normal tensor with exact zeros and edge values."""
    rng = np.random.default_rng(11)
    x = (rng.lognormal(-6, 3, 2000) * rng.choice([-1, 1], 2000)).astype(np.float32)
    x[::10] = 0.0
    sub = fpsim.E4M3FN.smallest_subnormal
    x[:4] = np.float32([sub / 2, 0.75 * sub / 2, sub * 0.51, -sub / 2])  # ties and neighbours
    return [(x, 0, "float8_e4m3fn"), (x, 4, "float8_e4m3fn"), (x, 8, "float8_e5m2")]


def flushed_reference(x: np.ndarray, k: int, fmt: str) -> float:
    """The share of the non-zero elements of x that round to 0 in fmt once scaled by 2^k."""
    nonzero = x != 0
    zero = fpsim.round(x.astype(np.float64) * 2.0**k, fmt) == 0
    return float((zero & nonzero).sum() / nonzero.sum())


def check_flushed_share(flushed_share: Callable[[np.ndarray, int, str], float]) -> bool:
    """``flushed_share(x, k, fmt)`` must return the share of x's non-zero elements that become
    0 when x * 2^k is rounded to ``fmt``."""
    name = "check_flushed_share"
    failures = []
    cases = flushed_cases()
    for x, k, fmt in cases:
        want = flushed_reference(x, k, fmt)
        f = fpsim.get_format(fmt)
        case = (f"the seeded tensor ({x.size} values, {int((x == 0).sum())} of them 0) with "
                f"k = {k} in {fmt!r}")
        got, error = _call(flushed_share, x.copy(), k, fmt)
        if error is not None:
            failures.append(_raised(case, f"{want:.6f}", error))
            break
        try:
            got_f = float(got)
        except (TypeError, ValueError):
            failures.append(Failure(case, f"{want:.6f}", f"{got!r} (not a number)"))
            continue
        if abs(got_f - want) <= 1e-12:
            continue
        nonzero = x != 0
        scaled = np.abs(x.astype(np.float64)) * 2.0**k
        at_sub = ((scaled < f.smallest_subnormal) & nonzero).sum() / nonzero.sum()
        at_normal = ((scaled < f.smallest_normal) & nonzero).sum() / nonzero.sum()
        if abs(got_f - want * nonzero.sum() / x.size) <= 1e-12:
            hint = "divide by the number of non-zero elements: a 0 was never flushed."
        elif abs(got_f - at_normal) <= 1e-12:
            hint = (f"{fmt} has subnormals down to {f.smallest_subnormal:g}: values below the "
                    "smallest normal are not flushed.")
        elif abs(got_f - at_sub) <= 1e-12:
            hint = (f"values from half the smallest subnormal ({f.smallest_subnormal / 2:g}, "
                    "exclusive) up round to the subnormal; half of it exactly is a tie that goes "
                    "to the even 0. Round with fpsim and compare with 0.")
        else:
            hint = "round x * 2^k to the format with fpsim.round and count the new zeros."
        failures.append(Failure(case, f"{want:.6f}", f"{got_f:.6f}", hint))
    return _report(name, len(cases), failures, f"all {len(cases)} shares match. Well done!")


# --- exercise 12: an MX block by hand ------------------------------------------------------------
def mx_cases() -> list[tuple[str, np.ndarray]]:
    """Blocks of at most 32 float32 values, for mxfp8_e4m3."""
    rng = np.random.default_rng(12)
    return [
        ("[500, 1, -3.3]", np.float32([500.0, 1.0, -3.3])),
        ("[1, 2, 3, 4]", np.float32([1.0, 2.0, 3.0, 4.0])),
        ("[448, -0.5, 0.001]", np.float32([448.0, -0.5, 0.001])),
        ("[1.9, 1.0] (amax 1.9 just below a power of two)", np.float32([1.9, 1.0])),
        ("[1e-6, -3e-7, 2e-9]", np.float32([1e-6, -3e-7, 2e-9])),
        ("32 zeros", np.zeros(32, np.float32)),
        ("32 seeded N(0, 1) values", rng.normal(0, 1, 32).astype(np.float32)),
    ]


def mx_reference(block: np.ndarray) -> tuple[int, np.ndarray]:
    """(shared exponent e, E4M3 elements) from ``fpsim.mx.encode`` under the OCP rule."""
    scale, codes = fpsim.mx.encode(block, "mxfp8_e4m3")
    e = int(np.asarray(scale).reshape(-1)[0]) - fpsim.E8M0FNU.bias
    return e, np.asarray(fpsim.from_bits(codes, fpsim.E4M3FN), np.float64)


def check_mx_block(mx_block: Callable[[np.ndarray], tuple[int, np.ndarray]]) -> bool:
    """``mx_block(block)`` must return ``(e, elements)`` for mxfp8_e4m3: the shared exponent
    e = floor(log2(amax)) - 8 (2^-127 for an all-zero block) and each x / 2^e rounded to
    E4M3FN, nearest-even, saturating at +-448."""
    name = "check_mx_block"
    failures = []
    cases = mx_cases()
    for text, block in cases:
        e_want, el_want = mx_reference(block)
        want_text = f"e = {e_want}, elements {np.array2string(el_want, threshold=6)}"
        got, error = _call(mx_block, block.copy())
        if error is not None:
            failures.append(_raised(f"block {text}", want_text, error))
            break
        try:
            e_got, el_got = int(got[0]), np.asarray(got[1], np.float64)
        except (TypeError, ValueError, IndexError, OverflowError):
            failures.append(Failure(f"block {text}", want_text, f"{got!r} (not a pair)",
                                    "return a tuple (e, elements)."))
            continue
        got_text = f"e = {e_got}, elements {np.array2string(el_got, threshold=6)}"
        amax = float(np.abs(block).max())
        if e_got != e_want:
            if amax == 0:
                hint = "an all-zero block gets the smallest scale, 2^-127 (E8M0 code 0)."
            elif e_got in (e_want + 1, e_want - 1):
                word = "twice" if e_got == e_want + 1 else "half"
                hint = off_by_one_hint(word, f"the OCP rule is e = floor(log2(amax)) - 8 = "
                                       f"floor(log2 {amax:g}) - 8 = floor({np.log2(amax):.3f}) "
                                       "- 8, where 8 is E4M3's largest exponent (448 = 1.75 x "
                                       "2^8; its bias is 7); rounding log2(amax) up instead of "
                                       "down never clips but wastes a binade")
            else:
                hint = (f"e = floor(log2(amax)) - emax, with emax = 8 for E4M3 (448 = 1.75 * "
                        f"2^8); here amax = {amax:g}.")
            failures.append(Failure(f"block {text}", want_text, got_text, hint))
            continue
        if el_got.shape == el_want.shape and np.array_equal(el_got, el_want):
            continue
        if el_got.shape != el_want.shape:
            hint = f"return one element per input value ({el_want.shape})."
        elif np.isnan(el_got).any():
            hint = ("E4M3FN has no inf: a scaled value above 448 rounds to NaN unless you "
                    "saturate (fpsim.round(..., overflow='saturate')). MX elements saturate.")
        elif np.allclose(el_got, el_want * 2.0**e_want):
            hint = "return the elements x / 2^e in E4M3, not the decoded values."
        else:
            hint = "divide each value by 2^e, then round it to float8_e4m3fn (nearest-even)."
        failures.append(Failure(f"block {text}", want_text, got_text, hint))
    return _report(name, len(cases), failures,
                   f"scale and elements right for all {len(cases)} blocks. Well done!")


def all_checks() -> Iterable[str]:
    """The names of this module's checks."""
    return ("check_kahan_sum", "check_stall_value", "check_softmax_fp16", "check_fp8_scale",
            "check_flushed_share", "check_mx_block")
