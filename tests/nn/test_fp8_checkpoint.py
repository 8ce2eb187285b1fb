"""fp8 recipe state in checkpoints: resumed training under every kind of recipe is bit-identical
to an uninterrupted run; bad recipe fields are refused naming them; old files still load."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from resume import assert_resume_is_bit_identical
from test_checkpoint import _rewrite

import nn
from nn.fp8 import DelayedScaling

RNG = np.random.default_rng(11)
X = RNG.normal(size=(64, 12)).astype(np.float32)
Y = RNG.integers(0, 4, size=64)
CE = nn.losses.SparseCategoricalCrossentropy


def _model(policy: str | None, seed: int = 0) -> nn.Sequential:
    nn.set_random_seed(seed)
    model = nn.Sequential([nn.Dense(16, activation="relu", dtype=policy),
                           nn.Dense(4, dtype=policy)])
    model.compile(nn.Adam(1e-2), CE(from_logits=True))
    return model


def _states(model: nn.Sequential) -> list[object]:
    """Every recipe's state, tensor names left out (the two models' layers differ in name)."""
    return [(list(r.state_dict()["states"].values()), list(r.state_dict()["steps"].values()))
            for r in nn.fp8.recipes_of(model)]


@pytest.mark.parametrize("policy", ["fp8_hybrid_delayed", "fp8_e4m3_current", "mxfp8",
                                    "nvfp4"])
def test_resume_under_a_recipe_policy_is_bit_identical(tmp_path, policy):
    resumed = assert_resume_is_bit_identical(lambda: _model(policy), X, Y, tmp_path / "ck.npz",
                                             batch_size=16, seed=2)
    straight = _model(policy)
    straight.fit(X, Y, batch_size=16, epochs=3, seed=2, verbose=0)
    assert json.dumps(_states(resumed)) == json.dumps(_states(straight))


def test_resume_under_a_global_recipe_policy_restores_one_shared_recipe(tmp_path):
    def make():
        nn.set_global_policy("fp8_hybrid_delayed")  # a new Policy object: a recipe per model
        return _model(None)

    resumed = assert_resume_is_bit_identical(make, X, Y, tmp_path / "ck.npz", batch_size=16,
                                             seed=3)
    (recipe,) = nn.fp8.recipes_of(resumed)
    assert all(layer.policy.recipe is recipe for layer in resumed.layers)
    assert len(recipe.states) == 6  # input, weight, grad_output of both layers


def test_the_checkpoint_holds_the_amax_histories_and_scales_exactly(tmp_path):
    model = _model("fp8_hybrid_delayed")
    model.fit(X, Y, batch_size=16, epochs=1, seed=0, verbose=0)
    model.save(tmp_path / "ck.npz")
    loaded = nn.load_model(tmp_path / "ck.npz")
    for a, b in zip(model.layers, loaded.layers, strict=True):
        ra, rb = a.policy.recipe, b.policy.recipe
        assert ra is not rb and sorted(ra.states) == sorted(rb.states)
        for name, st in ra.states.items():
            np.testing.assert_array_equal(st.amax_history, rb.states[name].amax_history)
            assert (st.scale, st.steps) == (rb.states[name].scale, rb.states[name].steps)
            assert rb.states[name].fmt == st.fmt
        assert len(rb.log) == 0  # telemetry is not state


def test_resume_under_an_explicit_fp8_autocast_is_bit_identical_through_the_recipes_state(
        tmp_path):
    def run(model, recipe, epochs):
        with nn.fp8_autocast(recipe):
            return model.fit(X, Y, batch_size=16, epochs=epochs, seed=1, verbose=0)

    straight, r_straight = _model("float32"), DelayedScaling(amax_history_len=4)
    h_straight = run(straight, r_straight, 3)
    first, r_first = _model("float32"), DelayedScaling(amax_history_len=4)
    run(first, r_first, 1)
    first.save(tmp_path / "ck.npz")
    (tmp_path / "recipe.json").write_text(json.dumps(r_first.state_dict()))
    resumed, r_resumed = nn.load_model(tmp_path / "ck.npz"), DelayedScaling(amax_history_len=4)
    assert nn.fp8.recipes_of(resumed) == []  # the caller's recipe is not the model's
    r_resumed.load_state_dict(json.loads((tmp_path / "recipe.json").read_text()))
    h_resumed = run(resumed, r_resumed, 2)
    for a, b in zip(straight.get_weights(), resumed.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    assert h_straight.step_loss[-len(h_resumed.step_loss):] == h_resumed.step_loss
