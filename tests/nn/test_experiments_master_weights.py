"""Experiment 2 (nn.experiments.masters) at CI size: the CNN trained with Adam at lr
3e-4 with fp32 master weights against pure fp16 weights (same weights, same batches, fp32
BatchNormalization statistics in both).

Oracles: numpy's float16 (a step added to an fp16 weight and rounded by numpy's direct
float64 -> float16 conversion); the fp32-master run of the same model; the optimizer's own
count of unchanged weights."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import nn
from nn import experiments as ex
from nn.experiments import cnn, masters

CI = cnn.CNNConfig(filters=(4, 8), batch_size=32, steps=40, optimizer="adam",
                   learning_rate=3e-4)  # for what needs no training worth the name
# the full-size model at half the steps (about a second a run): the gap grows with training
# (100 steps +0.006, 150 +0.015, 300 +0.058 nats from seed 0)
CI_RUN = masters.MASTER_DEFAULT.with_(steps=150)


@pytest.mark.parametrize("step", [3e-4, 1e-4, 1e-3, 2.0**-12])
def test_a_step_is_lost_in_fp16_exactly_from_the_swamp_threshold_up(step):
    w = masters.swamp_threshold(step)
    for m in (1, 1.5, 2, 7.9):  # fp16 weights at and above the threshold: a step up is lost
        weight = float(np.float16(m * w))
        assert np.float16(weight + step) == weight
    below = w / 2 * (1 + 2.0**-10)  # a binade below (odd last bit: a tie would move it too)
    assert float(np.float16(below)) == below and np.float16(below + step) != below  # kept


def test_adam_s_3e_4_step_cannot_lift_a_gamma_of_one_in_fp16():
    assert masters.swamp_threshold(3e-4) == 1.0
    assert np.float16(1.0 + 3e-4) == 1.0 and np.float16(1.0 - 3e-4) < 1.0  # down only


def test_the_cnn_config_builds_adam_or_sgd_and_names_the_optimizer():
    opt = CI.make_optimizer()
    assert isinstance(opt, nn.Adam) and opt.learning_rate == 3e-4
    assert "Adam lr 0.0003" in CI.describe()
    assert isinstance(CI.with_(optimizer="sgd").make_optimizer(), nn.SGD)
    with pytest.raises(ValueError, match="optimizer must be 'sgd' or 'adam', got 'rmsprop'"):
        CI.with_(optimizer="rmsprop").make_optimizer()


@pytest.fixture(scope="module")
def result():
    return ex.master_weights(CI_RUN, spread_seeds=(1,))


def test_pure_float16_weights_lose_far_more_updates_than_fp32_masters(result):
    shares = result.extra["swamped_share"]
    pure, mixed = shares[masters.PURE], shares[masters.MIXED]
    assert pure > 0.05 and pure > 100 * mixed
    top = result.extra["swamped_by_variable"][masters.PURE]
    assert any(name.endswith("gamma") for name in top)  # the gammas start at 1.0


def test_pure_float16_trains_worse_from_every_seed(result):
    mixed, pure = result.runs
    assert math.isfinite(pure.test_loss) and math.isfinite(mixed.test_loss)
    assert result.gap(pure.label, mixed.label) > 0 and result.extra["spread"][1] > 0
    assert pure.final_loss > mixed.final_loss  # in training too, not only held out


def test_only_the_weights_format_differs_between_the_runs():
    pure = cnn.build_cnn(CI, "float16", stats_dtype="float32")
    mixed = cnn.build_cnn(CI, "mixed_float16")
    assert all(v.fmt.name == "float16" for v in pure.trainable_variables)
    assert all(v.fmt.name == "float32" for v in mixed.trainable_variables)
    assert all(b.stats_format.name == "float32" for b in cnn.batch_norms(pure))
    for a, b in zip(pure.get_weights(), mixed.get_weights(), strict=True):  # same draw
        np.testing.assert_array_equal(a, b.astype(np.float16).astype(np.float32))


def test_findings_give_the_shares_the_gap_and_every_seed(result):
    lines = ex.findings(result)
    assert lines[0].startswith(masters.MIXED) and "swamped" in lines[0]
    assert any(line.startswith("most swamped in pure float16:") for line in lines)
    assert any("seed 1" in line for line in lines)
    assert "gammas start at 1" in result.knob and "Adam lr 0.0003" in result.knob


def test_the_language_model_version_stays_available_as_master_weights_lm_and_keeps_its_name():
    assert ex.EXPERIMENTS["master-weights-lm"].run is ex.master_weights_lm
    assert ex.EXPERIMENTS["master-weights"].technique == "fp32 master weights"
    assert ex.default_config("master-weights").optimizer == "adam"


def test_compare_master_weights_prints_the_learning_rate_knob_and_writes_the_png(
        tmp_path, capsys, monkeypatch):
    import dataclasses

    from fpsim.cli import main

    # the CLI's experiment, made small (in this process: one process for the seeds)
    monkeypatch.setitem(ex.EXPERIMENTS, "master-weights",
                        dataclasses.replace(ex.EXPERIMENTS["master-weights"], config=CI))
    assert main(["compare", "--experiment", "master-weights", "--steps", "2", "--seeds", "2",
                 "--processes", "1", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert next(ln for ln in lines if ln.startswith("seed 0 in detail; knob: ")).startswith(
        "seed 0 in detail; knob: the learning rate: Adam lr 0.0003")
    assert sum(ln.startswith(masters.PURE) for ln in lines) == 3  # seeds, run table, finding
    assert (tmp_path / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("FPSIM_FULL_EXPERIMENTS"),
                    reason="full-size experiments: set FPSIM_FULL_EXPERIMENTS=1")
def test_full_size_pure_float16_weights_swamp_updates():
    # whether the loss shows it is a verdict across seeds: docs/results/experiments.json
    r = ex.master_weights(spread_seeds=())
    assert r.extra["swamped_share"][masters.PURE] > 0.05
