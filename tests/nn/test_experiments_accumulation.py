"""Experiment 4 (nn.experiments.accumulation) at CI size: the CNN's convolutions accumulating
in fp16 against fp32, the kernel-gradient sums replayed addition by addition, and the rule
that a loss gap counts only when every seed agrees.

Oracles: the fp16-accumulation kernel of nn (nn.functions.accumulate) against the replay
written here from the spec (products exact, each addition rounded to fp16); the model's own
kernel gradient against the replayed operands' float64 product; the textbook stall of an
fp16 running sum of ones at 2048; the fp32-accumulation run of the same model."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import nn
from nn import experiments as ex
from nn.cli import experiment_table
from nn.experiments import accumulation, cnn
from nn.functions.accumulate import accumulated_matmul
from nn.losses import SparseCategoricalCrossentropy

CI = cnn.CNNConfig(filters=(4, 8), batch_size=16, steps=6)


def test_an_fp16_running_sum_of_ones_stalls_at_2048_and_swamps_the_rest():
    ones = np.ones((4096, 1))
    total, swamped = accumulation.sequential_fp16_sum(ones, ones)
    assert total[0, 0] == 2048.0  # 2048 + 1 is a tie between 2048 and 2050: to even, 2048
    assert swamped == 0.5  # additions 2049..4096 left it unchanged


def test_the_replayed_fp16_sum_equals_nn_s_fp16_accumulation_kernel_bit_for_bit():
    for rows, grads in accumulation.conv_kernel_sums(CI).values():
        replay, _ = accumulation.sequential_fp16_sum(rows, grads)
        a = nn.Tensor(rows.T.astype(np.float32), "float16")
        b = nn.Tensor(grads.astype(np.float32), "float16")
        kernel = accumulated_matmul(a, b, "float16").data.astype(np.float64)
        np.testing.assert_array_equal(kernel, replay)
        assert np.count_nonzero(replay) > 0


def test_the_replayed_operands_multiply_to_the_model_s_own_kernel_gradients():
    scale = accumulation.LOSS_SCALE
    sums = accumulation.conv_kernel_sums(CI, scale)
    model = cnn.build_cnn(CI, "mixed_float16")
    (x, y), _ = cnn.data_for(CI)
    with nn.GradientTape() as tape:
        logits = model(x[:CI.batch_size], training=True)
        loss = SparseCategoricalCrossentropy(from_logits=True)(y[:CI.batch_size], logits) * scale
    kernels = [v for v in model.trainable_variables if v.name.endswith("kernel")][:2]
    grads = tape.gradient(loss, kernels)
    for (rows, g), kernel, grad in zip(sums.values(), kernels, grads, strict=True):
        exact = (rows.T @ g).reshape(kernel.shape)
        # the model sums in fp32 and rounds once to fp16: within an fp16 rounding of exact
        np.testing.assert_allclose(grad.data, exact, rtol=2.0**-10, atol=1e-3)


def test_the_first_convolution_sums_batch_x_64_terms_and_a_larger_batch_swamps_more():
    small = accumulation.kernel_gradient_sums(CI.with_(batch_size=8))
    large = accumulation.kernel_gradient_sums(CI.with_(batch_size=64))
    assert small["inner_dimensions"] == {"conv1": 8 * 64, "conv2": 8 * 16}
    assert large["inner_dimensions"] == {"conv1": 64 * 64, "conv2": 64 * 16}
    assert large["swamped_additions"]["conv1"] > small["swamped_additions"]["conv1"] > 0
    assert large["relative_error"]["conv1"] > small["relative_error"]["conv1"] > 0


@pytest.fixture(scope="module")
def result():
    return ex.fp32_accumulation(CI, spread_seeds=(1,))


def test_fp16_accumulation_trains_the_same_weights_on_the_same_batches_to_another_loss(result):
    fp32, fp16 = result.runs
    assert math.isfinite(fp16.test_loss) and fp16.test_loss != fp32.test_loss
    # same weights, same first batch: only the forward sums' roundings (9 and 36 terms) differ
    assert fp16.history.step_loss[0] == pytest.approx(fp32.history.step_loss[0], rel=1e-3)
    assert fp16.history.step_loss[0] != fp32.history.step_loss[0]
    assert set(result.extra["spread"]) == {1}
    assert f"batch size {CI.batch_size}" in result.knob and "1024 for conv1" in result.knob


def test_the_cnn_convolutions_take_the_accumulator_and_nothing_else_does():
    model = cnn.build_cnn(CI, "mixed_float16", accumulator="float16")
    convs = [layer for layer in model.layers if isinstance(layer, nn.layers.Conv2D)]
    assert [c.accumulator.name for c in convs] == ["float16", "float16"]
    assert model.layers[-1].accumulator is None  # the Dense logits keep fp32
    assert all(c.accumulator is None for c in cnn.build_cnn(CI, "mixed_float16").layers
               if isinstance(c, nn.layers.Conv2D))


def test_findings_give_the_swamped_shares_the_accuracy_and_every_seed_s_gap(result):
    lines = ex.findings(result)
    assert "conv1 (1024 terms)" in lines[0] and "swamped" in lines[0]
    assert lines[1].startswith(f"at batch {accumulation.SMALL_BATCH}:")
    assert any("held-out accuracy" in line for line in lines)
    assert any("seed 1" in line for line in lines)
    assert "test acc" in experiment_table(result).splitlines()[0]


def test_the_language_model_version_stays_available_as_accumulation_lm():
    assert ex.EXPERIMENTS["accumulation-lm"].run is ex.fp32_accumulation_lm
    assert ex.EXPERIMENTS["accumulation"].technique == "fp32 accumulation"
    assert ex.default_config("accumulation").batch_size == 256
    assert isinstance(ex.default_config("accumulation-lm"), ex.LMConfig)


def test_compare_accumulation_prints_the_batch_knob_and_writes_the_png(tmp_path, capsys,
                                                                       monkeypatch):
    # the CLI's default configuration, made small: its printing is what is tested here
    import dataclasses

    from fpsim.cli import main

    monkeypatch.setitem(ex.EXPERIMENTS, "accumulation",
                        dataclasses.replace(ex.EXPERIMENTS["accumulation"], config=CI))
    assert main(["compare", "--experiment", "accumulation", "--steps", "2", "--seeds", "2",
                 "--processes", "1", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    knob = next(ln for ln in lines if ln.startswith("seed 0 in detail; knob: "))
    assert f"the batch size {CI.batch_size}" in knob
    headers = [ln for ln in lines if ln.startswith("run ")]
    assert "95% interval" in headers[0] and "test acc" in headers[1]
    assert sum(ln.startswith("fp16 accumulation") for ln in lines) == 2  # seeds, run table
    assert (tmp_path / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("FPSIM_FULL_EXPERIMENTS"),
                    reason="full-size experiments: set FPSIM_FULL_EXPERIMENTS=1")
def test_full_size_fp16_accumulation_swamps_half_the_first_sum():
    r = ex.fp32_accumulation()
    assert r.extra["inner_dimensions"] == {"conv1": 16384, "conv2": 4096}
    assert r.extra["swamped_additions"]["conv1"] > 0.4 and r.extra["relative_error"]["conv1"] > 0.1
    assert r.extra["small_batch"]["relative_error"]["conv1"] < r.extra["relative_error"]["conv1"]
    assert all(math.isfinite(run.test_loss) for run in r.runs)


def test_the_plotted_running_sum_ends_where_the_fp16_replay_does():
    # two roundings to fp16: numpy's float64 -> float16 conversion and fpsim.round
    rows, grads = accumulation.conv_kernel_sums(CI)["conv1"]
    replay, _ = accumulation.sequential_fp16_sum(rows, grads)
    for i, j in ((0, 0), (4, 3)):
        products = rows[:, i] * grads[:, j]
        fp16, exact = accumulation.running_sums(products)
        assert fp16[-1] == replay[i, j] and len(fp16) == len(exact) == rows.shape[0]
        assert exact[-1] == pytest.approx(products.sum())
    assert len(accumulation.kernel_gradient_sums(CI)["running_sums"][0]) == 16 * 64
