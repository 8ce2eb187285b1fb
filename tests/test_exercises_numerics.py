"""The checkers of exercises 08-12 (tutorials/exercises/checks_numerics.py) and exercise 05's
empty bins: a right answer passes, each deliberate mistake fails on a named input with expected
vs got and the hint for that mistake, and a raising or malformed answer is reported, not raised.

The notebooks themselves (stubs fail every check, solutions pass) run in test_exercises.py.
"""

from __future__ import annotations

import math
import pathlib
import re
import sys

import numpy as np
import pytest

EXERCISES = pathlib.Path(__file__).resolve().parent.parent / "tutorials" / "exercises"
sys.path.insert(0, str(EXERCISES))

import checks  # noqa: E402
import checks_numerics as cn  # noqa: E402

import fpsim  # noqa: E402


def _rnd(x: float, fmt: str) -> float:
    return float(fpsim.round(np.float64(x), fmt))


# --- right answers, written here from the exercise text --------------------------------------
def kahan(values, fmt):
    s = c = 0.0
    for x in values:
        y = _rnd(x - c, fmt)
        t = _rnd(s + y, fmt)
        c = _rnd(_rnd(t - s, fmt) - y, fmt)
        s = t
    return s


def stall(step, fmt):
    s = 0.0
    while (t := _rnd(s + step, fmt)) != s:
        s = t
    return s


def r16(x):
    return fpsim.round(np.asarray(x, np.float64), "fp16")


def softmax16(z):
    e = r16(np.exp(r16(z - np.max(z))))
    return r16(e / r16(e.sum()))


def fp8_scale(amax, fmt):
    top = fpsim.get_format(fmt).max
    return max(k for k in range(-64, 64) if amax * 2.0**k <= top)


def flushed(x, k, fmt):
    nonzero = x != 0
    return ((fpsim.round(x.astype(np.float64) * 2.0**k, fmt) == 0) & nonzero).sum() / nonzero.sum()


def mx_block(block, *, floor=math.floor, saturate=True, zero_e=-127):
    amax = float(np.abs(block).max())
    e = floor(math.log2(amax)) - 8 if amax > 0 else zero_e
    over = "saturate" if saturate else None
    return e, fpsim.round(block.astype(np.float64) / 2.0**e, "e4m3fn", overflow=over)


def test_every_checker_accepts_the_answer_written_from_the_exercise_text(capsys):
    assert cn.check_kahan_sum(kahan) is True
    assert cn.check_stall_value(stall) is True
    assert cn.check_softmax_fp16(softmax16) is True
    assert cn.check_fp8_scale(fp8_scale) is True
    assert cn.check_flushed_share(flushed) is True
    assert cn.check_mx_block(mx_block) is True
    out = capsys.readouterr().out
    assert out.count(checks.PASS) == 6 and checks.FAIL not in out


# --- the oracles agree with independent facts ------------------------------------------------
def test_stall_oracle_is_two_to_the_precision_for_a_unit_step():
    for fmt, p in (("float16", 11), ("bfloat16", 8), ("float8_e4m3fn", 4), ("tf32", 11)):
        assert cn.stall_reference(1.0, fmt) == 2.0**p


def test_mx_oracle_matches_the_spec_example_by_hand():
    e, elements = cn.mx_reference(np.float32([500.0, 1.0, -3.3]))
    assert e == 0  # floor(log2 500) - 8 = 8 - 8
    assert list(elements) == [448.0, 1.0, -3.25]  # 500 saturates; -3.3 -> -3.25 (step 0.25)


def test_fp8_scale_oracle_known_values():
    assert cn.fp8_scale_reference(1.0, "float8_e4m3fn") == 8  # 256 <= 448 < 512
    assert cn.fp8_scale_reference(3.6, "float8_e4m3fn") == 6  # 3.6 * 128 = 460.8 > 448
    assert cn.fp8_scale_reference(60000.0, "float8_e5m2") == -1  # 60000 > 57344


def test_kahan_oracle_recovers_what_the_running_sum_loses():
    tenth = _rnd(0.1, "float16")
    assert cn.running_sum([tenth] * 4096, "float16") == 256.0
    assert cn.kahan_reference([tenth] * 4096, "float16") == 409.5 == 4096 * tenth


# --- deliberate mistakes get the hint for that mistake -----------------------------------------
def _fails_with(check, answer, capsys, *needles):
    assert check(answer) is False
    out = capsys.readouterr().out
    assert out.startswith(f"{checks.FAIL} {check.__name__}:")
    assert "expected" in out and "got" in out
    for needle in needles:
        assert needle in out, f"{needle!r} not in:\n{out}"


