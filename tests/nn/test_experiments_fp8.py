"""The fp8 experiment (nn.experiments.fp8): plain e4m3fn fails where the recipes train."""

from __future__ import annotations

import numpy as np
import pytest

from nn.experiments import fp8 as exp

CI_TOKENS = 6000  # about 20 steps per policy: seconds


@pytest.fixture(scope="module")
def results():
    return exp.run_fp8_experiment(tokens=CI_TOKENS)


def test_plain_e4m3fn_fails_to_learn_where_bf16_does(results):
    assert results["mixed_e4m3fn"].test_loss > results["mixed_bfloat16"].test_loss + 0.5


@pytest.mark.parametrize("policy", ["fp8_hybrid_delayed", "mxfp8"])
def test_fp8_recipes_train_to_within_a_small_margin_of_bf16(results, policy):
    assert not results[policy].diverged
    assert abs(results[policy].test_loss - results["mixed_bfloat16"].test_loss) < 0.05


def test_nvfp4s_finer_block_scales_beat_mxfp4(results):
    assert results["nvfp4"].test_loss < results["mxfp4"].test_loss


def test_the_table_has_one_row_per_policy(results):
    lines = exp.table(results).splitlines()
    assert len(lines) == 1 + len(exp.POLICIES)
    assert [line.split()[0] for line in lines[1:]] == list(exp.POLICIES)


def test_too_few_tokens_are_refused_naming_the_argument():
    with pytest.raises(ValueError, match="tokens must be an integer >= 2560"):
        exp.run_fp8_experiment(tokens=100)


@pytest.mark.slow
def test_plain_e4m3fn_diverges_at_full_size():
    full = exp.run_fp8_experiment(("mixed_bfloat16", "mixed_e4m3fn"), tokens=exp.TOKENS)
    assert full["mixed_e4m3fn"].diverged and not full["mixed_bfloat16"].diverged
    assert np.isfinite(full["mixed_bfloat16"].test_loss)


@pytest.mark.parametrize("steps", [1, 2, 7, 117])
def test_the_table_s_fp8_configuration_gives_exactly_its_steps(steps):
    (x, _, x_test, _), _ = exp.make_data(exp.Fp8Config(steps=steps).tokens)
    assert len(x) == steps * exp.BATCH_SIZE and len(x_test) > 0


def test_the_fp8_entry_trains_each_policy_from_the_seed_and_plain_e4m3fn_lags():
    config = exp.Fp8Config(steps=12, policies=("mixed_e4m3fn", "fp8_hybrid_delayed"))
    a, b = exp.fp8_recipes(config), exp.fp8_recipes(config.with_(seed=1))
    assert [r.label for r in a.runs] == ["mixed_e4m3fn", "fp8_hybrid_delayed"]
    assert a.runs[1].test_loss != b.runs[1].test_loss  # the seed draws weights and batches
    assert exp.fp8_recipes(config).runs[1].test_loss == a.runs[1].test_loss
    assert a.gap("mixed_e4m3fn", "fp8_hybrid_delayed") > 0.1
    assert a.runs[0].history.step_loss[0] == pytest.approx(np.log(94), abs=0.2)
