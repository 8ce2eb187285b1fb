"""The Transformer Engine face's scaling state: calibration, state owned by each module, and
which matmuls ``te.autocast`` quantizes.

TE cannot be installed here; the oracle is TE's rule written out below from its source
(NVIDIA/TransformerEngine at d0067d0):

- transformer_engine/pytorch/tensor/float8_tensor.py, ``Float8Quantizer.calibrate``:
  ``amax.copy_(max(-amin, amax))``, where ``amax`` is position 0 of the module's amax history
  (``DelayedScalingRecipeState.make_quantizers``); module/linear.py calls it for the input and
  the weight ``if not fp8 and fp8_calibration``;
- common/cast kernels: the cast ``atomicMaxFloat``s the tensor's amax into that position;
- common/recipe/delayed_scaling.cu ``kernel_bulk`` (the fused update at the autocast exit): a
  zero staged amax skips; else amax = max of the window, the window rotates
  ``[cur, a1, ..., a(L-1)] -> [0, a2, ..., a(L-1), cur]``, scale = fp8_max / amax (float32);
- module/base.py ``set_meta_tensor`` / ``adjust_amax_history_length``: a module keeps its
  state for a recipe of the same kind (history truncated to its first rows or zero-padded)
  and starts afresh for another kind;
- quantization.py ``autocast``: only TE's modules quantize inside it.
"""

from __future__ import annotations

import numpy as np
import pytest

import nn
import nn.functions as F
from nn.faces import te

F32 = np.float32


class TEDelayedState:
    """One tensor's delayed-scaling state as TE's source keeps it (see the module docstring)."""

    def __init__(self, history_len, fp8_max=448.0):
        self.h = np.zeros(history_len, F32)
        self.scale = F32(1)
        self.fp8_max = F32(fp8_max)

    def calibrate(self, x):
        self.h[0] = F32(np.max(np.abs(x)))  # copy_: the last calibration wins

    def cast_and_update(self, x):
        """One fp8 forward: the cast with the current scale, its amax maxed into position 0,
        then the fused update; returns the scale the cast used."""
        used = self.scale
        self.h[0] = max(self.h[0], F32(np.max(np.abs(x))))
        if self.h[0] != 0:
            amax = self.h.max()
            self.h = np.roll(self.h, -1)
            self.h[0] = 0
            self.scale = self.fp8_max / amax
        return float(used)


def _x(amax, shape=(3, 8), seed=0):
    """A float32 input whose largest magnitude is exactly ``amax``."""
    x = np.random.default_rng(seed).uniform(-1, 1, shape).astype(F32) * F32(amax) / 2
    x[0, 0] = F32(amax)
    return x


def _step(layer, x, **autocast):
    """One forward and backward of ``layer`` under ``te.autocast(**autocast)`` (outside any
    block for ``outside=True``): the output and the weight's gradient."""
    layer.weight.grad = None
    if autocast.pop("outside", False):
        y = layer(nn.Tensor(x))
    else:
        with te.autocast(**autocast):
            y = layer(nn.Tensor(x))
    y.sum().backward()
    return y.data.copy(), np.asarray(layer.weight.grad.data).copy()


# --- calibration -------------------------------------------------------------------------------
@pytest.mark.parametrize("params_dtype", ["float32", "bfloat16"])
def test_calibration_runs_exactly_as_without_fp8(params_dtype):
    layer = te.Linear(8, 4, params_dtype=params_dtype, seed=1)
    x = _x(3.0)
    outside = _step(layer, x, outside=True)
    off = _step(layer, x, enabled=False)
    calibrating = _step(layer, x, enabled=False, calibrating=True,
                        recipe=te.recipe.DelayedScaling())
    for got in (off, calibrating):
        np.testing.assert_array_equal(got[0], outside[0])
        np.testing.assert_array_equal(got[1], outside[1])
    assert layer.fp8_meta.states["input"].amax_history[0] == np.max(np.abs(x))


