"""Checkpoints: save/load round trips, bit-identical resume, and refusal of bad files.

The oracle for resuming is the uninterrupted run itself: same seed, same data, compared bit for
bit (weights, optimizer slots, loss scale, step losses).
"""

from __future__ import annotations

import json
import os
import stat
import zipfile
from pathlib import Path

import numpy as np
import pytest
from helpers import same_arrays as _same
from resume import assert_resume_is_bit_identical

import fpsim
import nn

CE = nn.losses.SparseCategoricalCrossentropy


@pytest.fixture(scope="module")
def data():
    (x, y), _ = nn.datasets.load_digits()
    return x[:256], y[:256]


def _model(policy="mixed_float16", optimizer="adam", dropout=False):
    nn.set_random_seed(7)
    with nn.policy_scope(policy):
        layers = [nn.Dense(24, activation="relu")]
        if dropout:
            layers.append(nn.Dropout(0.2, seed=3))
        layers += [nn.Dense(10)]
        model = nn.Sequential(layers)
    opt = nn.optimizers.get(optimizer)
    return model.compile(opt, CE(from_logits=True), ["accuracy"])


def _slots(model):
    opt = model.inner_optimizer
    return [opt.get_slot(v, s) for v in opt.variables for s in opt.slot_names]


@pytest.mark.parametrize("policy,optimizer,dropout", [
    ("mixed_float16", "adam", False),
    ("mixed_float16", "sgd", True),
    ("float16", "rmsprop", False),
    ("mixed_bfloat16", "adam", True),
])
def test_resumed_training_is_bit_identical_to_an_uninterrupted_run(data, tmp_path, policy,
                                                                    optimizer, dropout):
    x, y = data
    straight = _model(policy, optimizer, dropout)
    h_straight = straight.fit(x, y, batch_size=32, epochs=4, seed=5, verbose=0)

    first = _model(policy, optimizer, dropout)
    first.fit(x, y, batch_size=32, epochs=2, seed=5, verbose=0)
    first.save(tmp_path / "ck.npz")
    resumed = nn.load_model(tmp_path / "ck.npz")
    h_resumed = resumed.fit(x, y, batch_size=32, epochs=2, seed=5, verbose=0)

    assert _same(straight.get_weights(), resumed.get_weights())
    assert _same(_slots(straight), _slots(resumed))
    assert h_straight.step_loss[-len(h_resumed.step_loss):] == h_resumed.step_loss
    assert straight.inner_optimizer.iterations == resumed.inner_optimizer.iterations
    assert resumed.epochs_trained == 4


def test_resume_restores_the_dynamic_loss_scale_and_its_counter(data, tmp_path):
    x, y = data
    opt = nn.LossScaleOptimizer(nn.SGD(0.05), initial_scale=2.0**40, dynamic_growth_steps=3)
    straight = _model().compile(opt, CE(from_logits=True))
    h = straight.fit(x, y, batch_size=32, epochs=4, seed=1, verbose=0)
    assert any(h.step_skipped) and not all(h.step_skipped)  # the scale moved both ways

    opt = nn.LossScaleOptimizer(nn.SGD(0.05), initial_scale=2.0**40, dynamic_growth_steps=3)
    first = _model().compile(opt, CE(from_logits=True))
    first.fit(x, y, batch_size=32, epochs=2, seed=1, verbose=0)
    first.save(tmp_path / "ck.npz")
    resumed = nn.load_model(tmp_path / "ck.npz")
    loaded = resumed.loss_scale_optimizer
    assert loaded.loss_scale == first.loss_scale_optimizer.loss_scale
    assert loaded.dynamic_counter == first.loss_scale_optimizer.dynamic_counter
    assert loaded.skipped_steps == first.loss_scale_optimizer.skipped_steps
    h2 = resumed.fit(x, y, batch_size=32, epochs=2, seed=1, verbose=0)
    assert h2.step_loss_scale == h.step_loss_scale[-len(h2.step_loss_scale):]
    assert _same(straight.get_weights(), resumed.get_weights())


def test_a_loaded_model_predicts_exactly_as_the_saved_one(data, tmp_path):
    x, y = data
    model = _model()
    model.fit(x, y, epochs=1, verbose=0)
    model.save(tmp_path / "m.npz")
    loaded = nn.load_model(tmp_path / "m.npz")
    np.testing.assert_array_equal(model.predict(x), loaded.predict(x))
    assert [layer.policy for layer in loaded.layers] == [layer.policy for layer in model.layers]
    assert isinstance(loaded.loss_scale_optimizer, nn.LossScaleOptimizer)


