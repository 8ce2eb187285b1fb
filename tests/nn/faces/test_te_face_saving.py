"""The Transformer Engine face's fp8 state in a saved model, and what TE's recipes lack.

The oracle is the un-saved model: TE saves each module's fp8 meta (scale and amax history of
every forward and backward tensor) in the module's ``_extra_state`` entry of ``state_dict()``
(transformer_engine/pytorch/module/base.py ``get_extra_state`` / ``set_extra_state``,
NVIDIA/TransformerEngine at d0067d0), so a model saved and loaded mid-training takes the next
step exactly as the one that was never saved. TE's recipes (common/recipe/__init__.py) are
dataclasses of settings, with no ``reset``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import nn
from nn.faces import te
from nn.faces import torch as nt

F32 = np.float32


def _batch(step: int) -> nn.Tensor:
    x = np.random.default_rng(step).standard_normal((4, 8)).astype(F32) * F32(1 + step)
    return nn.Tensor(x)


def _step(layer: te.Linear, recipe: te.recipe.DelayedScaling, step: int) -> np.ndarray:
    """One training step under ``recipe`` (forward in a block, backward, SGD); the output."""
    with te.autocast(recipe=recipe):
        y = layer(_batch(step))
    (y * y).sum().backward()
    for p in layer.parameters():
        p.assign(p.numpy() - F32(0.01) * p.grad.data)
    layer.zero_grad()
    return y.data.copy()


def _meta(layer: te.Linear) -> list[np.ndarray]:
    return [getattr(layer.fp8_meta[key], attr) for key in ("scaling_fwd", "scaling_bwd")
            for attr in ("scale", "amax_history")]


def _trained(history: int = 8) -> tuple[te.Linear, te.recipe.DelayedScaling]:
    layer = te.Linear(8, 6, seed=3)
    recipe = te.recipe.DelayedScaling(amax_history_len=history)
    for step in range(3):
        _step(layer, recipe, step)
    return layer, recipe


def _assert_next_step_equal(saved: te.Linear, loaded: te.Linear, history: int = 8) -> None:
    for a, b in zip(_meta(saved), _meta(loaded), strict=True):
        np.testing.assert_array_equal(a, b)
    y_saved = _step(saved, te.recipe.DelayedScaling(amax_history_len=history), 3)
    y_loaded = _step(loaded, te.recipe.DelayedScaling(amax_history_len=history), 3)
    np.testing.assert_array_equal(y_saved, y_loaded)
    for a, b in zip(_meta(saved), _meta(loaded), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(saved.weight.numpy(), loaded.weight.numpy())


def test_state_dict_carries_the_fp8_meta_under_extra_state_as_te():
    layer, _ = _trained()
    state = layer.state_dict()
    assert sorted(state) == ["_extra_state", "bias", "weight"]
    extra = state["_extra_state"]
    assert extra["kind"] == "delayed"
    assert sorted(extra["states"]) == ["grad_output", "input", "weight"]
    scales = layer.fp8_meta["scaling_fwd"].scale
    assert [extra["states"][op]["scale"] for op in ("input", "weight")] == list(scales[:2])
    assert all(s != 1.0 for s in scales[:2])  # trained: the scales moved off 1


def test_a_loaded_te_linear_takes_the_next_step_as_the_unsaved_one_bit_for_bit():
    layer, _ = _trained()
    fresh = te.Linear(8, 6, seed=99)
    fresh.load_state_dict(json.loads(json.dumps(layer.state_dict(), default=np.ndarray.tolist)))
    _assert_next_step_equal(layer, fresh)


def test_the_fp8_state_round_trips_through_the_torch_face_save_and_load(tmp_path):
    layer, _ = _trained()
    path = tmp_path / "model.pt"
    nt.save({"model": layer.state_dict(), "step": 3}, path)
    fresh = te.Linear(8, 6, seed=99)
    fresh.load_state_dict(nt.load(path)["model"])
    _assert_next_step_equal(layer, fresh)


def test_a_te_linear_inside_a_model_saves_its_state_under_its_path():
    def net():
        return nn.Sequential(nn.Linear(8, 8, seed=1), nn.Sequential(te.Linear(8, 6, seed=3)))

    model, other = net(), net()
    with te.autocast(recipe=te.recipe.DelayedScaling()):
        model(_batch(0))
    state = model.state_dict()
    assert [k for k in state if k.endswith("_extra_state")] == ["1.0._extra_state"]
    other.load_state_dict(state)
    inner, loaded = model.layers[1].layers[0], other.layers[1].layers[0]
    assert inner.fp8_meta.states and loaded.fp8_meta.states
    for a, b in zip(_meta(inner), _meta(loaded), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_state_dict_without_the_fp8_state_is_refused_strict_as_pytorch():
    layer, _ = _trained()
    state = layer.state_dict()
    del state["_extra_state"]
    with pytest.raises(RuntimeError, match='Missing key.*"_extra_state"'):
        te.Linear(8, 6).load_state_dict(state)


def test_a_bad_fp8_state_names_the_field_and_changes_nothing():
    layer, _ = _trained()
    state = layer.state_dict()
    state["_extra_state"]["states"]["input"]["scale"] = -1.0
    target = te.Linear(8, 6, seed=5)
    before = [a.copy() for a in (target.weight.numpy(), *_meta(target))]
    with pytest.raises(RuntimeError, match=r"_extra_state\.states\['input'\]\.scale"):
        target.load_state_dict(state)
    for a, b in zip(before, (target.weight.numpy(), *_meta(target)), strict=True):
        np.testing.assert_array_equal(a, b)
    state["_extra_state"] = {"kind": "fused"}
    with pytest.raises(RuntimeError, match="_extra_state must be a mapping of kind and states"):
        target.load_state_dict(state)


def test_a_loaded_state_under_a_longer_history_pads_as_a_new_recipe_object_does():
    layer, _ = _trained(history=8)
    fresh = te.Linear(8, 6, seed=99)
    fresh.load_state_dict(layer.state_dict())
    _assert_next_step_equal(layer, fresh, history=16)
    assert layer.fp8_meta["scaling_fwd"].amax_history.shape == (16, 3)


@pytest.mark.parametrize("recipe", [
    te.recipe.DelayedScaling(), te.recipe.Float8CurrentScaling(), te.recipe.MXFP8BlockScaling(),
    te.recipe.Float8BlockScaling(), te.recipe.NVFP4BlockScaling()])
def test_te_recipes_have_no_reset_and_the_error_names_the_module_reset(recipe):
    with pytest.raises(AttributeError, match=r"layer\.fp8_meta\.reset\(\)"):
        recipe.reset()


def _mean_of_nonzero(h):
    nz = h[h != 0]
    return nz.mean() if nz.size else 0.0


def _forward(layers, recipe, step):
    with te.autocast(recipe=recipe):
        return [layer(_batch(step)) for layer in layers]


def test_a_callable_algo_refuses_a_block_that_skips_a_module_te_would_roll():
    # TE's unfused update (a callable amax_compute_algo) rolls the history of every module
    # registered with the recipe, also of one that did not run in the block; refused here
    a, b = te.Linear(8, 6, seed=1), te.Linear(8, 6, seed=2)
    recipe = te.recipe.DelayedScaling(amax_history_len=4, amax_compute_algo=_mean_of_nonzero)
    _forward([a, b], recipe, 0)
    before = [x.copy() for x in _meta(a)]
    with pytest.raises(NotImplementedError, match="amax_compute_algo='max' or 'most_recent'"):
        _forward([a], recipe, 1)
    np.testing.assert_array_equal(before[0], _meta(a)[0])  # no update ran: scales kept
    _forward([a, b], recipe, 2)  # every module in the block: TE's unfused update, no refusal
    assert a.fp8_meta.states["input"].steps == b.fp8_meta.states["input"].steps == 2


def test_a_callable_algo_takes_a_block_after_the_skipped_module_is_gone():
    import gc

    a, b = te.Linear(8, 6, seed=1), te.Linear(8, 6, seed=2)
    recipe = te.recipe.DelayedScaling(amax_history_len=4, amax_compute_algo=_mean_of_nonzero)
    _forward([a, b], recipe, 0)
    del b
    gc.collect()
    _forward([a], recipe, 1)
    assert a.fp8_meta.states["input"].steps == 2


def test_the_fused_algorithms_skip_a_module_that_did_not_run_as_te():
    a, b = te.Linear(8, 6, seed=1), te.Linear(8, 6, seed=2)
    recipe = te.recipe.DelayedScaling(amax_history_len=4)  # "max": TE's fused kernel
    _forward([a, b], recipe, 0)
    held = [x.copy() for x in _meta(b)]
    _forward([a], recipe, 1)
    for x, y in zip(held, _meta(b), strict=True):
        np.testing.assert_array_equal(x, y)
    assert a.fp8_meta.states["input"].steps == 2


def test_a_bad_second_fp8_state_leaves_the_first_layer_as_it_was():
    def net():
        return nn.Sequential(te.Linear(8, 8, seed=1), te.Linear(8, 6, seed=2))

    model, target = net(), net()
    with te.autocast(recipe=te.recipe.DelayedScaling()):
        model(_batch(0))
    state = model.state_dict()
    state["1._extra_state"]["states"]["input"]["scale"] = 0.0
    with pytest.raises(RuntimeError, match=r"1\._extra_state.*scale must be"):
        target.load_state_dict(state)
    assert target.layers[0].fp8_meta.kind is None and not target.layers[0].fp8_meta.states
