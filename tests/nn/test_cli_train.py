"""``fpsim train`` and ``fpsim compare`` end to end through fpsim's command line."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import pytest

import nn
from fpsim.cli import build_parser, main
from nn import cli as nn_cli
from nn import experiments


def test_compare_quick_prints_every_row_and_writes_the_png(tmp_path, capsys):
    assert main(["compare", "--experiment", "digits", "--quick", "--epochs", "2", "--out",
                 str(tmp_path)]) == 0
    out = capsys.readouterr().out
    table = out.splitlines()
    for label, _, _ in experiments.RUNS:
        assert sum(line.startswith(label) for line in table) == 1, label
    for column in ("test acc", "skipped", "final scale", "act. grads -> 0", "swamped", "time"):
        assert column in out
    png = tmp_path / "compare.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 20_000


def test_train_runs_saves_and_the_checkpoint_loads(tmp_path, capsys):
    path = tmp_path / "model.npz"
    code = main(["train", "--policy", "mixed_float16", "--epochs", "1", "--batch-size", "128",
                 "--optimizer", "adam", "--seed", "1", "--save", str(path), "--quiet"])
    assert code == 0
    out = capsys.readouterr().out
    assert "test accuracy" in out and "loss scale 32768" in out
    model = nn.load_model(path)
    assert model.epochs_trained == 1
    assert isinstance(model.loss_scale_optimizer, nn.LossScaleOptimizer)


@pytest.mark.parametrize("scale,shown", [("none", "loss scale none"), ("256", "loss scale 256")])
def test_train_honours_loss_scale(scale, shown, capsys):
    assert main(["train", "--policy", "mixed_float16", "--epochs", "1", "--batch-size", "256",
                 "--loss-scale", scale, "--quiet"]) == 0
    assert shown in capsys.readouterr().out


@pytest.mark.parametrize("argv,message", [
    (["train", "--loss-scale", "often"], "--loss-scale"),
    (["train", "--policy", "float17"], "unknown policy"),
    (["train", "--epochs", "0"], "argument --epochs: must be a whole number >= 1, got '0'"),
    (["train", "--batch-size", "0"], "argument --batch-size: must be a whole number >= 1, got '0'"),
    (["train", "--optimizer", "lbfgs"], "invalid choice"),
])
def test_bad_train_arguments_exit_2_with_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_importing_fpsim_cli_does_not_import_nn():
    code = "import sys, fpsim.cli; print('nn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


def test_parse_loss_scale():
    assert nn_cli.parse_loss_scale("Dynamic") == "dynamic"
    assert nn_cli.parse_loss_scale("none") == "none"
    assert nn_cli.parse_loss_scale("1024") == 1024.0
    assert nn_cli.parse_loss_scale("0x1p-126") == 2.0**-126
    for bad in ("0", "-2", "inf", "x", "1e-40", "3.5e38"):
        with pytest.raises(ValueError):
            nn_cli.parse_loss_scale(bad)


# --- bad input fails at once, in one line that names the option and the value ----------------
def _one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "Traceback" not in captured.err
    return captured.err


@pytest.mark.parametrize("option", ["--epochs", "--batch-size"])
@pytest.mark.parametrize("value", ["0", "-3", "2.5", "many"])
def test_train_epochs_and_batch_size_each_name_the_option_and_the_value(option, value, capsys):
    assert main(["train", option, value]) == 2
    err = _one_line_error(capsys)
    assert f"argument {option}: must be a whole number >= 1, got '{value}'" in err


@pytest.mark.parametrize("value", ["1e39", "1e-40", "1e-50", "0", "nan", "-inf"])
def test_a_bad_loss_scale_names_the_option_the_user_wrote(value, capsys):
    assert main(["train", "--loss-scale", value]) == 2
    err = _one_line_error(capsys)
    assert "argument --loss-scale:" in err and repr(value) in err
    assert "initial_scale" not in err


def test_compare_with_an_unwritable_out_exits_2_before_training(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    start = time.perf_counter()
    assert main(["compare", "--epochs", "1", "--out", str(blocker / "sub")]) == 2
    assert time.perf_counter() - start < 5  # the check comes before the data and the runs
    err = _one_line_error(capsys)
    assert "fpsim compare: error: --out: cannot write" in err and "a_file" in err


@pytest.mark.parametrize("target", ["a_file/model.npz", "."])
def test_train_with_an_unwritable_save_exits_2_before_training(tmp_path, target, capsys):
    (tmp_path / "a_file").write_text("not a directory")
    start = time.perf_counter()
    assert main(["train", "--epochs", "1", "--save", str(tmp_path / target)]) == 2
    assert time.perf_counter() - start < 5
    assert "fpsim train: error: --save" in _one_line_error(capsys)


def test_an_unknown_policy_suggests_nothing_wrong_and_exits_2(capsys):
    assert main(["train", "--policy", "mixed_float61"]) == 2
    assert "mixed_float61" in _one_line_error(capsys)


@pytest.mark.parametrize("command", ["train", "compare"])
def test_every_option_of_train_and_compare_has_help_text_and_shows_its_default(command):
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    p = sub.choices[command]
    options = [a for a in p._actions if not isinstance(a, argparse._HelpAction)]
    assert options
    for action in options:
        assert action.help and action.help != argparse.SUPPRESS, action.dest
    text = " ".join(p.format_help().split())
    assert text.count("(default: ") == len(options)
    for action in options:
        assert action.option_strings[-1] in text


def test_compare_prints_the_warm_up_time_on_its_own_line_before_the_table(tmp_path, capsys):
    assert main(["compare", "--experiment", "digits", "--epochs", "1", "--out",
                 str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    warm = [i for i, ln in enumerate(lines) if ln.startswith("one-time compilation")]
    header = [i for i, ln in enumerate(lines) if ln.startswith("run ")]
    assert len(warm) == 1 and len(header) == 1 and warm[0] < header[0]
    assert lines[warm[0]].endswith(" s") and "not in the times below" in lines[warm[0]]


def test_compare_experiment_prints_its_knob_table_and_findings_and_writes_the_png(tmp_path,
                                                                                  capsys):
    assert main(["compare", "--experiment", "adam-state", "--steps", "3", "--seeds", "2",
                 "--processes", "1", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("experiment adam-state: ")
    assert lines[1] == "technique: fp32 optimizer state"
    assert any(ln.startswith("seed 0 in detail; knob: ") for ln in lines)
    warm = [i for i, ln in enumerate(lines) if ln.startswith("one-time compilation")]
    header = [i for i, ln in enumerate(lines) if ln.startswith("run ")]
    assert len(warm) == 1 and len(header) == 2 and warm[0] < header[0]
    assert "mean held-out loss" in lines[header[0]] and "seed 1" in lines[header[0]]
    for column in ("test loss", "gap", "act. grads -> 0", "subnormal", "swamped", "NaN at step"):
        assert column in lines[header[1]]
    progress = [ln for ln in lines if ln.startswith("  seed ")]
    assert len(progress) == 2  # one line per seed as it finishes
    claims = [ln for ln in lines if ln.startswith("claim: ")]
    assert claims == ["claim: Adam, fp16 slots ends with a higher held-out loss than Adam, fp32 "
                      "slots: SHOWN (the variant diverged from all 2 seeds, the reference from "
                      "none)"]
    assert any("first non-finite loss at step 1" in ln for ln in lines)
    png = tmp_path / "compare.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_digits_labels_its_loss_weight_a_teaching_device(tmp_path, capsys):
    assert main(["compare", "--experiment", "digits", "--epochs", "1", "--out",
                 str(tmp_path)]) == 0
    assert "teaching device: the loss is multiplied by 2^-18" in capsys.readouterr().out


def test_compare_default_experiment_is_the_documented_one():
    args = build_parser().parse_args(["compare"])
    assert args.experiment == experiments.DEFAULT_EXPERIMENT
    assert experiments.DEFAULT_EXPERIMENT in experiments.EXPERIMENTS


def test_compare_with_an_unknown_experiment_exits_2_naming_the_choices(capsys):
    assert main(["compare", "--experiment", "fp7"]) == 2
    err = _one_line_error(capsys)
    assert "--experiment" in err and "'fp7'" in err and "underflow" in err


def test_compare_whose_picture_cannot_be_written_keeps_the_old_one_and_exits_1(tmp_path,
                                                                             monkeypatch,
                                                                             capsys):
    """A full disk while ``fpsim compare --out DIR`` writes compare.png: exit 1, one line on
    stderr, and the previous DIR/compare.png byte for byte as it was (it used to be truncated)."""
    import errno

    import fpsim.atomic
    from fpsim.cli import main

    out = tmp_path / "out"
    out.mkdir()
    (out / "compare.png").write_bytes(b"the previous picture")

    def full_disk(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fpsim.atomic.os, "replace", full_disk)
    argv = ["compare", "--experiment", "adam-state", "--seeds", "1", "--steps", "3",
            "--processes", "1", "--out", str(out)]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "compare.png" in err[0] and "No space left" in err[0], err
    assert (out / "compare.png").read_bytes() == b"the previous picture"
    assert sorted(p.name for p in out.iterdir()) == ["compare.png"]
