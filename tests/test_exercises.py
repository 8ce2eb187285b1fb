"""The classroom exercises: solutions pass every check, stubs fail every check without crashing,
and the checker module itself gives the right verdict with specific feedback."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import re
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))  # tests/notebooks.py, when run alone

from notebooks import cell_outputs_text, run_notebook  # noqa: E402

import fpsim  # noqa: E402

# This module's notebook tests start Jupyter kernels: one pytest-xdist worker runs the module
# (pytest -n auto --dist loadgroup), so two kernels never start at once and race for ports.
pytestmark = pytest.mark.xdist_group("jupyter")

EXERCISES = pathlib.Path(__file__).resolve().parent.parent / "tutorials" / "exercises"
STUBS = sorted(EXERCISES.glob("*.ipynb"))
SOLUTIONS = sorted((EXERCISES / "solutions").glob("*.ipynb"))
CHECK_CALL = re.compile(r"^(check_\w+)\(", re.M)


def _load_checks():
    spec = importlib.util.spec_from_file_location("exercise_checks", EXERCISES / "checks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


checks = _load_checks()


def _check_calls(path: pathlib.Path) -> list[str]:
    """The names of the checks a notebook calls, in order."""
    cells = json.loads(path.read_text())["cells"]
    source = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    return CHECK_CALL.findall(source)


# --- the notebooks ------------------------------------------------------------------------------
def test_there_are_at_least_five_exercises_each_with_a_solution():
    assert len(STUBS) >= 5
    assert [p.name for p in STUBS] == [p.name for p in SOLUTIONS]


@pytest.mark.parametrize("path", STUBS + SOLUTIONS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_notebooks_are_stored_without_outputs(path):
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_solution_notebook_passes_every_check(path):
    calls = _check_calls(path)
    assert calls, f"{path.name} calls no check"
    text = cell_outputs_text(run_notebook(path))
    for name in calls:
        assert f"{checks.PASS} {name}:" in text, f"{name} did not pass in {path.name}:\n{text}"
    assert checks.FAIL not in text


@pytest.mark.parametrize("path", STUBS, ids=lambda p: p.name)
def test_stub_notebook_runs_and_every_check_reports_failure(path):
    calls = _check_calls(path)
    assert calls, f"{path.name} calls no check"
    text = cell_outputs_text(run_notebook(path))  # raises if a cell crashes
    for name in calls:
        assert f"{checks.FAIL} {name}:" in text, f"{name} did not report failure:\n{text}"
    assert checks.PASS not in text


# --- checks.py: correct answers pass ---------------------------------------------------------
def _as_float32(x):
    """The float32 behind the check's bits-only x (a test may use floats; students may not)."""
    return np.uint32(x.view(np.uint32)).view(np.float32)


def _fp16_bits_reference(x):
    with np.errstate(invalid="ignore"):  # widening a signalling NaN input flags invalid
        return int(fpsim.to_bits(fpsim.round(_as_float32(x), "fp16"), "fp16"))


def test_check_fp16_bits_passes_fpsims_own_codes(capsys):
    assert checks.check_fp16_bits(_fp16_bits_reference) is True
    assert capsys.readouterr().out.startswith(f"{checks.PASS} check_fp16_bits:")


def test_check_largest_safe_square_passes_the_known_fp16_and_e4m3fn_answers(capsys):
    answers = {"float16": 255.875, "float8_e4m3fn": 20.0, "float8_e4m3b11fnuz": 5.5}
    # independent: 256^2 = 65536 > 65520; 22^2 = 484 > 464; 6^2 = 36 > 31 = 30 + 2/2
    for fmt, x in answers.items():
        assert checks.largest_safe_square(fmt) == x
    assert checks.check_largest_safe_square(checks.largest_safe_square) is True


def test_check_underflows_passes_the_threshold_rule():
    def rule(g, scale):
        v = np.abs(np.asarray(g, np.float64) * scale)
        return (v <= 2.0**-25) & (v > 0)

    assert checks.check_underflows(rule) is True