def test_calibration_stages_the_last_amaxes_and_the_first_fp8_update_uses_them_as_te():
    layer = te.Linear(8, 4, seed=2, bias=False)
    recipe = te.recipe.DelayedScaling(amax_history_len=4)
    w = np.asarray(layer.weight.data)
    te_input, te_weight = TEDelayedState(4), TEDelayedState(4)
    for amax in (3.0, 7.0, 5.0):  # calibration keeps the last amax, not the largest
        x = _x(amax)
        _step(layer, x, enabled=False, calibrating=True, recipe=recipe)
        te_input.calibrate(x)
        te_weight.calibrate(w)
    fwd, bwd = layer.fp8_meta["scaling_fwd"], layer.fp8_meta["scaling_bwd"]
    np.testing.assert_array_equal(fwd.amax_history[:, 0], te_input.h)
    np.testing.assert_array_equal(fwd.amax_history[:, 1], te_weight.h)
    assert fwd.amax_history[0, 0] == 5.0 and np.all(fwd.scale == 1)
    assert bwd.amax_history.size == 0 and np.all(bwd.scale == 1)  # gradients: never
    used = []
    for amax in (2.0, 2.0, 9.0):  # fp8 steps, a new recipe object of the same kind
        x = _x(amax, seed=int(amax))
        log = te.recipe.DelayedScaling(amax_history_len=4)
        _step(layer, x, recipe=log)
        used.append((log.log.records[0].scale, log.log.records[1].scale))
        want = (te_input.cast_and_update(x), te_weight.cast_and_update(w))
        assert used[-1] == want
        fwd = layer.fp8_meta["scaling_fwd"]
        np.testing.assert_array_equal(fwd.amax_history[:, 0], te_input.h)
        np.testing.assert_array_equal(fwd.amax_history[:, 1], te_weight.h)
        assert (fwd.scale[0], fwd.scale[1]) == (te_input.scale, te_weight.scale)
    # the first fp8 cast still used scale 1; the calibrated 5 then set 448 / 5 (not 448 / 2)
    assert used[0][0] == 1.0 and used[1][0] == float(F32(448) / F32(5))


def test_calibration_inside_bf16_autocast_records_the_amaxes_of_the_bf16_operands():
    import ml_dtypes

    layer = te.Linear(8, 4, seed=19, init_method=lambda w: w.fill(1 + 2.0**-12))
    x = _x(1 + 2.0**-11)  # neither amax is a bfloat16
    # TE's Gemma tutorial: te.autocast(enabled=False, calibrating=True) inside torch.autocast
    with nn.autocast("cpu", dtype="bfloat16"), te.autocast(enabled=False, calibrating=True,
                                                          recipe=te.recipe.DelayedScaling()):
        layer(nn.Tensor(x))
    fwd = layer.fp8_meta["scaling_fwd"].amax_history[0]
    want = [np.float32(ml_dtypes.bfloat16(a)) for a in (1 + 2.0**-11, 1 + 2.0**-12)]
    assert list(fwd[:2]) == want == [1.0, 1.0]


def test_calibration_without_a_recipe_then_fp8_without_one_as_te_mnist_example():
    layer = te.Linear(8, 4, seed=3)
    x = _x(4.0)
    with te.autocast(enabled=False, calibrating=True):  # TE's examples/pytorch/mnist
        layer(nn.Tensor(x))
    with te.autocast(enabled=True):
        layer(nn.Tensor(x))
    state = layer.fp8_meta.states["input"]
    assert state.history_len == 1024 and state.scale == 448 / 4
    assert state.amax_history[-1] == 4.0


def test_calibration_records_nothing_under_current_scaling_as_te():
    layer = te.Linear(8, 4, seed=4)
    _step(layer, _x(3.0), enabled=False, calibrating=True,
          recipe=te.recipe.Float8CurrentScaling())
    assert layer.fp8_meta.states == {}


def test_calibrating_with_fp8_enabled_is_a_plain_fp8_run():
    x = _x(3.0)
    runs = []
    for calibrating in (False, True):
        layer = te.Linear(8, 4, seed=5)
        outs = [_step(layer, x, calibrating=calibrating,
                      recipe=te.recipe.DelayedScaling()) for _ in range(2)]
        runs.append((outs, layer.fp8_meta["scaling_fwd"].amax_history))
    for a, b in zip(runs[0][0], runs[1][0], strict=True):
        np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