def test_an_uncompiled_model_round_trips_without_optimizer(tmp_path):
    nn.set_random_seed(0)
    model = nn.Sequential([nn.Dense(3, activation="tanh")])
    model(np.ones((1, 4), np.float32))
    model.save(tmp_path / "u.npz")
    loaded = nn.load_model(tmp_path / "u.npz")
    assert _same(model.get_weights(), loaded.get_weights())
    assert getattr(loaded, "loss", None) is None


def test_loading_does_not_draw_from_the_global_generator(data, tmp_path):
    model = _model()
    model(data[0][:1])
    model.save(tmp_path / "m.npz")
    nn.set_random_seed(123)
    nn.load_model(tmp_path / "m.npz")
    after_load = nn.Dense(2)
    after_load(np.ones((1, 2), np.float32))
    nn.set_random_seed(123)
    fresh = nn.Dense(2)
    fresh(np.ones((1, 2), np.float32))
    assert _same(after_load.get_weights(), fresh.get_weights())


# --- bad files ----------------------------------------
@pytest.fixture
def saved(data, tmp_path):
    model = _model()
    model.fit(*data, epochs=1, verbose=0)
    path = tmp_path / "good.npz"
    model.save(path)
    return path


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.9, 0.999])
def test_a_truncated_file_raises_value_error(saved, tmp_path, keep):
    raw = saved.read_bytes()
    bad = tmp_path / "truncated.npz"
    bad.write_bytes(raw[: int(len(raw) * keep)])
    with pytest.raises(ValueError, match="not a usable fpsim nn checkpoint"):
        nn.load_model(bad)


def test_a_corrupted_byte_raises_value_error(saved, tmp_path):
    raw = bytearray(saved.read_bytes())
    with zipfile.ZipFile(saved) as z:
        info = z.getinfo("weight_0.npy")
    raw[info.header_offset + 30 + len(info.filename) + 200] ^= 0xFF  # inside the weight data
    bad = tmp_path / "corrupt.npz"
    bad.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="not a usable fpsim nn checkpoint"):
        nn.load_model(bad)


def test_a_foreign_npz_raises_value_error(tmp_path):
    path = tmp_path / "foreign.npz"
    np.savez(path, a=np.arange(3), b=np.ones(2))
    with pytest.raises(ValueError, match="no 'config' member"):
        nn.load_model(path)


def test_a_file_that_is_not_a_zip_raises_value_error(tmp_path):
    path = tmp_path / "text.npz"
    path.write_text("hello")
    with pytest.raises(ValueError, match="not a usable fpsim nn checkpoint"):
        nn.load_model(path)


def test_a_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        nn.load_model(tmp_path / "nothing.npz")


def _rewrite(src, dst, edit_config=None, drop=None, replace=None):
    with np.load(src) as z:
        arrays = {k: z[k] for k in z.files}
    config = json.loads(arrays["config"].tobytes())
    if edit_config:
        edit_config(config)
    arrays["config"] = np.frombuffer(json.dumps(config).encode(), np.uint8)
    if drop:
        del arrays[drop]
    if replace:
        arrays.update(replace)
    np.savez(dst, **arrays)
    return dst


def test_a_newer_version_or_another_format_tag_raises(saved, tmp_path):
    def bump(c):
        c["version"] = 99

    def retag(c):
        c["format"] = "something.else"

    with pytest.raises(ValueError, match="version 99"):
        nn.load_model(_rewrite(saved, tmp_path / "v.npz", edit_config=bump))
    with pytest.raises(ValueError, match="format tag"):
        nn.load_model(_rewrite(saved, tmp_path / "t.npz", edit_config=retag))


def test_a_weight_of_the_wrong_shape_raises(saved, tmp_path):
    bad = _rewrite(saved, tmp_path / "s.npz", replace={"weight_1": np.zeros(5, np.float32)})
    with pytest.raises(ValueError, match="weight 1"):
        nn.load_model(bad)


def test_a_missing_optimizer_slot_raises(saved, tmp_path):
    bad = _rewrite(saved, tmp_path / "m.npz", drop="slot_0_momentum")
    with pytest.raises(ValueError, match="slot"):
        nn.load_model(bad)


def test_saving_replaces_the_file_atomically(saved, data):
    model = _model()
    model.fit(*data, epochs=1, verbose=0)
    model.save(saved)
    assert nn.load_model(saved).epochs_trained == 1
    assert [p.name for p in saved.parent.iterdir()] == [saved.name]


# --- save never writes what load cannot read ------------------------------------
def test_two_layers_with_one_name_are_refused_when_the_model_is_made():
    with pytest.raises(ValueError, match="already has a layer named 'd'.*unique"):
        nn.Sequential([nn.Dense(8, name="d"), nn.Dense(3, name="d")])
    model = nn.Sequential([nn.Dense(8, name="d")])
    with pytest.raises(ValueError, match="already has a layer named 'd'"):
        model.add(nn.Sequential([nn.Dense(3, name="d")]))  # nested names count too
    assert len(model.layers) == 1


