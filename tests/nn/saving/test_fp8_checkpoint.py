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


# --- refusing bad recipe fields --------------------------------------------------------------
@pytest.fixture
def saved(tmp_path):
    model = _model("fp8_hybrid_delayed")
    model.fit(X, Y, batch_size=16, epochs=1, seed=0, verbose=0)
    model.save(tmp_path / "ck.npz")
    return tmp_path / "ck.npz"


def _first_state(c):
    return next(iter(c["fp8"][0]["states"].values()))


@pytest.mark.parametrize("edit,match", [
    (lambda c: _first_state(c).update(scale=-1.0), r"scale must be a finite float32 value > 0, "
                                                   r"got -1.0"),
    (lambda c: _first_state(c).update(scale=0.1), r"scale must be a finite float32.*0.1"),
    (lambda c: _first_state(c).update(steps=-2), r"steps must be an integer >= 0, got -2"),
    (lambda c: _first_state(c).update(amax_history=[1.0]), r"amax_history must be a list of 16"),
    (lambda c: _first_state(c)["amax_history"].__setitem__(3, -0.5),
     r"amax_history\[3\] must be a float32 value >= 0, inf or NaN.*-0.5"),
    (lambda c: _first_state(c).update(format="float8_e3m4"), r"format must be one of"),
    (lambda c: c["fp8"][0]["recipe"].__setitem__(2, 8), r"fp8\[0\].recipe: the state is of"),
    (lambda c: c["fp8"][0].update(layers=["nope"]), r"fp8\[0\].layers names layers the "
                                                    r"architecture lacks: \['nope'\]"),
    (lambda c: c["fp8"][0].update(steps={"x": 1}), r"fp8\[0\].steps: a per-tensor recipe"),
    (lambda c: c["fp8"].pop(), r"no recipe state for the layers \['dense_\d+'\]"),
    (lambda c: c.update(fp8={}), r"fp8 must be a list"),
])
def test_a_bad_recipe_field_is_refused_naming_it(saved, tmp_path, edit, match):
    with pytest.raises(ValueError, match=match):
        nn.load_model(_rewrite(saved, tmp_path / "bad.npz", edit_config=edit))


def test_a_nan_or_inf_amax_in_the_history_round_trips(saved, tmp_path):
    def poison(c):
        _first_state(c)["amax_history"][1:3] = [math.nan, math.inf]

    loaded = nn.load_model(_rewrite(saved, tmp_path / "nan.npz", edit_config=poison))
    history = next(iter(loaded.layers[0].policy.recipe.states.values())).amax_history
    assert math.isnan(history[1]) and history[2] == np.inf


def _downgrade_to_version_2(c):
    """A version 2 config: no fp8 entry, build configs and layer states keyed by layer name
    (version 4 keys them by path in the layer tree)."""
    names = {w["key"].rpartition(".")[0]: w["name"].rpartition("/")[0] for w in c["weights"]}
    c["build"] = {names[path]: build for path, build in c["build"].items()}
    c["layer_state"] = {names[path]: state for path, state in c["layer_state"].items()}
    c["version"] = 2
    del c["fp8"]


def test_a_version_2_checkpoint_of_a_delayed_scaling_model_loads_with_a_warning(saved, tmp_path):
    downgrade = _downgrade_to_version_2

    with pytest.warns(UserWarning, match="restarts from empty amax histories"):
        loaded = nn.load_model(_rewrite(saved, tmp_path / "v2.npz", edit_config=downgrade))
    assert all(not layer.policy.recipe.states for layer in loaded.layers)


def test_a_version_2_checkpoint_of_a_model_without_delayed_scaling_loads_silently(tmp_path):
    model = _model("mxfp8")
    model.fit(X, Y, batch_size=16, epochs=1, seed=0, verbose=0)
    model.save(tmp_path / "ck.npz")
    downgrade = _downgrade_to_version_2

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.load_model(_rewrite(tmp_path / "ck.npz", tmp_path / "v2.npz", edit_config=downgrade))


def test_recipe_load_state_dict_refuses_a_state_of_other_settings_and_changes_nothing():
    recipe = DelayedScaling(amax_history_len=4)
    other = DelayedScaling(amax_history_len=8)
    other.state("t", "forward").update(3.0)
    with pytest.raises(ValueError, match=r"recipe: the state is of the recipe \['DelayedScaling', "
                                         r"'hybrid', 8"):
        recipe.load_state_dict(other.state_dict())
    with pytest.raises(ValueError, match="keeps no per-tensor scaling state"):
        nn.fp8.BlockScaling().load_state_dict(
            {**nn.fp8.BlockScaling().state_dict(), "states": {"t": {}}})
    assert recipe.states == {}


def test_a_container_built_under_a_recipe_policy_with_float32_layers_loads_under_float32(
        tmp_path):
    nn.set_global_policy("fp8_hybrid_delayed")
    model = nn.Sequential([nn.Dense(4, dtype="float32")])  # the Sequential carries the recipe
    model(X)
    model.save(tmp_path / "ck.npz")
    nn.set_global_policy("float32")
    loaded = nn.load_model(tmp_path / "ck.npz")
    np.testing.assert_array_equal(loaded.predict(X, verbose=0), model.predict(X, verbose=0))