def test_check_update_scale_passes_keras_rule_written_out():
    def rule(scale, counter, finite, growth_interval=2000):
        if not finite:
            return max(scale / 2, 1.0), 0
        if counter + 1 < growth_interval:
            return scale, counter + 1
        grown = scale * 2
        return (grown if grown < 2.0**128 else scale), 0  # float32's max is below 2^128

    assert checks.check_update_scale(rule) is True


def test_check_choose_scale_and_zero_share_pass_the_bin_arithmetic():
    assert checks.check_choose_scale(lambda e, c: 14 - int(e[c > 0].max())) is True
    assert checks.check_zero_share(lambda e, c, k: c[e + k <= -26].sum() / c.sum()) is True


# --- checks.py: wrong answers get feedback naming the failing input --------------------------
def test_ties_away_from_zero_fails_on_a_named_tie(capsys):
    def ties_away(x):
        with np.errstate(invalid="ignore"):  # a signalling NaN input flags invalid
            return int(fpsim.to_bits(fpsim.round(_as_float32(x), "fp16", mode="nearest_away"),
                                     "fp16"))

    assert checks.check_fp16_bits(ties_away) is False
    out = capsys.readouterr().out
    assert out.startswith(f"{checks.FAIL} check_fp16_bits:")
    assert "x = 1.00048828125" in out and "expected 0x3C00" in out and "got      0x3C01" in out
    assert "tie" in out


def test_overflow_at_max_instead_of_the_threshold_is_named(capsys):
    assert checks.check_largest_safe_square(lambda fmt: 256.0) is False
    out = capsys.readouterr().out
    assert "format 'float16'" in out and "expected 255.875" in out and "got      256.0" in out


def test_a_strict_threshold_misses_the_tie_at_two_to_the_minus_25(capsys):
    assert checks.check_underflows(lambda g, s: (np.abs(g * s) < 2.0**-25) & (g != 0)) is False
    out = capsys.readouterr().out
    assert "g = 2.9802322387695312e-08 with scale 2^0" in out
    assert "expected True" in out and "got      False" in out


def test_a_scale_without_the_floor_of_one_fails_on_the_named_step(capsys):
    def no_floor(scale, counter, finite, growth_interval=2000):
        if not finite:
            return scale / 2, 0
        return (scale * 2, 0) if counter + 1 == growth_interval else (scale, counter + 1)

    assert checks.check_update_scale(no_floor) is False
    out = capsys.readouterr().out
    assert "update_scale(1, 0, finite=False, 3)" in out
    assert "expected (1.0, 0)" in out and "got      (0.5, 0)" in out and "below 1" in out


def test_one_binade_too_many_is_reported_with_the_histogram(capsys):
    assert checks.check_choose_scale(lambda e, c: 15 - int(e[c > 0].max())) is False
    out = capsys.readouterr().out
    assert "histogram 'narrow, low'" in out
    assert "expected k = 35" in out and "got      k = 36" in out


def test_a_percentage_instead_of_a_share_is_reported(capsys):
    assert checks.check_zero_share(lambda e, c, k: 100 * c[e + k <= -26].sum() / c.sum()) is False
    out = capsys.readouterr().out
    assert "with k = 0" in out and "not a percentage" in out


def _every_checker() -> list[tuple[str, str]]:
    """(module, check name) for every checker module of the exercises."""
    sys.path.insert(0, str(EXERCISES))
    found = []
    for path in sorted(EXERCISES.glob("checks*.py")):
        module = importlib.import_module(path.stem)
        found += [(path.stem, name) for name in module.all_checks()]
    return found


@pytest.mark.parametrize(("module", "name"), _every_checker())
def test_a_raising_or_malformed_answer_is_reported_not_raised(module, name, capsys):
    check = getattr(importlib.import_module(module), name)

    def stub(*args):
        raise NotImplementedError("your code here")

    assert check(stub) is False
    assert "NotImplementedError" in capsys.readouterr().out
    assert check(lambda *args: "nonsense") is False
    assert capsys.readouterr().out.startswith(f"{checks.FAIL} {name}:")