def test_kahan_plain_running_sum_is_named(capsys):
    _fails_with(cn.check_kahan_sum, cn.running_sum, capsys, "4096 copies of fp16(0.1)",
                "expected 409.5", "got      256.0", "plain running sum")


def test_kahan_without_rounding_every_step_is_named(capsys):
    _fails_with(cn.check_kahan_sum, lambda v, fmt: _rnd(math.fsum(v), fmt), capsys,
                "[1000, fp16(0.01), -1000]", "expected 0.0", "some step was not rounded")


def test_kahan_compensation_with_the_wrong_sign_is_named(capsys):
    def wrong_sign(values, fmt):
        s = c = 0.0
        for x in values:
            y = _rnd(x + c, fmt)
            t = _rnd(s + y, fmt)
            c = _rnd(_rnd(t - s, fmt) - y, fmt)
            s = t
        return s

    _fails_with(cn.check_kahan_sum, wrong_sign, capsys, "wrong sign")


def test_stall_formula_for_a_step_that_is_not_a_power_of_two_is_named(capsys):
    _fails_with(cn.check_stall_value,
                lambda step, fmt: step * 2.0 ** fpsim.get_format(fmt).precision, capsys,
                "step = 3.0 in 'float16'", "expected 8192.0", "got      6144.0",
                "power-of-two step only")


def test_stall_one_binade_too_far_is_a_tie_hint(capsys):
    _fails_with(cn.check_stall_value, lambda step, fmt: 2 * stall(step, fmt), capsys,
                "step = 1.0 in 'float16'", "expected 2048.0", "got      4096.0", "a tie")


def test_stall_one_binade_too_early_is_named(capsys):
    _fails_with(cn.check_stall_value, lambda step, fmt: stall(step, fmt) / 2, capsys,
                "got      1024.0", "step <= ulp(s) / 2")


def test_naive_softmax_overflow_is_named(capsys):
    def naive(z):
        with np.errstate(over="ignore", invalid="ignore"):
            e = r16(np.exp(z.astype(np.float64)))
            return r16(e / r16(e.sum()))

    _fails_with(cn.check_softmax_fp16, naive, capsys, "z = [12, 0, -1]", "got      [nan",
                "Subtract max(z)")


def test_softmax_shifted_by_the_mean_fails_on_a_large_spread(capsys):
    def by_mean(z):
        with np.errstate(over="ignore", invalid="ignore"):
            e = r16(np.exp(r16(z - z.mean())))
            return r16(e / r16(e.sum()))

    _fails_with(cn.check_softmax_fp16, by_mean, capsys, "z = [30, 0, 0, 0]", "NaN")


def test_softmax_with_an_fp16_sum_that_overflows_is_named(capsys):
    def sum_overflows(z):
        with np.errstate(over="ignore"):
            e = r16(np.exp(z.astype(np.float64)))
        return r16(e / r16(e.sum())) if np.isfinite(e).all() and e.sum() > 0 else softmax16(z)

    _fails_with(cn.check_softmax_fp16, sum_overflows, capsys, "z = [11, 11]",
                "sum of the exponentials overflowed")


def test_fp8_scale_from_exponents_only_is_named(capsys):
    def exponents(amax, fmt):
        top = fpsim.get_format(fmt).max
        return math.floor(math.log2(top)) - math.floor(math.log2(amax))

    _fails_with(cn.check_fp8_scale, exponents, capsys, "amax = 449.0", "expected k = -1",
                "got      k = 0", "saturate")


def test_fp8_scale_one_too_small_is_named(capsys):
    _fails_with(cn.check_fp8_scale, lambda a, f: fp8_scale(a, f) - 1, capsys,
                "amax = 1.0 in 'float8_e4m3fn'", "expected k = 8", "still fits")


def test_flushed_share_over_all_elements_is_named(capsys):
    def over_all(x, k, fmt):
        return flushed(x, k, fmt) * (x != 0).sum() / x.size

    _fails_with(cn.check_flushed_share, over_all, capsys, "k = 0 in 'float8_e4m3fn'",
                "non-zero elements")


def test_flushed_share_below_the_smallest_normal_is_named(capsys):
    def below_normal(x, k, fmt):
        nz = x != 0
        small = np.abs(x * 2.0**k) < fpsim.get_format(fmt).smallest_normal
        return (small & nz).sum() / nz.sum()

    _fails_with(cn.check_flushed_share, below_normal, capsys, "has subnormals")


