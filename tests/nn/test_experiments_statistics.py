"""Experiment 3 (nn.experiments.statistics) at CI size: the CNN fed 0-255 pixels, its
BatchNormalization statistics in fp16 against fp32, and the knob turned off (pixels / 255).

Oracles: the fp32-statistics run of the same model (same weights and batches); two independent
observations of the failure (fpsim.monitor's overflow events, the moving variance turning inf);
numpy's float16 arithmetic for the overflow share; scikit-learn's raw digit counts."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

from nn import experiments as ex
from nn.cli import experiment_table
from nn.experiments import cnn, statistics

# fewer filters and a larger learning rate: the kernel grows past the limit within 60 steps
CI = cnn.CNNConfig(filters=(8, 16), steps=60, learning_rate=0.2)


@pytest.fixture(scope="module")
def result():
    return ex.fp32_statistics(CI)


def test_fp16_batch_norm_statistics_overflow_by_themselves_and_the_network_is_lost(result):
    fp32, fp16, _ = result.runs
    x = result.extra
    assert x["first_overflow_step"] is not None and x["first_overflow_site"].startswith("bn1/")
    assert x["dead_channels"][0] == CI.filters[0] and x["all_dead_step"] is not None
    assert fp16.test_accuracy < 0.2  # chance is 0.1: the stem passes nothing
    assert fp32.test_accuracy > fp16.test_accuracy + 0.2


def test_the_first_forward_overflow_is_the_step_whose_channel_dies(result):
    # the monitor's first overflow and the first moving variance that turned inf: the same step
    assert result.extra["first_dead_step"] == result.extra["first_overflow_step"]


def test_fp32_statistics_hold_the_same_large_deviations_and_stay_finite(result):
    fp32 = result.runs[0]
    label = fp32.label
    assert result.extra["largest_deviation"][label] > statistics.FP16_SQUARE_LIMIT
    assert result.extra["overflow_share"][label] > 0  # in fp16 these squares would be inf
    assert result.extra["skipped"][label] == [] and math.isfinite(fp32.test_loss)


def test_pixels_divided_by_255_never_overflow_fp16_statistics(result):
    scaled = result.run(statistics.SCALED)
    assert result.extra["scaled_dead_channels"] == [0, 0]
    assert result.extra["largest_deviation"][scaled.label] < statistics.FP16_SQUARE_LIMIT / 10
    assert result.extra["overflow_share"][scaled.label] == 0.0


def test_findings_name_the_step_the_site_and_the_accuracy_gap(result):
    lines = ex.findings(result)
    assert f"first overflow at step {result.extra['first_overflow_step']}" in lines[0]
    assert result.extra["first_overflow_site"] in lines[0]
    assert any("held-out accuracy" in line for line in lines)
    table = experiment_table(result)
    assert "test acc" in table.splitlines()[0]
    assert f"{result.runs[1].test_accuracy:.1%}" in table


def test_squares_overflow_share_equals_numpy_float16_arithmetic():
    d = np.random.default_rng(0).standard_normal(10_000) * 200.0
    d[:4] = [255.9, 256.0, -256.1, 300.0]  # at and around the limit
    h = d.astype(np.float16)
    with np.errstate(over="ignore"):
        expected = float(np.mean(np.isinf(h * h)))  # fp16 x fp16, rounded to fp16
    assert statistics.squares_overflow_share(d) == expected
    assert expected > 0


def test_pixels_are_the_digit_counts_as_8_bit_values():
    (x, y), (x_test, _) = cnn.pixel_data(255, 100)
    assert x.shape == (100, 8, 8, 1) and y.shape == (100,) and x_test.shape[1:] == (8, 8, 1)
    assert x.max() == 255 and x.min() == 0 and np.all(x == np.round(x))
    counts = x / 255 * 16  # back to scikit-learn's 0-16 counts: integers again
    np.testing.assert_allclose(counts, np.round(counts), atol=0.5 * 16 / 255)
    (x1, _), _ = cnn.pixel_data(1, 100)
    assert x1.max() == 1.0


def test_the_step_probe_records_every_step_and_the_run_is_repeatable():
    config = CI.with_(steps=3)
    run, probe = cnn.train_cnn("a", config, "mixed_float16", watch=True)
    again, _ = cnn.train_cnn("b", config, "mixed_float16")
    assert len(probe.dead) == len(probe.overflows) == 3
    assert run.history.step_loss == again.history.step_loss  # same weights, same batches
    assert probe.first_overflow() is None


def test_the_cnn_keeps_fp32_variables_when_its_statistics_are_fp16():
    model = cnn.build_cnn(CI, "mixed_float16", stats_dtype="float16")
    norms = cnn.batch_norms(model)
    assert [b.name for b in norms] == ["bn1", "bn2"]
    assert all(b.stats_format.name == "float16" for b in norms)
    assert all(v.fmt.name == "float32" for v in model.weights)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("FPSIM_FULL_EXPERIMENTS"),
                    reason="full-size experiments: set FPSIM_FULL_EXPERIMENTS=1")
def test_full_size_fp16_batch_norm_statistics_lose_the_network_fp32_trains():
    result = ex.fp32_statistics()
    fp32, fp16, scaled = result.runs
    assert fp16.test_accuracy < 0.2 < 0.9 < fp32.test_accuracy
    assert result.extra["dead_channels"][0] == 16 and scaled.test_accuracy > 0.5


def test_compare_statistics_prints_the_pixel_knob_the_accuracy_and_writes_the_png(tmp_path,
                                                                                   capsys):
    from fpsim.cli import main

    assert main(["compare", "--experiment", "statistics", "--steps", "3", "--seeds", "2",
                 "--processes", "1", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    knob = next(ln for ln in lines if ln.startswith("seed 0 in detail; knob: "))
    assert "pixels 0-255, not divided by 255" in knob
    header = [ln for ln in lines if ln.startswith("run ")][1]
    assert "test acc" in header
    assert sum(ln.startswith(statistics.SCALED) for ln in lines) == 2  # seeds, run table
    assert any("no forward overflow in 3 steps" in ln for ln in lines)  # too short to fail
    assert (tmp_path / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_backward_sites_are_told_from_forward_ones_by_nn_sites_names():
    from nn.engine import sites

    backward = [sites.scoped(sites.scoped("bn1", sites.GRAD), "Mul"), sites.activation_grad("bn1"),
                sites.weight_grad("conv1/kernel"), sites.variable_grad("conv1/kernel"),
                sites.op_input_grad("Mul", 0)]
    assert all(statistics.is_backward(site) for site in backward)
    assert not any(statistics.is_backward(site) for site in ("bn1/Mul", "conv1/Conv2D", "Add"))
