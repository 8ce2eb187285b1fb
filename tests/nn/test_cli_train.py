"""``fpsim train`` and ``fpsim compare`` end to end through fpsim's command line."""

from __future__ import annotations

import subprocess
import sys

import pytest

import nn
from fpsim.cli import main
from nn import cli as nn_cli


def test_compare_quick_prints_every_row_and_writes_the_png(tmp_path, capsys):
    assert main(["compare", "--quick", "--epochs", "2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    table = out.splitlines()
    for label, _, _ in nn_cli.RUNS:
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
    (["train", "--epochs", "0"], "--epochs"),
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
    for bad in ("0", "-2", "inf", "x"):
        with pytest.raises(ValueError):
            nn_cli.parse_loss_scale(bad)