def test_one_layer_object_used_twice_is_refused_when_the_model_is_made():
    d = nn.Dense(4)
    with pytest.raises(ValueError, match=f"layer '{d.name}' is already in model.*shared"):
        nn.Sequential([d, d])


def test_a_metric_with_a_custom_name_saves_and_loads(data, tmp_path):
    model = _model().compile("adam", CE(from_logits=True), [nn.metrics.Accuracy(name="my_acc")])
    h = model.fit(*data, epochs=1, verbose=0)
    assert "my_acc" in h.history
    model.save(tmp_path / "m.npz")
    loaded = nn.load_model(tmp_path / "m.npz")
    assert [m.name for m in loaded.metrics] == ["my_acc"]
    assert loaded.evaluate(*data, return_dict=True) == model.evaluate(*data, return_dict=True)


def test_a_plain_callable_loss_is_refused_by_save_saying_the_optimizer_state_would_be_lost(
        data, tmp_path):
    model = _model().compile("adam", lambda yt, yp: CE(from_logits=True)(yt, yp))
    model.fit(*data, epochs=1, verbose=0)
    with pytest.raises(ValueError, match="loss .*optimizer's state"):
        model.save(tmp_path / "m.npz")
    assert list(tmp_path.iterdir()) == []


def test_a_model_loaded_from_a_checkpoint_with_dropout_saves_again(data, tmp_path):
    model = _model(dropout=True)
    model.fit(*data, epochs=1, verbose=0)
    model.save(tmp_path / "a.npz")
    loaded = nn.load_model(tmp_path / "a.npz")
    loaded.save(tmp_path / "b.npz")
    again = nn.load_model(tmp_path / "b.npz")
    np.testing.assert_array_equal(again.predict(data[0]), model.predict(data[0]))


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_resume_with_an_unseeded_dropout_is_bit_identical_to_an_uninterrupted_run(
        data, tmp_path, policy):
    x, y = data

    def make():
        nn.set_random_seed(11)
        with nn.policy_scope(policy):
            model = nn.Sequential([nn.Dense(24, activation="relu"), nn.Dropout(0.3),
                                   nn.Dense(10)])
        return model.compile("adam", CE(from_logits=True))

    resumed = assert_resume_is_bit_identical(
        make, x, y, tmp_path / "ck.npz", batch_size=32, seed=4,
        before_load=lambda: nn.set_random_seed(999))  # the dropout masks must not follow it
    if policy == "mixed_float16":
        assert resumed.loss_scale_optimizer.dynamic


@pytest.mark.parametrize("field,value,name", [
    (("optimizer", "iterations"), -1, "iterations"),
    (("optimizer", "iterations"), 1.5, "iterations"),
    (("optimizer", "swamped_updates"), -3, "swamped_updates"),
    (("training", "epochs_trained"), -1, "epochs_trained"),
    (("loss_scale", "state", "skipped_steps"), -7, "skipped_steps"),
    (("loss_scale", "state", "dynamic_counter"), -1, "counter"),
    (("loss_scale", "state", "loss_scale"), 0.5, "scale"),
    (("loss_scale", "state", "loss_scale"), float("nan"), "scale"),
    (("loss_scale", "config", "initial_scale"), 1e-50, "initial_scale"),
])
def test_a_checkpoint_field_out_of_range_is_refused_naming_it(saved, tmp_path, field, value,
                                                              name):
    def edit(c):
        target = c
        for key in field[:-1]:
            target = target[key]
        target[field[-1]] = value

    with pytest.raises(ValueError, match=f"{name}.*{value}"):
        nn.load_model(_rewrite(saved, tmp_path / "bad.npz", edit_config=edit))


def test_a_slot_of_the_wrong_shape_is_refused(saved, tmp_path):
    bad = _rewrite(saved, tmp_path / "s.npz", replace={"slot_0_momentum": np.zeros(3, np.float32)})
    with pytest.raises(ValueError, match="slot 'momentum'"):
        nn.load_model(bad)


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_checkpoints_get_the_permissions_of_the_users_umask(tmp_path, umask, mode):
    model = nn.Sequential([nn.Dense(2)])
    model(np.ones((1, 2), np.float32))
    old = os.umask(umask)
    try:
        model.save(tmp_path / "m.npz")
        np.save(tmp_path / "oracle.npy", np.zeros(1))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "m.npz").stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "oracle.npy").stat().st_mode) == mode


