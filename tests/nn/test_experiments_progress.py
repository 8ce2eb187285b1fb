"""Progress per variant (nn.experiments.progress): one tqdm bar per run, counting its training
steps, and the same numbers with the bars as without.

Oracles: the run without bars (identical held-out losses, bit for bit); the step count each
bar reports against the configuration's steps."""

from __future__ import annotations

import re

import pytest

from nn import experiments as ex
from nn.experiments import cnn, progress

TINY_LM = ex.LMConfig(sequence_length=16, batch_size=8, embed_dim=8, ff_dim=16, steps=5)
TINY_CNN = cnn.CNNConfig(filters=(4, 8), steps=5, batch_size=16)


def _bars(text: str) -> dict[str, tuple[int, int]]:
    """label -> (steps done, total) of each bar's last drawing."""
    found = {}
    for label, done, total in re.findall(r"([^\r\n|]+?):\s+\d+%\|[^|]*\|\s*(\d+)/(\d+)", text):
        found[label.strip()] = (int(done), int(total))
    return found


def test_an_lm_experiment_shows_one_bar_per_variant_and_the_same_numbers(capsys):
    quiet = ex.underflow_from_averaging(TINY_LM)
    capsys.readouterr()
    shown = ex.underflow_from_averaging(TINY_LM, progress=True)
    bars = _bars(capsys.readouterr().err)
    assert bars == {r.label: (TINY_LM.steps, TINY_LM.steps) for r in shown.runs}
    assert [r.test_loss for r in shown.runs] == [r.test_loss for r in quiet.runs]


def test_a_cnn_experiment_shows_one_bar_per_variant_and_the_same_numbers(capsys):
    quiet = ex.fp32_accumulation(TINY_CNN, spread_seeds=())
    capsys.readouterr()
    shown = ex.fp32_accumulation(TINY_CNN, spread_seeds=(), progress=True)
    bars = _bars(capsys.readouterr().err)
    assert bars == {r.label: (TINY_CNN.steps, TINY_CNN.steps) for r in shown.runs}
    assert [r.test_loss for r in shown.runs] == [r.test_loss for r in quiet.runs]


def test_without_progress_nothing_is_drawn(capsys):
    ex.underflow_from_averaging(TINY_LM)
    assert _bars(capsys.readouterr().err) == {}


def test_progress_must_be_a_bool():
    with pytest.raises(TypeError, match="progress must be True or False, got 'yes'"):
        ex.bf16_vs_fp16(TINY_LM, progress="yes")  # type: ignore[arg-type]


def test_an_inner_call_without_progress_keeps_the_outer_bars():
    with progress.showing(True):
        with progress.showing(False):
            assert progress.shown()
    assert not progress.shown()