def test_an_fp8_block_inside_calibration_quantizes_and_does_not_calibrate():
    layer = te.Linear(8, 4, seed=6)
    recipe = te.recipe.DelayedScaling()
    with te.autocast(enabled=False, calibrating=True, recipe=recipe):
        with te.autocast(enabled=True, recipe=recipe):
            layer(nn.Tensor(_x(2.0)))
            layer(nn.Tensor(_x(1.0)))  # the cast's amax is staged: max(2, 1), not replaced
    assert [r.scale for r in recipe.log.records] == [1.0] * 4
    # TE updates at the exit of the outermost block only if it is enabled: here it is not
    state = layer.fp8_meta.states["input"]
    assert (state.scale, state.amax_history[0]) == (1.0, 2.0)
    with te.autocast(recipe=recipe):
        layer(nn.Tensor(_x(0.5)))
    assert state.scale == 224.0 and state.amax_history[-1] == 2.0


# --- state owned by each module ----------------------------------------------------------------
def test_two_linears_under_one_recipe_keep_separate_histories_as_alone():
    xa, xb = _x(2.0, seed=1), _x(8.0, seed=2)
    shared = te.recipe.DelayedScaling(amax_history_len=8)
    a, b = te.Linear(8, 4, seed=7), te.Linear(8, 4, seed=8)
    alone_a, alone_b = te.Linear(8, 4, seed=7), te.Linear(8, 4, seed=8)
    for _ in range(3):
        got_a, got_b = _step(a, xa, recipe=shared), _step(b, xb, recipe=shared)
        want_a = _step(alone_a, xa, recipe=te.recipe.DelayedScaling(amax_history_len=8))
        want_b = _step(alone_b, xb, recipe=te.recipe.DelayedScaling(amax_history_len=8))
        for got, want in ((got_a, want_a), (got_b, want_b)):
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
    for layer, alone in ((a, alone_a), (b, alone_b)):
        for key in ("scaling_fwd", "scaling_bwd"):
            np.testing.assert_array_equal(layer.fp8_meta[key].amax_history,
                                          alone.fp8_meta[key].amax_history)
    assert (a.fp8_meta.states["input"].scale, b.fp8_meta.states["input"].scale) == (224, 56)
    assert shared.states == {}  # the recipe is configuration only


def test_two_models_with_layers_of_one_name_share_a_recipe_without_mixing():
    recipe = te.recipe.DelayedScaling()
    first, second = te.Linear(8, 4, name="proj", seed=9), te.Linear(8, 4, name="proj", seed=9)
    with te.autocast(recipe=recipe):
        first(nn.Tensor(_x(2.0)))
        second(nn.Tensor(_x(4.0)))
    assert first.fp8_meta.states["input"].scale == 224.0
    assert second.fp8_meta.states["input"].scale == 112.0


def test_a_new_history_length_truncates_or_pads_the_window_as_te():
    layer = te.Linear(8, 4, seed=10)
    for amax in (1.0, 2.0, 3.0):
        _step(layer, _x(amax), recipe=te.recipe.DelayedScaling(amax_history_len=4))
    window = layer.fp8_meta.states["input"].amax_history.copy()  # [0, 1, 2, 3]
    layer(nn.Tensor(np.zeros((3, 8), F32)))  # (outside autocast: nothing changes)
    with te.autocast(recipe=te.recipe.DelayedScaling(amax_history_len=2)):
        layer(nn.Tensor(np.zeros((3, 8), F32)))  # a zero amax: no update, the window shows
    np.testing.assert_array_equal(layer.fp8_meta.states["input"].amax_history, window[:2])
    with te.autocast(recipe=te.recipe.DelayedScaling(amax_history_len=5)):
        layer(nn.Tensor(np.zeros((3, 8), F32)))
    np.testing.assert_array_equal(layer.fp8_meta.states["input"].amax_history,
                                  np.r_[window[:2], 0, 0, 0])
    assert layer.fp8_meta.states["input"].scale == float(F32(448) / F32(3))  # kept


def test_another_kind_of_recipe_starts_the_module_from_fresh_states():
    layer = te.Linear(8, 4, seed=11)
    _step(layer, _x(2.0), recipe=te.recipe.DelayedScaling())
    _step(layer, _x(2.0), recipe=te.recipe.Float8CurrentScaling())
    again = te.recipe.DelayedScaling()
    _step(layer, _x(2.0), recipe=again)
    assert again.log.records[0].scale == 1.0  # TE rebuilds the state for the other kind


