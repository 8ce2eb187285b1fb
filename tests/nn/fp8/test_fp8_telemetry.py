"""fp8 telemetry in fit's History, and recipes shared by several models in one process.

Oracles: the recipe's own log rows (``recipe.log.series``: one row per quantization) sliced by
the steps of each epoch, and delayed scaling's rule written out here (scale = fp8_max / the
largest amax of the earlier steps)."""

from __future__ import annotations

import gc

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import nn  # noqa: E402
import nn.plot  # noqa: E402
from nn.fp8 import DelayedScaling  # noqa: E402
from nn.fp8.state import SUMMARY_FIELDS  # noqa: E402

RNG = np.random.default_rng(5)
X = RNG.normal(size=(48, 12)).astype(np.float32) * 30  # large: the first steps saturate
Y = RNG.integers(0, 4, size=48)
CE = nn.losses.SparseCategoricalCrossentropy


def _model(policy: str | None = None, names: tuple[str, str] | None = None) -> nn.Sequential:
    nn.set_random_seed(0)
    a, b = names or (None, None)
    model = nn.Sequential([nn.Dense(16, activation="relu", dtype=policy, name=a),
                           nn.Dense(4, dtype=policy, name=b)])
    model.compile(nn.SGD(0.05), CE(from_logits=True))
    return model


def test_history_holds_one_summary_per_epoch_and_tensor_of_its_training_steps():
    model = _model("fp8_hybrid_delayed")
    h = model.fit(X, Y, batch_size=16, epochs=3, seed=0, verbose=0,
                  validation_data=(X[:16], Y[:16]))
    recipe = model.layers[0].policy.recipe
    name = f"{model.layers[0].name}/Linear/input"
    logged = [n for r in nn.fp8.recipes_of(model) for n in r.log.names()]  # a recipe per layer
    assert len(h.fp8) == 3 and h.fp8_names() == logged
    assert set(h.fp8[0][name]) == set(SUMMARY_FIELDS)
    series = recipe.log.series(name)  # 3 training steps + 1 validation pass per epoch
    for epoch in range(3):
        train = slice(4 * epoch, 4 * epoch + 3)
        row = h.fp8[epoch][name]
        assert row["quantizations"] == 3 and row["format"] == "float8_e4m3fn"
        assert row["last_scale"] == series["scale"][train][-1]
        assert row["max_amax"] == series["amax"][train].max()
        assert row["max_saturated_share"] == series["saturated_share"][train].max()
    # delayed scaling, from its rule: the scale of a step is 448 / the largest earlier amax
    last = 4 * 2 + 2
    assert h.fp8_series(name, "last_scale")[-1] == np.float32(448) / np.float32(
        series["amax"][:last].max())
    assert h.fp8_series(name)[0] > 0  # the first step, at scale 1, saturated inputs of ~30 * 3
    assert "dense" in h.fp8_table() and "max amax" in h.fp8_table()


def test_fp8_series_names_unknown_tensors_and_fields_and_gives_nan_where_absent():
    h = nn.training.history.History()
    h.record_fp8({})
    h.record_fp8({"t": {"format": "float8_e4m3fn", "last_scale": 2.0}})
    np.testing.assert_array_equal(h.fp8_series("t", "last_scale"), [np.nan, 2.0])
    with pytest.raises(KeyError, match="no fp8 tensor 'u'.*\\['t'\\]"):
        h.fp8_series("u")
    with pytest.raises(ValueError, match="field must be one of.*got 'scale'"):
        h.fp8_series("t", "scale")
    assert nn.training.history.History().fp8_table().startswith("no fp8 telemetry")


def test_fit_inside_fp8_autocast_updates_the_same_tensors_every_step_and_records_them():
    model, recipe = _model("float32"), DelayedScaling()
    with nn.fp8_autocast(recipe):
        h = model.fit(X, Y, batch_size=16, epochs=2, seed=0, verbose=0)
    assert len(recipe.states) == 6  # input, weight, grad_output of 2 layers; not one per step
    assert {st.steps for st in recipe.states.values()} == {6}
    assert sorted(h.fp8[1]) == sorted(recipe.states)
    assert all(row["quantizations"] == 3 for row in h.fp8[1].values())


def test_a_fit_without_a_recipe_records_empty_fp8_epochs():
    h = _model("float32").fit(X, Y, batch_size=16, epochs=2, seed=0, verbose=0)
    assert h.fp8 == [{}, {}] and h.fp8_names() == []


def test_fp8_telemetry_plot_draws_each_tensors_series():
    model = _model("fp8_hybrid_delayed")
    h = model.fit(X, Y, batch_size=16, epochs=2, seed=0, verbose=0)
    ax = nn.plot.fp8_telemetry(h, "last_scale")
    assert [line.get_label() for line in ax.get_lines()] == h.fp8_names()
    for line in ax.get_lines():
        np.testing.assert_array_equal(line.get_ydata(), h.fp8_series(line.get_label(),
                                                                     "last_scale"))
    assert ax.get_yscale() == "log"
    with pytest.raises(ValueError, match="no fp8 telemetry"):
        nn.plot.fp8_telemetry(nn.training.history.History())
    plt.close("all")


# --- one recipe, several models -------------------------------------------------------------
def test_two_models_built_under_one_global_policy_keep_their_own_states_and_telemetry():
    nn.set_global_policy("fp8_hybrid_delayed")  # one Policy object: one recipe for both
    a, b = _model(), _model()
    (recipe,) = set(nn.fp8.recipes_of(a)) | set(nn.fp8.recipes_of(b))
    a.fit(X, Y, batch_size=16, epochs=1, seed=0, verbose=0)
    hb = b.fit(X, Y, batch_size=16, epochs=2, seed=0, verbose=0)
    for model, steps in ((a, 3), (b, 6)):
        for layer in model.layers:
            assert recipe.states[f"{layer.name}/Linear/weight"].steps == steps
    assert {n.split("/")[0] for n in hb.fp8_names()} == {layer.name for layer in b.layers}


def test_two_layers_of_one_name_under_one_recipe_raise_instead_of_mixing_their_states():
    nn.set_global_policy("fp8_hybrid_delayed")
    a = _model(names=("fc", "out"))
    a.fit(X, Y, batch_size=16, epochs=1, seed=0, verbose=0)
    b = _model(names=("fc", "out"))
    with pytest.raises(ValueError, match="two different layers named 'fc' run their matmuls "
                                         "under one fp8 recipe"):
        b.fit(X, Y, batch_size=16, epochs=1, seed=0, verbose=0)
    recipe = a.layers[0].policy.recipe
    assert recipe.states["fc/Linear/input"].steps == 3  # b did not touch it
    del a
    gc.collect()
    b(X[:16])  # the first layer of that name is gone: b's layers start from fresh states
    assert recipe.states["fc/Linear/input"].steps == 1


def test_the_same_layer_in_two_models_shares_its_state():
    dense = nn.Dense(4, dtype="fp8_hybrid_delayed")
    one, two = nn.Sequential([dense]), nn.Sequential([dense])
    one(X)
    two(X)
    assert dense.policy.recipe.states[f"{dense.name}/Linear/input"].steps == 2


def test_two_layers_of_one_name_may_share_the_stateless_tf32_recipe():
    nn.set_global_policy("mixed_tf32")
    a = _model(names=("fc", "out"))
    a(X)
    b = _model(names=("fc", "out"))
    np.testing.assert_array_equal(a(X).data, b(X).data)  # same seed, same weights, no error
