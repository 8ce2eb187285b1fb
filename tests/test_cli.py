"""The fpsim command line: formats table, explain, round, --help, and one-line errors (exit 2).

Oracles: ml_dtypes.finfo / numpy.finfo for the table, numpy float16 for rounded values,
fpsim.explain for the explain text (the CLI only prints it).
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import fpsim
from fpsim._cli_numbers import parse_number
from fpsim.cli import COMMANDS, build_parser, main
from fpsim.explain import explain


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def finfo(fmt: fpsim.Format):
    if fmt.name in ("float16", "float32"):
        return np.finfo(fmt.name)
    return ml_dtypes.finfo(getattr(ml_dtypes, fmt.name))


@pytest.mark.parametrize(
    "fmt", [f for f in fpsim.CATALOG if f.name != "tf32" and f not in fpsim.P3109_FORMATS],
    ids=lambda f: f.name,
)
def test_formats_row_shows_the_finfo_values_of_each_format(capsys, fmt):
    code, out, _ = run(capsys, "formats")
    assert code == 0
    rows = [ln.split() for ln in out.splitlines() if ln.split()[:1] == [fmt.name]]
    assert len(rows) == 1
    name, bits, e, m, bias, mx, tiny_normal, tiny_sub, eps = rows[0][:9]
    fi = finfo(fmt)
    assert (int(bits), int(e), int(m)) == (fi.bits, fi.nexp, fi.nmant)
    assert float(mx) == pytest.approx(float(fi.max), rel=1e-5)
    assert float(tiny_normal) == pytest.approx(float(fi.smallest_normal), rel=1e-5)
    assert float(tiny_sub) == pytest.approx(float(fi.smallest_subnormal), rel=1e-5)
    assert float(eps) == pytest.approx(float(fi.eps), rel=1e-5)


def test_formats_table_states_the_inf_nan_rules_and_aliases(capsys):
    _, out, _ = run(capsys, "formats")
    assert "no inf; NaN = S.1111.111 only" in out  # e4m3fn
    assert "no inf, no -0; one NaN = 1.0000.000 (the -0 code)" in out  # e4m3fnuz
    assert "inf = S.11111.0000000000, NaN = S.11111.(not 0)" in out  # fp16
    assert "  float16: f16, fp16, half" in out
    assert "tf32" in out


def test_explain_command_prints_fpsim_explain(capsys):
    code, out, err = run(capsys, "explain", "1e-5", "--format", "fp16")
    assert (code, err) == (0, "")
    assert out == explain(1e-5, "fp16") + "\n"


def test_explain_defaults_to_nearest_even(capsys):
    _, out, _ = run(capsys, "explain", "65520", "-f", "fp16")
    assert out.splitlines()[0] == (
        "65520.0 -> float16 (S|EEEEE|MMMMMMMMMM, bias 15), rounding nearest_even"
    )
    assert "result:     inf" in out


@pytest.mark.parametrize("value", ["-1e-5", "-inf", "-0x1p-25", "-65520", "-0.5"])
def test_explain_accepts_negative_numbers_in_every_notation(capsys, value):
    code, out, _ = run(capsys, "explain", value, "-f", "e4m3fn", "-m", "toward_zero")
    expected = float.fromhex(value) if "0x" in value else float(value)
    assert code == 0
    assert out == explain(expected, "e4m3fn", "toward_zero") + "\n"


def test_round_command_prints_each_value_rounded_with_its_bits(capsys):
    values = ["1e-5", "65519.99", "65520", "-0.0", "nan", "0x1p-25", "-3.14159"]
    code, out, _ = run(capsys, "round", *values, "--format", "fp16")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["input", "float16", "bits"]
    with np.errstate(over="ignore"):
        for text, ln in zip(values, lines[1:], strict=True):
            x = float.fromhex(text) if "0x" in text else float(text)
            ref = np.float16(x)  # numpy's float64 -> float16 is correctly rounded
            code16 = f"{int(ref.view(np.uint16)):016b}"
            assert ln.split()[1:] == [repr(float(ref)), code16[0], code16[1:6], code16[6:]]


def test_round_command_follows_mode_and_overflow_options(capsys):
    _, out, _ = run(capsys, "round", "1000", "-f", "e4m3fn", "--overflow", "saturate")
    assert out.splitlines()[1].split()[:2] == ["1000.0", "448.0"]
    _, out, _ = run(capsys, "round", "1.9", "-f", "e2m1fn", "--mode", "toward_zero")
    assert out.splitlines()[1].split()[:2] == ["1.9", "1.5"]
    _, out, _ = run(capsys, "round", "nan", "-f", "e2m1fn")
    assert out.splitlines()[1].split() == ["nan", "nan", "-"]  # no NaN code in e2m1fn


@pytest.mark.parametrize(
    ("argv", "needle"),
    [(["explain", "abc"], "'abc' is not a number"),
     (["explain", "1", "--format", "fp99"], "unknown format 'fp99'; formats: float32"),
     (["explain", "1"], "required: -f/--format"),
     (["round", "1", "--format", "fp16", "--mode", "sideways"], "unknown rounding mode"),
     (["round", "1"], "required: -f/--format"),
     (["round", "--format", "fp16"], "required: VALUE"),
     (["explain", "1", "-f", "fp16", "--overflow", "wrap"], "invalid choice: 'wrap'"),
     (["explain", "1", "-f", "e4m3fn", "--overflow", "inf"], "overflow='inf' needs a format"),
     (["bogus"], "invalid choice: 'bogus'"),
     ([], "choose a command: formats, explain, round, warmup")],
    ids=lambda p: " ".join(p) if isinstance(p, list) else None,
)
def test_bad_input_prints_one_error_line_and_exits_2(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("fpsim") and "error: " in err
    assert needle in err
    assert "Traceback" not in err


@pytest.mark.parametrize("argv", [["--help"], ["formats", "--help"], ["explain", "--help"],
                                  ["round", "--help"]])
def test_help_of_every_command_exits_0(capsys, argv):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 0
    assert capsys.readouterr().out.startswith("usage: fpsim")


def test_parser_has_one_subcommand_per_registered_command():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices)[:len(COMMANDS)] == [c.name for c in COMMANDS]
    assert parser.parse_args(["formats"]).command == "formats"
    assert parser.parse_args(["explain", "1", "-f", "fp16"]).command == "explain"
    assert parser.parse_args(["round", "1", "-f", "fp16"]).command == "round"


def test_cli_module_does_not_import_nn():
    probe = "import sys, fpsim.cli; assert 'nn' not in sys.modules, 'nn imported'"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


SCRIPT = Path(sys.executable).parent / "fpsim"


@pytest.mark.skipif(not SCRIPT.exists(), reason="console script not installed in this venv")
def test_console_script_explains_and_exits_2_with_one_line_on_bad_input():
    ok = subprocess.run([str(SCRIPT), "explain", "1e-5", "--format", "fp16"],
                        capture_output=True, text=True)
    assert ok.returncode == 0
    assert "result:     1.0013580322265625e-05" in ok.stdout
    bad = subprocess.run([str(SCRIPT), "round", "x", "--format", "fp16"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and "'x' is not a number" in bad.stderr


# --- explain and round take the same arguments -----------------------------------------------
def test_explain_and_round_take_the_same_values_format_and_mode_arguments():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))

    def signature(name: str) -> list[tuple]:
        return [(a.dest, tuple(a.option_strings), a.nargs, a.required, a.default)
                for a in sub.choices[name]._actions if a.dest not in ("help", "seed")]

    assert signature("explain") == signature("round")
    assert ("format", ("-f", "--format"), None, True, None) in signature("explain")


def test_explain_explains_each_of_several_values_in_turn(capsys):
    code, out, _ = run(capsys, "explain", "1e-5", "-65520", "-f", "fp16")
    assert code == 0
    assert out == explain(1e-5, "fp16") + "\n\n" + explain(-65520.0, "fp16") + "\n"


# --- numbers are read exactly; a note says when the float64 changes the answer ----------------
@pytest.mark.parametrize(("text", "exact"), [
    ("1e400", Fraction(10) ** 400), ("-1e-400", -Fraction(1, 10**400)), ("0.1", Fraction(1, 10)),
    ("0x1.8p1", Fraction(3)), ("-0x1p-2000", -Fraction(1, 2**2000)), ("65520", Fraction(65520)),
    ("1_000.5", Fraction(2001, 2)),
])
def test_numbers_are_read_exactly_and_converted_to_the_nearest_float64(text, exact):
    number = parse_number(text)
    assert number.exact == exact
    try:
        nearest = float(exact)  # Python's int / int division is correctly rounded
    except OverflowError:
        nearest = math.inf if exact > 0 else -math.inf
    assert number.value == nearest


def test_negative_zero_inf_and_nan_keep_their_meaning():
    assert math.copysign(1, parse_number("-0.0").value) == -1
    assert parse_number("-inf").value == -math.inf and parse_number("-inf").exact is None
    assert math.isnan(parse_number("nan").value)


def test_a_decimal_beyond_float64_is_explained_as_inf_with_a_note(capsys):
    code, out, err = run(capsys, "explain", "1e400", "--format", "fp16")
    assert code == 0 and out == explain(math.inf, "fp16") + "\n"
    assert err == "note: 1e400 is not a float64; it is beyond float64's range and became inf\n"


def test_a_decimal_below_float64s_subnormals_gets_a_note_in_round_too(capsys):
    code, out, err = run(capsys, "round", "1e-400", "-f", "fp16", "-m", "up")
    assert code == 0 and out.splitlines()[1].split()[:2] == ["0.0", "0.0"]
    assert err.startswith("note: 1e-400 is not a float64; it is below float64's smallest")


@pytest.mark.parametrize("command", ["explain", "round"])
@pytest.mark.parametrize("text", ["0.1", "1e-5", "65519.99", "3.14159"])
def test_no_note_when_the_float64_neighbours_round_alike(capsys, command, text):
    code, _, err = run(capsys, command, text, "-f", "fp16")
    assert (code, err) == (0, "")


@pytest.mark.parametrize("command", ["explain", "round"])
def test_a_decimal_just_above_an_fp16_tie_gets_a_note_that_its_rounding_may_differ(
        capsys, command):
    # 1 + 2^-11 is the tie between 1 and 1 + 2^-10 in fp16; the decimal below lies 1e-29 above
    # it, so exactly it rounds up to 1 + 2^-10, while its float64 (the tie itself) rounds to 1
    text = "1.00048828125000000000000000001"
    assert Fraction(text) > 1 + Fraction(1, 2**11) and float(text) == 1 + 2**-11
    code, _, err = run(capsys, command, text, "-f", "fp16")
    assert code == 0 and err.count("\n") == 1
    assert err.startswith(f"note: {text} is not a float64; fpsim rounds its nearest float64, "
                          "1.00048828125")
    assert "(1.0, 1.0009765625)" in err


# --- names: the closest ones are suggested --------------------------------------------------
@pytest.mark.parametrize(("argv", "suggestion"), [
    (["round", "1", "-f", "fp8_e4m3f"], "fp8_e4m3fn"),
    (["round", "1", "-f", "bfloat61"], "bfloat16"),
    (["explain", "1", "-f", "fp16", "-m", "nearst_even"], "nearest_even"),
    (["explain", "1", "-f", "fp16", "-m", "towards_zero"], "toward_zero"),
])
def test_an_unknown_format_or_mode_suggests_the_closest_names(capsys, argv, suggestion):
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "did you mean" in err and suggestion in err.split("did you mean", 1)[1]


@pytest.mark.parametrize(("text", "shown", "note"), [
    ("1e999999999", "inf", "beyond float64's range"),
    ("-1e-999999999", "-0.0", "below float64's smallest subnormal"),
    ("0x1p999999999", "inf", "beyond float64's range"),
])
def test_a_number_with_a_huge_exponent_is_read_at_once_with_its_note(capsys, text, shown, note):
    # (building 10^999999999 exactly took minutes: the command hung)
    import time

    start = time.perf_counter()
    code, out, err = run(capsys, "round", text, "-f", "fp16")
    assert code == 0 and out.splitlines()[1].split()[:2] == [shown, shown]
    assert note in err and time.perf_counter() - start < 10


def test_round_scalar_refuses_a_decimal_exponent_it_cannot_build_naming_x():
    from fpsim.rounding import MAX_DECIMAL_EXPONENT

    with pytest.raises(ValueError, match=r"x = '1E\+999999999' has a decimal exponent beyond"):
        fpsim.round_scalar("1e999999999", "fp16")
    assert fpsim.round_scalar(f"1e{MAX_DECIMAL_EXPONENT}", "fp16") == np.inf  # the limit works
