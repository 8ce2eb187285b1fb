"""The checker of exercise 13, delayed scaling by hand (tutorials/exercises/checks_fp8.py): a
right answer written from the exercise text passes, each deliberate mistake fails on a named
sequence with expected vs got and the hint for that mistake, and a raising or malformed answer
is reported, not raised. The notebooks themselves run in test_exercises.py.
"""

from __future__ import annotations

import math
import pathlib
import sys

import numpy as np

EXERCISES = pathlib.Path(__file__).resolve().parent.parent / "tutorials" / "exercises"
sys.path.insert(0, str(EXERCISES))

import checks  # noqa: E402
import checks_fp8  # noqa: E402


def from_the_text(amaxes, fp8_max, history_len, window_len=None, keep_on_bad=True):
    """The rule as the exercise states it, in float64 (window_len / keep_on_bad: mistakes)."""
    length = history_len if window_len is None else window_len
    scales, scale = [], 1.0
    for t in range(len(amaxes)):
        scales.append(scale)
        top = max(amaxes[max(0, t - length + 1):t + 1])
        if (math.isfinite(top) and top > 0) or not keep_on_bad:
            scale = fp8_max / top if top > 0 else math.inf
    return scales


def test_answer_written_from_the_exercise_text_passes(capsys):
    assert checks_fp8.check_delayed_scales(from_the_text) is True
    assert capsys.readouterr().out.startswith(f"{checks.PASS} check_delayed_scales:")


def test_oracle_matches_the_rule_by_hand_on_a_spike():
    # 448 / 100 for the 4 steps whose window holds the spike, then back to 448 / 1
    got = checks_fp8.delayed_reference([1.0, 1.0, 100.0] + [1.0] * 5, 448.0, 4)
    assert np.allclose(got, [1, 448, 448, 4.48, 4.48, 4.48, 4.48, 448], rtol=1e-6)


def test_oracle_freezes_the_scale_while_an_inf_is_in_the_window():
    got = checks_fp8.delayed_reference([1.0, 1.0, math.inf, 1.0, 1.0, 1.0], 57344.0, 3)
    assert got == [1.0, 57344.0, 57344.0, 57344.0, 57344.0, 57344.0]
    assert checks_fp8.delayed_reference([2.0, math.inf, 1.0, 1.0, 1.0], 448.0, 2) == [
        1.0, 224.0, 224.0, 224.0, 448.0]


def test_scales_one_step_early_get_the_delayed_hint(capsys):
    def current(amaxes, fp8_max, history_len):
        return from_the_text([*amaxes, 1.0], fp8_max, history_len)[1:]

    assert checks_fp8.check_delayed_scales(current) is False
    out = capsys.readouterr().out
    assert "amax 2.0 at every step" in out and "one step early" in out
    assert "expected [  1. 224." in out and "got      [224. 224." in out


def test_a_window_one_too_long_is_named_on_the_spike(capsys):
    assert checks_fp8.check_delayed_scales(
        lambda a, m, n: from_the_text(a, m, n, window_len=n + 1)) is False
    out = capsys.readouterr().out
    assert "a spike" in out and "your window holds 5 amaxes" in out


def test_the_newest_amax_only_is_named(capsys):
    assert checks_fp8.check_delayed_scales(
        lambda a, m, n: from_the_text(a, m, n, window_len=1)) is False
    out = capsys.readouterr().out
    assert "a spike" in out and "most_recent" in out


def test_dividing_by_a_zero_amax_is_named(capsys):
    assert checks_fp8.check_delayed_scales(
        lambda a, m, n: from_the_text(a, m, n, keep_on_bad=False)) is False
    out = capsys.readouterr().out
    assert "an all-zero tensor at step 2" in out and "keep the previous scale" in out
    assert "inf]" in out


def test_a_first_scale_other_than_one_is_named(capsys):
    assert checks_fp8.check_delayed_scales(
        lambda a, m, n: [2.0] + from_the_text(a, m, n)[1:]) is False
    assert "its scale is 1" in capsys.readouterr().out


def test_a_list_of_the_wrong_length_is_reported_as_one_scale_per_step(capsys):
    assert checks_fp8.check_delayed_scales(lambda a, m, n: [1.0]) is False
    assert "one scale per step" in capsys.readouterr().out


def test_a_window_that_drops_the_inf_is_caught_and_named(capsys):
    def drops_inf(amaxes, fp8_max, history_len):
        return from_the_text([0.0 if math.isinf(a) else a for a in amaxes], fp8_max,
                             history_len)

    case = [1.0, 1.0, math.inf] + [2.0] * 5
    assert drops_inf(case, 57344.0, 3) != checks_fp8.delayed_reference(case, 57344.0, 3)
    assert checks_fp8.check_delayed_scales(drops_inf) is False
    out = capsys.readouterr().out
    assert "an inf at step 2" in out and "dropped the inf" in out