# --- which matmuls te.autocast quantizes ---------------------------------------------------------
def test_only_te_modules_quantize_inside_te_autocast():
    x = _x(3.0)
    torch_linear, te_linear = nn.Linear(8, 4, seed=12), te.Linear(4, 2, seed=13)
    model = nn.Sequential([torch_linear, te_linear])
    w = np.asarray(torch_linear.weight.data)
    outside = model(nn.Tensor(x)).data
    first_outside = torch_linear(nn.Tensor(x)).data
    bare_outside = F.matmul(nn.Tensor(x), nn.Tensor(w.T)).data
    recipe = te.recipe.Float8CurrentScaling()
    with te.autocast(recipe=recipe):
        inside = model(nn.Tensor(x)).data
        first_inside = torch_linear(nn.Tensor(x)).data
        bare_inside = F.matmul(nn.Tensor(x), nn.Tensor(w.T)).data
    np.testing.assert_array_equal(first_inside, first_outside)
    np.testing.assert_array_equal(bare_inside, bare_outside)
    assert {r.name.split("/")[0] for r in recipe.log.records} == {te_linear.name}
    assert not np.array_equal(inside, outside)  # the te.Linear inside the model ran in fp8


# --- when the delayed-scaling states update (TE's global amax buffers) -------------------------
def test_two_calls_in_one_block_cast_with_the_block_scale_and_update_once():
    layer = te.Linear(8, 4, seed=14)
    recipe = te.recipe.DelayedScaling(amax_history_len=4)
    oracle = TEDelayedState(4)
    xs = [_x(2.0), _x(8.0, seed=1), _x(3.0, seed=2)]
    with te.autocast(recipe=recipe):
        for x in xs[:2]:
            layer(nn.Tensor(x))
    with te.autocast(recipe=recipe):
        layer(nn.Tensor(xs[2]))
    scales = [r.scale for r in recipe.log.records if r.name.endswith("/input")]
    assert scales == [1.0, 1.0, float(F32(448) / F32(8))]
    oracle.h[0] = max(np.abs(xs[0]).max(), np.abs(xs[1]).max())  # both casts maxed into 0
    assert oracle.cast_and_update(np.zeros(1)) == 1.0
    oracle.cast_and_update(xs[2])
    state = layer.fp8_meta.states["input"]
    np.testing.assert_array_equal(state.amax_history, oracle.h)
    assert state.scale == oracle.scale and state.steps == 2


def test_blocks_without_gradients_do_not_update_and_their_amaxes_join_the_next_update():
    layer = te.Linear(8, 4, seed=15)
    recipe = te.recipe.DelayedScaling(amax_history_len=4)
    _step(layer, _x(2.0), recipe=recipe)
    with nn.no_grad(), te.autocast(recipe=recipe):  # an evaluation pass, as TE's test loops
        layer(nn.Tensor(_x(100.0)))
    state = layer.fp8_meta.states["input"]
    assert (state.scale, state.amax_history[0]) == (224.0, 100.0)  # staged, not applied
    _step(layer, _x(1.0), recipe=recipe)
    assert recipe.log.records[-3].name.endswith("/input")
    assert recipe.log.records[-3].scale == 224.0  # the training cast still used 224
    assert state.scale == float(F32(448) / F32(100)) and list(state.amax_history) == [0, 0, 2,
                                                                                      100]


def test_gradient_states_update_once_at_the_end_of_the_block_backward():
    layer = te.Linear(4, 4, seed=16)
    recipe = te.recipe.DelayedScaling(amax_history_len=4)
    with te.autocast(recipe=recipe):
        y = layer(layer(nn.Tensor(_x(2.0, shape=(3, 4)))))  # one module, two calls
    y.sum().backward()
    grads = [r for r in recipe.log.records if r.name.endswith("grad_output")]
    assert len(grads) == 2 and all(r.scale == 1.0 for r in grads)  # the block's scale
    state = layer.fp8_meta.states["grad_output"]
    amax = F32(max(r.amax for r in grads))
    assert state.steps == 1 and state.scale == float(F32(57344) / amax)
    assert list(state.amax_history) == [0, 0, 0, amax]