def test_a_save_that_fails_midway_leaves_the_previous_checkpoint_byte_identical(tmp_path,
                                                                               monkeypatch):
    import errno

    from fpsim.atomic import WriteError

    model = nn.Sequential([nn.Dense(2)])
    model(np.ones((1, 2), np.float32))
    path = tmp_path / "m.npz"
    model.save(path)
    before = path.read_bytes()
    model.layers[0].kernel.assign(np.full((2, 2), 7.0, np.float32))

    def half_then_full_disk(f, **arrays):
        f.write(b"PK\x03\x04 half a zip")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "savez", half_then_full_disk)
    with pytest.raises(WriteError, match="checkpoint.*m.npz.*No space left.*unchanged"):
        model.save(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.npz"]


def test_a_version_1_checkpoint_loads_and_predicts_as_it_was_saved():
    """tests/nn/data/checkpoint_v1.npz was written by the previous format (version 1): mixed
    fp16 Dense/seeded Dropout/Dense, a weighted loss, Adam with a dynamic loss scale after 8
    steps; the _expected file holds the data, its predictions and the weights then."""
    here = Path(__file__).parents[1] / "data"
    model = nn.load_model(here / "checkpoint_v1.npz")
    with np.load(here / "checkpoint_v1_expected.npz") as z:
        expected = {k: z[k] for k in z.files}
    assert _same(model.get_weights(), [expected[f"arr_{i}"] for i in range(4)])
    np.testing.assert_array_equal(model.predict(expected["x"]), expected["pred"])
    assert model.inner_optimizer.iterations == 8
    assert model.loss_scale_optimizer.loss_scale == 16384.0
    assert isinstance(model.loss, nn.WeightedLoss) and model.loss.weight == 4.0
    assert [m.name for m in model.metrics] == ["accuracy"]
    model.fit(expected["x"], expected["y"], batch_size=8, epochs=1, verbose=0, seed=2)


def test_a_version_0_file_gets_a_clear_error_naming_the_readable_versions(saved, tmp_path):
    def old(c):
        c["version"] = 0

    with pytest.raises(ValueError, match="version 0; this nn reads versions 1, 2"):
        nn.load_model(_rewrite(saved, tmp_path / "v0.npz", edit_config=old))


# --- values outside their variable's format ----------------------------------------
@pytest.mark.parametrize("policy, outside", [("float16", 0.1), ("bfloat16", 1.0 + 2.0**-10),
                                             ("float16", 70000.0)])
def test_a_weight_edited_to_a_value_outside_its_format_is_refused_naming_the_variable(
        data, tmp_path, policy, outside):
    model = _model(policy, optimizer="sgd")
    model.fit(*data, epochs=1, verbose=0)
    path = tmp_path / "low.npz"
    model.save(path)
    with np.load(path) as z:
        config = json.loads(z["config"].tobytes())
        weight = z["weight_2"].copy()
    assert fpsim_round(np.float32(outside), policy) != np.float32(outside)  # the oracle
    weight.reshape(-1)[3] = outside
    bad = _rewrite(path, tmp_path / "edited.npz", replace={"weight_2": weight})
    key = config["weights"][2]["key"]
    with pytest.raises(ValueError, match=rf"weight '{key}' holds 1 value\(s\) outside its format "
                                         rf"{policy}, e.g\. {outside!r}"):
        nn.load_model(bad)


def test_a_weight_holding_nan_loads_as_saved_since_its_format_has_nan(data, tmp_path):
    model = _model("float16", optimizer="sgd")
    model.fit(*data, epochs=1, verbose=0)
    path = tmp_path / "low.npz"
    model.save(path)
    with np.load(path) as z:
        weight = z["weight_0"].copy()
    weight.reshape(-1)[0] = np.nan  # a diverged model is still a faithful checkpoint
    loaded = nn.load_model(_rewrite(path, tmp_path / "nan.npz", replace={"weight_0": weight}))
    np.testing.assert_array_equal(loaded.weights[0].data, weight)


def fpsim_round(value, fmt):
    """fpsim's pure-Python rounding (the spec), independent of nn's kernels."""
    return np.float32(fpsim.round_scalar(float(value), fpsim.get_format(fmt)))


def test_a_nan_weight_in_a_format_without_nan_is_refused(tmp_path):
    with nn.policy_scope("float4_e2m1fn"):  # e2m1 has no NaN code
        model = nn.Sequential([nn.Dense(3)])
    model(np.ones((1, 2), np.float32))
    path = tmp_path / "fp4.npz"
    model.save(path)
    with np.load(path) as z:
        weight = z["weight_0"].copy()
    weight.reshape(-1)[0] = np.nan
    bad = _rewrite(path, tmp_path / "nan.npz", replace={"weight_0": weight})
    with pytest.raises(ValueError, match=r"holds 1 value\(s\) outside its format float4_e2m1fn, "
                                         r"e\.g\. nan at index \(0, 0\)"):
        nn.load_model(bad)
