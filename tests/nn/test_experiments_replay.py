"""What-if replay (nn.experiments.replay).

Oracles: the float32 replay of the float32 step is the step itself (cosine 1, nothing flushed,
update error 0); hand-made gradients whose fp16 rounding flushes a known element; a weight of
1.0 in fp16 whose step of 1e-4 is below half an ulp (2**-11); the optimizer state unchanged."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fpsim
from nn.experiments import LMConfig, replay
from nn.experiments.cnn import CNNConfig

TINY = LMConfig(sequence_length=16, batch_size=8, embed_dim=8, ff_dim=16, steps=4)


@pytest.fixture(scope="module")
def found():
    return replay.replay(TINY, steps=(0, 2), alternatives=("float32", "scaled fp16",
                                                            "fp16 weights, no masters",
                                                            "fp8 delayed scaling"))


def test_the_float32_replay_of_the_float32_step_is_exact(found):
    for r in found.replays:
        if r.alternative == "float32":
            for numbers in (r.total, *r.layers.values()):
                assert numbers.cosine == pytest.approx(1.0, abs=1e-12)
                assert numbers.flushed_norm == 0.0 and numbers.update_error == 0.0
                assert numbers.swamped == 0.0


def test_every_alternative_is_replayed_at_every_step_per_layer(found):
    assert found.steps == [0, 2]
    assert found.alternatives() == ["float32", "scaled fp16", "fp16 weights, no masters",
                                    "fp8 delayed scaling"]
    assert len(found.replays) == 8
    layers = set(found.replays[0].layers)
    assert any("dense" in name for name in layers) and len(layers) >= 5
    assert all(set(r.layers) == layers for r in found.replays)
    assert all(r.scale == 2.0**15 for r in found.replays if r.alternative == "scaled fp16")
    # the narrower the format, the further from float32: fp8 moves more than fp16
    assert found.mean("fp8 delayed scaling", "update_error") > found.mean("scaled fp16",
                                                                           "update_error") > 0
    # only the pure fp16 weights lose updates below half an ulp
    assert found.mean("fp16 weights, no masters", "swamped") > 0
    assert found.mean("scaled fp16", "swamped") == 0.0


def test_a_flushed_gradient_loses_exactly_its_share_of_the_norm():
    g_ref = np.array([3.0, 4.0, 1e-8, 0.0])
    g_alt = fpsim.round(g_ref, "fp16").astype(np.float64)  # 1e-8 < 2**-25: flushed to 0
    assert g_alt[2] == 0.0
    zero = np.zeros(4)
    numbers = replay.compare(g_ref, g_alt, zero, zero, zero)
    assert numbers.flushed_norm == pytest.approx(1e-8 / math.sqrt(25 + 1e-16), rel=1e-12)
    assert numbers.cosine == pytest.approx(1.0, abs=1e-15)


def test_a_step_below_half_an_ulp_of_an_fp16_weight_is_swamped():
    w = np.array([1.0, 1.0])  # fp16's spacing above 1 is 2**-10: half an ulp is 2**-11
    delta = np.array([1e-4, 1e-3])  # 1e-4 < 2**-11 ~ 4.9e-4 < 1e-3
    stored = fpsim.round(w - delta, "fp16").astype(np.float64)
    applied = stored - w
    assert applied[0] == 0.0 and applied[1] != 0.0
    numbers = replay.compare(np.ones(2), np.ones(2), -delta, applied, delta)
    assert numbers.swamped == 0.5
    expected = np.linalg.norm(applied + delta) / np.linalg.norm(delta)
    assert numbers.update_error == pytest.approx(expected, rel=1e-12)


def test_replay_refuses_steps_outside_the_run_and_unknown_alternatives():
    with pytest.raises(ValueError, match=r"steps must lie in 0..3.*\[4\]"):
        replay.replay(TINY, steps=(4,))
    with pytest.raises(ValueError, match="alternatives must be among.*'fp7'"):
        replay.replay(TINY, steps=(0,), alternatives=("fp7",))


def test_what_if_prints_one_row_per_alternative(tmp_path, capsys):
    from fpsim.cli import main

    assert main(["compare", "--what-if", "--steps", "3"]) == 0  # (it takes no --out)
    out = capsys.readouterr().out
    for name in replay.ALTERNATIVES:
        assert f"\n{name} " in out
    assert "grad cosine" in out and "norm flushed" in out and "swamped" in out


TINY_CNN = CNNConfig(filters=(4, 8), steps=4, batch_size=16)


@pytest.fixture(scope="module")
def found_cnn():
    return replay.replay(TINY_CNN, steps=(0, 3), alternatives=(
        "float32", "unscaled fp16", "scaled fp16", "fp16 accumulation (convolutions)",
        "fp16 weights, no masters"))


def test_the_cnn_is_replayed_per_layer_and_its_float32_replay_is_exact(found_cnn):
    assert found_cnn.numbers()["model"] == "CNN"
    layers = set(found_cnn.replays[0].layers)
    assert {"conv1", "bn1", "conv2", "bn2", "logits"} <= layers
    for r in found_cnn.replays:
        if r.alternative == "float32":
            assert r.total.cosine == pytest.approx(1.0, abs=1e-12)
            assert r.total.update_error == 0.0 and r.total.flushed_norm == 0.0


def test_fp16_accumulation_in_the_convolutions_adds_error_to_their_gradients(found_cnn):
    # the same scaled step with fp32 accumulation is the oracle: summing conv1's kernel
    # gradient (batch x 8 x 8 terms) in fp16 can only move it further from float32
    for what in ("update_error",):
        fp16 = found_cnn.mean("fp16 accumulation (convolutions)", what, "conv1")
        assert fp16 > found_cnn.mean("scaled fp16", what, "conv1")
    assert found_cnn.mean("fp16 accumulation (convolutions)", "cosine", "conv1") < \
        found_cnn.mean("scaled fp16", "cosine", "conv1")
    assert found_cnn.mean("fp16 weights, no masters", "swamped") > 0
    assert found_cnn.mean("unscaled fp16", "swamped") == 0.0


def test_without_masters_only_the_weights_storage_changes_not_the_gradients(found_cnn):
    # the oracle is the scaled mixed_float16 step: same fp16 compute, fp32 statistics in
    # both; only where the update is stored differs (fp16 weights swamp small updates)
    pure, mixed = "fp16 weights, no masters", "scaled fp16"
    assert found_cnn.mean(pure, "cosine") == pytest.approx(found_cnn.mean(mixed, "cosine"),
                                                           abs=1e-5)
    assert found_cnn.mean(pure, "update_error") > found_cnn.mean(mixed, "update_error")


def test_replay_refuses_an_alternative_of_the_other_model_and_an_unknown_config():
    with pytest.raises(ValueError, match=r"alternatives must be among .* for the CNN.*"
                                         r"'fp16 accumulation \(logits\)'"):
        replay.replay(TINY_CNN, steps=(0,), alternatives=("fp16 accumulation (logits)",))
    with pytest.raises(TypeError, match="config must be one of .*LMConfig.*got dict"):
        replay.replay({"steps": 3}, steps=(0,))
