"""The Transformer Engine face (``from nn.faces import te``): TE's idioms run with TE's result.

TE cannot be installed here, so each oracle is TE's rule written out in the test, with the TE
source it comes from (NVIDIA/TransformerEngine at d0067d0):

- transformer_engine/common/recipe/__init__.py: recipe classes, defaults, argument order;
- transformer_engine/pytorch/quantization.py: ``autocast``, ``fp8_autocast``,
  ``get_default_fp8_recipe``;
- transformer_engine/common/util/vectorized_pointwise.h: the per-tensor cast
  ``static_cast<fp8>(float(x) * scale)`` (satfinite);
- transformer_engine/common/util/ptx_arch_spec.cuh: ``float_to_e8m0``;
- transformer_engine/pytorch/utils.py: ``get_default_init_method`` (N(0, 0.023)).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import fpsim
import nn
from fpsim.blockwise import quantize_blockwise
from nn.faces import te
from nn.fp8 import DelayedScaling as NnDelayed

Format = te.recipe.Format


def _linear_step(layer, x, **autocast):
    """One forward and backward of ``layer`` under ``te.autocast(**autocast)``."""
    with te.autocast(**autocast):
        y = layer(nn.Tensor(x))
    y.sum().backward()
    return y.data


# --- autocast / fp8_autocast ------------------------------------------------------------------
def test_fp8_autocast_takes_enabled_first_as_transformer_engine():
    recipe = te.recipe.DelayedScaling()
    with te.fp8_autocast(True, False, recipe) as ctx:
        assert nn.fp8.active_recipe() is recipe and ctx.enabled
    with te.fp8_autocast(False, fp8_recipe=recipe):
        assert nn.fp8.active_recipe() is None


def test_autocast_enabled_quantizes_every_matmul_in_fp8():
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    layer = te.Linear(16, 8, seed=1)
    recipe = te.recipe.Float8CurrentScaling()
    fp8 = _linear_step(layer, x, enabled=True, recipe=recipe)
    plain = _linear_step(layer, x, enabled=False, recipe=recipe)
    assert [r.fmt for r in recipe.log.records] == ["float8_e4m3fn", "float8_e4m3fn",
                                                   "float8_e5m2"]
    w = np.asarray(layer.weight.data, np.float64)
    ref = x.astype(np.float64) @ w.T
    np.testing.assert_allclose(plain, ref, rtol=0, atol=1e-6 * np.abs(ref).max())
    assert np.abs(fp8 - plain).max() > 1e-3 * np.abs(ref).max()  # fp8 shows


def test_autocast_without_a_recipe_uses_one_delayed_scaling_of_1024_amaxes():
    with te.autocast() as first:
        pass
    with te.fp8_autocast() as second:
        pass
    assert first.recipe is second.recipe is te.get_default_fp8_recipe()
    assert isinstance(first.recipe, te.recipe.DelayedScaling)
    assert first.recipe.amax_history_len == 1024


def test_one_outlier_step_holds_the_scale_for_1023_steps_as_recorded_on_te():
    # the recorded behaviour: TE holds 448 / 100 = 4.48 for 1023 steps after an
    # outlier; with 16 amaxes it was back at 448 by step 16
    recipe = te.recipe.DelayedScaling()
    x = np.ones((1, 4), np.float32)
    outlier = np.full((1, 4), 100.0, np.float32)
    layer = te.Linear(4, 1, seed=0)
    for step in range(1024):  # one autocast block per step, as a TE training loop
        with te.fp8_autocast(fp8_recipe=recipe):
            layer(nn.Tensor(outlier if step == 0 else x))
    state = layer.fp8_meta.states["input"]  # the module's own state, as TE keeps it
    assert state.scale == float(np.float32(448) / np.float32(100))
    with te.fp8_autocast(fp8_recipe=recipe):
        layer(nn.Tensor(x))
    assert state.scale == 448.0


def test_autocast_flags_must_be_booleans():
    with pytest.raises(TypeError, match="enabled must be True or False"):
        te.fp8_autocast("yes")
    with pytest.raises(TypeError, match="calibrating must be True or False"):
        te.autocast(calibrating=1)


def test_amax_reduction_group_and_reduce_amax_are_accepted_in_one_process():
    x = np.random.default_rng(2).standard_normal((3, 8)).astype(np.float32)
    results = []
    for reduce in (True, False):
        recipe = te.recipe.DelayedScaling(reduce_amax=reduce)
        layer = te.Linear(8, 2, seed=3)
        for _ in range(2):
            with te.fp8_autocast(fp8_recipe=recipe, fp8_group=object()):
                y = layer(nn.Tensor(x))
        results.append(y.data)
    np.testing.assert_array_equal(*results)


# --- the per-tensor cast: two roundings ---------------------------------------------------------
def te_cast(x, scale, fp8_dtype, fp8_max):
    """static_cast<fp8>(float(x) * scale) with satfinite: float32 product, then the fp8 cast
    (ml_dtypes rounds nearest even; satfinite clips to +-max first)."""
    p = np.float32(x) * np.float32(scale)
    return np.clip(p, -fp8_max, fp8_max).astype(fp8_dtype).astype(np.float32)


def test_the_per_tensor_cast_rounds_the_float32_product_then_to_fp8():
    x = np.float32([64.0, 0.15178572, -3.3, 1e-3])  # step 1 sets the scale 448 / 64 = 7
    face, ours = te.recipe.DelayedScaling(), NnDelayed()
    for recipe in (face, ours):
        recipe.quantize(x, "t", "forward")
    qf, inv = face.quantize(x, "t", "forward")
    qo, _ = ours.quantize(x, "t", "forward")
    want = te_cast(x, 7.0, ml_dtypes.float8_e4m3fn, 448.0)
    np.testing.assert_array_equal(qf, want)
    assert inv == float(np.float32(1) / np.float32(7))
    # 0.15178572 * 7 = 1.0625 + 1.5e-8: float32 gives the E4M3 midpoint 1.0625, which ties to
    # 1.0; rounded once (nn.fp8's own rule) the exact product goes up to 1.125
    assert (qf[1], qo[1]) == (1.0, 1.125)


# --- recipes ----------------------------------------------------------------------------------
def test_recipe_defaults_and_argument_order_are_transformer_engine_s():
    d = te.recipe.DelayedScaling(2, Format.E4M3, 16, "most_recent")
    assert (d.margin, d.fp8_format, d.amax_history_len, d.amax_compute_algo) == (
        2, "e4m3", 16, "most_recent")
    d = te.recipe.DelayedScaling()
    assert (d.margin, d.te_format, d.amax_history_len, d.amax_compute_algo, d.reduce_amax) == (
        0, Format.HYBRID, 1024, "max", True)
    c = te.recipe.Float8CurrentScaling()
    assert (c.use_power_2_scales, c.te_format) == (False, Format.HYBRID)
    m = te.recipe.MXFP8BlockScaling()
    assert (m.margin, m.te_format, m.scale_rounding) == (0, Format.E4M3, "ceil")
    b = te.recipe.Float8BlockScaling()
    assert (b.te_format, b.x_block_scaling_dim, b.w_block_scaling_dim,
            b.grad_block_scaling_dim, b.power_2) == (Format.E4M3, 1, 2, 1, True)
    assert te.common.recipe is te.recipe


@pytest.mark.parametrize("fmt,backward", [(Format.E4M3, fpsim.E4M3FN),
                                          (Format.HYBRID, fpsim.E5M2)])
def test_format_e4m3_and_hybrid_pick_the_gradient_format(fmt, backward):
    for recipe in (te.recipe.DelayedScaling(fp8_format=fmt),
                   te.recipe.Float8CurrentScaling(fp8_format=fmt)):
        assert recipe.format("forward") == fpsim.E4M3FN and recipe.format("backward") == backward
    assert Format.HYBRID.value.max_fwd == 448 and Format.HYBRID.value.max_bwd == 57344


def test_pure_e5m2_is_refused_as_transformer_engine_refuses_it():
    with pytest.raises(ValueError, match="pure E5M2 training is not supported"):
        te.recipe.DelayedScaling(fp8_format=Format.E5M2)
    with pytest.raises(ValueError, match="fp8_format must be Format.E4M3 or Format.HYBRID"):
        te.recipe.DelayedScaling(fp8_format="hybrid")


def te_unfused(amaxes, fp8_max, history_len, algo):
    """_amax_and_scale_update of transformer_engine/pytorch/quantization.py (the path TE takes
    for a callable amax_compute_algo): stage the amax at position 0, amax = algo(history),
    roll (always), scale = (fp8_max / amax) in float32, kept for 0 or non-finite."""
    h, scale, out = np.zeros(history_len, np.float32), np.float32(1), []
    for a in amaxes:
        h[0] = a
        amax = np.float32(algo(h.copy()))
        h = np.roll(h, -1)
        h[0] = 0
        if np.isfinite(amax) and amax > 0:
            scale = np.float32(fp8_max) / amax
        out.append(float(scale))
    return out


def test_a_callable_amax_compute_algo_follows_te_unfused_update():
    def mean_of_nonzero(h):
        nz = h[h != 0]
        return nz.mean() if nz.size else 0.0

    recipe = te.recipe.DelayedScaling(amax_history_len=4, amax_compute_algo=mean_of_nonzero)
    state = recipe.new_state("forward")
    amaxes = [2.0, 4.0, 0.0, 8.0, 1.0, 1.0, 1.0, 1.0]
    assert [state.update(a) for a in amaxes] == te_unfused(amaxes, 448.0, 4, mean_of_nonzero)


def test_current_scaling_power_2_scales_and_amax_epsilon_reach_the_cast():
    x = np.float32([0.3, -3.0])
    recipe = te.recipe.Float8CurrentScaling(use_power_2_scales=True, amax_epsilon=4.0)
    q, inv = recipe.quantize(x, "t", "forward")
    assert recipe.fp8_quant_fwd_inp == te.recipe.QParams(True, 4.0)
    assert inv == 1 / 64  # 448 / max(3, 4) = 112 -> 64
    np.testing.assert_array_equal(q, te_cast(x, 64.0, ml_dtypes.float8_e4m3fn, 448.0))


def float_to_e8m0(val):
    """ptx_arch_spec.cuh's software float_to_e8m0 (pre-Blackwell), on float32 bits: round the
    biased exponent up when the mantissa is non-zero, except at 0xFE (satfinite) and for
    values up to 2^-127."""
    bits = np.asarray(val, np.float32).view(np.uint32)
    exponent = (bits >> 23).astype(np.int64)
    mantissa = bits & 0x7FFFFF
    up = (mantissa > 0) & (exponent != 0xFE) & ~((exponent == 0) & (mantissa <= 0x400000))
    return exponent + up


def test_mxfp8_block_scale_is_te_float_to_e8m0_of_amax_times_the_reciprocal_max():
    # every float32 amax of the binade [448, 896): TE's rule equals "ceil" (the smallest e with
    # amax <= 448 * 2^e), the rule te.recipe.MXFP8BlockScaling passes to fpsim.mx
    lo, hi = np.float32(448).view(np.uint32), np.float32(896).view(np.uint32)
    amax = np.arange(lo, hi + 1, 97, dtype=np.uint32).view(np.float32)
    te_e = float_to_e8m0(amax * np.float32(1 / 448)) - 127
    ceil_e = np.where(amax > 448 * 2.0**0, 1, 0)  # amax in [448, 896]: e is 0 at 448, else 1
    np.testing.assert_array_equal(te_e, ceil_e)
    for k in (-100, -3, 5, 100):  # other binades: the same, shifted
        a = (amax * np.float32(2.0**k)).astype(np.float32)
        np.testing.assert_array_equal(float_to_e8m0(a * np.float32(1 / 448)) - 127, ceil_e + k)


def test_mxfp8_recipe_quantizes_with_the_round_up_rule_and_fpsim_mx_keeps_ocp():
    x = np.float32([[500.0] + [1.0] * 31])
    q, _ = te.recipe.MXFP8BlockScaling().quantize(x, "t/input", "forward")
    assert q[0, 0] == 512.0  # scale 2: 500 -> 250 -> 256 (E4M3), the block max not clipped
    np.testing.assert_array_equal(q, fpsim.mx.quantize(x, "mxfp8_e4m3", scale_rounding="ceil"))
    assert fpsim.mx.quantize(x, "mxfp8_e4m3")[0, 0] == 448.0  # OCP floor: clipped
    assert te.recipe.MXFP8BlockScaling(fp8_format=Format.HYBRID).format("backward").name == \
        "mxfp8_e5m2"


def test_float8_block_scaling_runs_a_te_linear_as_hand_written_tiles():
    x = np.random.default_rng(4).standard_normal((5, 200)).astype(np.float32)
    layer = te.Linear(200, 3, seed=5)
    with te.fp8_autocast(fp8_recipe=te.recipe.Float8BlockScaling()):
        y = layer(nn.Tensor(x)).data
    w = np.asarray(layer.weight.data)
    want = (quantize_blockwise(x, "e4m3fn", (1, 128)).astype(np.float64)
            @ quantize_blockwise(w.T, "e4m3fn", (128, 128)))
    np.testing.assert_allclose(y, want, rtol=0, atol=1e-6 * np.abs(want).max())


@pytest.mark.parametrize("make,match", [
    (lambda: te.recipe.DelayedScaling(fp8_dpa=True), "fp8_dpa=True is not supported"),
    (lambda: te.recipe.DelayedScaling(scaling_factor_compute_algo=max),
     "scaling_factor_compute_algo"),
    (lambda: te.recipe.MXFP8BlockScaling(enable_2d_quantization=True),
     "enable_2d_quantization"),
])
def test_an_option_nn_does_not_model_raises_naming_it(make, match):
    with pytest.raises(NotImplementedError, match=match):
        make()


# --- te.Linear --------------------------------------------------------------------------------
def test_linear_initialises_as_transformer_engine_normal_0_023_and_zero_bias():
    layer = te.Linear(64, 32, seed=7)
    want = np.random.default_rng(7).normal(0.0, 0.023, (32, 64)).astype(np.float32)
    np.testing.assert_array_equal(layer.weight.data, want)
    assert layer.weight.shape == (32, 64) and np.all(layer.bias.data == 0)
    big = te.Linear(512, 512, seed=8).weight.data
    assert abs(big.std() - 0.023) < 0.001 and abs(big.mean()) < 0.001


@pytest.mark.parametrize("dtype,name", [(None, "float32"), ("bfloat16", "bfloat16"),
                                        ("float16", "float16")])
def test_linear_params_dtype_sets_the_parameters_format(dtype, name):
    class TorchLike:  # str() as a torch dtype prints
        def __str__(self):
            return f"torch.{name}"

    for value in (dtype, TorchLike()):
        layer = te.Linear(8, 4, params_dtype=value, seed=9)
        assert layer.weight.fmt.name == name
        want = np.random.default_rng(9).normal(0.0, 0.023, (4, 8))
        oracle = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16,
                  "float16": np.float16}[name]
        np.testing.assert_array_equal(layer.weight.data.astype(np.float64),
                                      want.astype(oracle).astype(np.float64))
    with pytest.raises(ValueError, match="params_dtype must be one of"):
        te.Linear(8, 4, params_dtype="float8")


def test_linear_init_method_fills_the_weight():
    layer = te.Linear(3, 2, init_method=lambda w: w.fill(0.5))
    assert np.all(layer.weight.data == 0.5)


def test_a_zero_input_step_leaves_the_delayed_state_as_it_was():
    recipe = te.recipe.DelayedScaling(amax_history_len=4)
    layer = te.Linear(4, 2, seed=0, bias=False)
    with te.fp8_autocast(fp8_recipe=recipe):
        layer(nn.Tensor(np.full((1, 4), 2.0, np.float32)))
    state = layer.fp8_meta.states["input"]
    before = (state.scale, state.amax_history.copy())
    with te.fp8_autocast(fp8_recipe=recipe):
        layer(nn.Tensor(np.zeros((1, 4), np.float32)))
    assert state.scale == before[0] == 224.0
    np.testing.assert_array_equal(state.amax_history, before[1])
    assert math.isfinite(state.scale)


def test_a_te_recipe_state_does_not_load_into_nn_own_recipe_of_the_other_cast():
    face, ours = te.recipe.DelayedScaling(), NnDelayed()
    face.quantize(np.float32([2.0]), "t", "forward")
    with pytest.raises(ValueError, match="recipe: the state is of the recipe"):
        ours.load_state_dict(face.state_dict())
    again = te.recipe.DelayedScaling()
    again.load_state_dict(face.state_dict())
    assert again.states["t"].scale == 224.0


def test_one_autocast_object_cannot_be_entered_twice_at_once_as_in_te():
    block = te.autocast(recipe=te.recipe.DelayedScaling())
    with block:
        with pytest.raises(RuntimeError, match="cannot be entered more than once"):
            block.__enter__()
    with block:  # after its exit it can be used again
        assert nn.fp8.active_recipe() is block.recipe