def test_flushed_share_with_a_strict_subnormal_threshold_is_named(capsys):
    def below_subnormal(x, k, fmt):
        nz = x != 0
        small = np.abs(x * 2.0**k) < fpsim.get_format(fmt).smallest_subnormal
        return (small & nz).sum() / nz.sum()

    _fails_with(cn.check_flushed_share, below_subnormal, capsys, "half the smallest subnormal")


def test_mx_block_without_saturation_is_named(capsys):
    _fails_with(cn.check_mx_block, lambda b: mx_block(b, saturate=False), capsys,
                "block [500, 1, -3.3]", "got      e = 0, elements [  nan", "saturate")


def test_mx_block_with_a_ceil_exponent_is_named(capsys):
    _fails_with(cn.check_mx_block, lambda b: mx_block(b, floor=math.ceil), capsys,
                "expected e = 0", "got      e = 1", "floor(log2(amax)) - 8")


def test_mx_block_all_zero_scale_is_named(capsys):
    _fails_with(cn.check_mx_block, lambda b: mx_block(b, zero_e=0), capsys, "32 zeros",
                "expected e = -127", "smallest scale")


def test_mx_block_decoded_values_instead_of_elements_is_named(capsys):
    def decoded(b):
        e, el = mx_block(b)
        return e, el * 2.0**e

    _fails_with(cn.check_mx_block, decoded, capsys, "block [1, 2, 3, 4]",
                "not the decoded values")



# --- exercise 05: bins with a count of 0 ---------------------------------------------------------
def test_exercise_05_has_a_histogram_with_empty_bins_on_top():
    h = next(h for h in checks.gradient_histograms() if (h.counts == 0).any())
    top = int(h.exps[h.counts > 0].max())
    assert top < h.exps.max()
    assert checks.safe_scale_oracle(h) == 14 - top  # bin top just below 2^(top+1) <= 2^15


def test_choose_scale_from_exps_max_ignoring_empty_bins_is_named(capsys):
    assert checks.check_choose_scale(lambda e, c: 14 - int(e.max())) is False
    out = capsys.readouterr().out
    assert "histogram 'empty bins on top'" in out and "expected k = 26" in out
    assert "got      k = 20" in out and "count of 0" in out


# --- the course map and the links -----------------------------------------------------------
TUTORIALS = EXERCISES.parent


def test_course_map_links_resolve_to_files():
    text = (TUTORIALS / "README.md").read_text()
    links = re.findall(r"\]\(([^)#]+\.ipynb)\)", text)
    assert links
    missing = [link for link in links if not (TUTORIALS / link).is_file()]
    assert not missing, f"tutorials/README.md links to missing files: {missing}"


def test_course_map_lists_every_notebook_and_exercise():
    text = (TUTORIALS / "README.md").read_text()
    listed = set(re.findall(r"\]\(([^)#]+\.ipynb)\)", text))
    notebooks = {p.name for p in TUTORIALS.glob("*.ipynb")}
    exercises = {f"exercises/{p.name}" for p in EXERCISES.glob("*.ipynb")}
    assert not (notebooks | exercises) - listed, "add these to tutorials/README.md's course map"


@pytest.mark.parametrize("exercise", sorted(p.stem for p in EXERCISES.glob("*.ipynb")))
def test_exercise_is_linked_from_a_tutorial_notebook(exercise):
    link = f"exercises/{exercise}.ipynb"
    assert any(link in p.read_text() for p in TUTORIALS.glob("*.ipynb")), link


# --- blind spots: an unrounded softmax sum, an MX exponent off by one ----------------------------
def test_softmax_with_an_unrounded_sum_is_caught_bit_for_bit(capsys):
    def unrounded_sum(z):
        e = r16(np.exp(r16(z - np.max(z))))
        return r16(e / e.sum())  # the sum is never rounded to fp16

    assert all(np.abs(unrounded_sum(z) - cn.softmax_reference(z)).max() <= cn.SOFTMAX_TOLERANCE
               for _, z in cn.softmax_cases())  # the tolerance alone would pass it
    _fails_with(cn.check_softmax_fp16, unrounded_sum, capsys, "(fp16's bits)",
                "r16(np.sum(e))")


def test_softmax_with_an_fp16_running_sum_passes(capsys):
    def running(z):
        e = r16(np.exp(r16(z - np.max(z))))
        s = 0.0
        for v in e:
            s = float(r16(s + v))
        return r16(e / s)

    assert cn.check_softmax_fp16(running) is True
    capsys.readouterr()


def test_mx_block_exponent_one_too_small_gets_the_half_hint(capsys):
    _fails_with(cn.check_mx_block, lambda b: mx_block(b, floor=lambda v: math.floor(v) - 1),
                capsys, "exactly half the right one", "floor(log2(amax)) - 8")