# --- exercises 01 and 02: the blind spots closed ------------------------------------------------
def test_float_arithmetic_on_x_is_reported_as_breaking_the_integer_only_rule(capsys):
    def with_floats(x):
        return int(np.float16(x).view(np.uint16))  # np.float16(x) needs float(x): refused

    assert checks.check_fp16_bits(with_floats) is False
    out = capsys.readouterr().out
    assert "raised an exception" in out and "integer operations only" in out


def test_a_missing_sign_bit_gets_a_sign_hint_not_a_rounding_hint(capsys):
    def unsigned(x):
        return _fp16_bits_reference(x) & 0x7FFF

    assert checks.check_fp16_bits(unsigned) is False
    out = capsys.readouterr().out
    assert "x = -2.0" in out and "expected 0xC000" in out and "got      0x4000" in out
    assert "only the sign bit is wrong" in out
    assert "exactly halfway" not in out and "round up when" not in out  # no rounding hint


def test_round_down_of_sqrt_max_fails_on_e4m3b11fnuz_with_the_threshold_hint(capsys):
    def naive(fmt):
        f = fpsim.get_format(fmt)
        return float(fpsim.round(np.sqrt(f.max), f, mode="down"))

    assert checks.check_largest_safe_square(naive) is False
    out = capsys.readouterr().out
    assert "1 of 5 inputs differ" in out and "format 'float8_e4m3b11fnuz'" in out
    assert "expected 5.5" in out and "got      5.0" in out
    assert "round_down(sqrt(max))" in out and "max + ulp(max)/2 = 31" in out


# --- exercise 01's blind spots: NaN inputs, and an exponent off by one -------------------------
def test_the_cases_hold_nans_whose_only_bits_fp16_would_drop():
    cases = checks.fp16_bits_cases()
    bits = cases.view(np.uint32)
    assert {0x7FC00000, 0xFFC00000, 0x7F800001} <= set(bits[np.isnan(cases)].tolist())
    assert (np.uint32(0x7F800001) & 0x7FFFFF) >> 13 == 0  # cut to 10 bits it reads as inf


def test_a_nan_that_becomes_inf_is_named_with_the_nan_hint(capsys):
    def truncating_nan(x):
        b = int(x.view(np.uint32))
        if (b >> 23) & 0xFF == 0xFF:  # inf or NaN: keep the top 10 mantissa bits, no more
            return (b >> 16) & 0x8000 | 0x7C00 | (b & 0x7FFFFF) >> 13
        return _fp16_bits_reference(x)

    assert checks.check_fp16_bits(truncating_nan) is False
    out = capsys.readouterr().out
    assert "0x7F800001" in out and "a NaN code" in out and "got      0x7C00 (inf)" in out
    assert "a NaN must stay NaN" in out


def test_any_nan_code_is_accepted_for_a_nan_input(capsys):
    def payload_nan(x):
        b = int(x.view(np.uint32))
        if (b >> 23) & 0xFF == 0xFF and b & 0x7FFFFF:
            return (b >> 16) & 0x8000 | 0x7C01  # a NaN code other than fpsim's
        return _fp16_bits_reference(x)

    assert checks.check_fp16_bits(payload_nan) is True
    capsys.readouterr()


def test_an_exponent_field_one_too_large_gets_the_twice_hint(capsys):
    def bias_off_by_one(x):
        code = _fp16_bits_reference(x)
        field = (code >> 10) & 0x1F
        return code + 0x400 if 0 < field < 0x1E else code  # 2^(e - 14): twice the value

    assert checks.check_fp16_bits(bias_off_by_one) is False
    out = capsys.readouterr().out
    assert "x = 1.0" in out and "got      0x4000 (2.0)" in out
    assert "exactly twice the right one" in out and "- 127 + 15" in out
