"""nn.fp8.NVFP4BlockScaling, each component against a float64 + ml_dtypes reference written
here (TE's NVFP4 recipe: 1-D and 16x16 blocks, RHT on wgrad operands, stochastic rounding of
gradients only, 4/6, the bf16 tail), and a small model that trains with it."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import fpsim
import nn
from fpsim import mx
from nn.fp8 import NVFP4BlockScaling
from nn.fp8.nvfp4 import four_over_six

RNG = np.random.default_rng(11)
TE_SIGNS = [1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1]


def e4m3(v):
    return np.clip(v, 0, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)


def e2m1(v):
    return np.clip(v, -6, 6).astype(ml_dtypes.float4_e2m1fn).astype(np.float64)


def nvfp4_reference(x, groups):
    """x (float32) quantized to NVFP4 with blocks given as an integer label per element:
    tensor scale float32(amax) / float32(2688), block scale e4m3(amax_b / (6 ts)), elements
    e2m1(x / (s ts)) * s * ts, rounded once to float32."""
    v = x.astype(np.float64)
    ts = float(np.float32(np.max(np.abs(v))) / np.float32(6 * 448))
    out = np.empty_like(v)
    for g in np.unique(groups):
        sel = groups == g
        d = e4m3(np.max(np.abs(v[sel])) / (6 * ts)) * ts
        out[sel] = e2m1(v[sel] / d) * d if d > 0 else 0.0
    return out.astype(np.float32)


def row_blocks(shape, axis):
    """Block labels of 16 consecutive elements along ``axis`` of a 2-D shape."""
    r, c = np.indices(shape)
    along, across = (c, r) if axis in (-1, 1) else (r, c)
    return across * 10_000 + along // 16


def rht(x, axis):
    """Each whole block of 16 along axis times diag(signs) @ H / 4 (H from popcounts)."""
    h = np.array([[(-1) ** bin(i & j).count("1") for j in range(16)] for i in range(16)])
    m = np.diag(TE_SIGNS) @ h / 4.0
    moved = np.moveaxis(x.astype(np.float64), axis, -1).copy()
    for b in range(moved.shape[-1] // 16):
        moved[..., 16 * b:16 * b + 16] = moved[..., 16 * b:16 * b + 16] @ m
    return np.moveaxis(moved, -1, axis)


def test_activations_are_one_dimensional_blocks_of_sixteen_along_the_inner_axis():
    x = (RNG.standard_normal((6, 40)) * 10).astype(np.float32)
    q, inv = NVFP4BlockScaling().quantize(x, "d/Linear/input", "forward", axis=-1)
    assert inv == 1.0
    np.testing.assert_array_equal(q, nvfp4_reference(x, row_blocks(x.shape, -1)))


def test_weights_are_sixteen_by_sixteen_tiles_the_same_for_forward_and_transpose():
    w = (RNG.standard_normal((40, 24)) * 3).astype(np.float32)
    w[3, 20] = 50.0  # one tile's outlier
    recipe = NVFP4BlockScaling()
    fwd, _ = recipe.quantize(w, "d/Linear/weight", "forward", axis=-2)
    back, _ = recipe.quantize(w, "d/Linear/weight_t", "forward", axis=-1)
    r, c = np.indices(w.shape)
    np.testing.assert_array_equal(fwd, nvfp4_reference(w, (r // 16) * 100 + c // 16))
    np.testing.assert_array_equal(back, fwd)
    assert recipe.log.records[0].fmt == "nvfp4_2d"
    assert recipe.changes["tiled_tensors"] == 2


def test_disabling_2d_blocks_the_weight_along_the_inner_axis():
    w = (RNG.standard_normal((40, 24))).astype(np.float32)
    q, _ = NVFP4BlockScaling(disable_2d_quantization=True).quantize(
        w, "d/Linear/weight", "forward", axis=-2)
    np.testing.assert_array_equal(q, nvfp4_reference(w, row_blocks(w.shape, -2)))


@pytest.mark.parametrize("operand, role", [("input_t", "forward"), ("grad_output_t", "backward")])
def test_wgrad_operands_are_hadamard_transformed_along_the_token_axis(operand, role):
    a = (RNG.standard_normal((48, 5)) * 4).astype(np.float32)
    a[7, 2] = 300.0
    recipe = NVFP4BlockScaling(disable_stochastic_rounding=True)
    q, _ = recipe.quantize(a, f"d/Linear/{operand}", role, axis=-2)
    t = rht(a, 0).astype(np.float32)  # exact here: sums of 16 float32 values over 4
    np.testing.assert_array_equal(q, nvfp4_reference(t, row_blocks(a.shape, -2)))
    assert recipe.changes["rht_tensors"] == 1


def test_the_transform_leaves_the_weight_gradient_as_it_was_without_quantization():
    a, g = RNG.standard_normal((64, 6)), RNG.standard_normal((64, 3))
    np.testing.assert_allclose(rht(a, 0).T @ rht(g, 0), a.T @ g, rtol=1e-12, atol=1e-12)


def test_dgrad_operands_and_disabled_rht_are_not_transformed():
    g = (RNG.standard_normal((32, 8))).astype(np.float32)
    q, _ = NVFP4BlockScaling(disable_stochastic_rounding=True).quantize(
        g, "d/Linear/grad_output", "backward", axis=-1)
    np.testing.assert_array_equal(q, nvfp4_reference(g, row_blocks(g.shape, -1)))
    recipe = NVFP4BlockScaling(disable_rht=True, disable_stochastic_rounding=True)
    q, _ = recipe.quantize(g, "d/Linear/grad_output_t", "backward", axis=-2)
    np.testing.assert_array_equal(q, nvfp4_reference(g, row_blocks(g.shape, -2)))
    assert recipe.changes["rht_tensors"] == 0


def test_gradients_round_stochastically_without_bias_and_activations_to_nearest():
    g = np.full((1, 16), 0.7, np.float32)
    g[0, 0] = 6.0  # the block amax: 0.7 lands between two E2M1 steps of the block
    recipe = NVFP4BlockScaling()
    draws = np.stack([recipe.quantize(g, "d/Linear/grad_output", "backward")[0]
                      for _ in range(400)])
    ts = float(np.float32(6.0) / np.float32(2688))
    d = e4m3(6.0 / (6 * ts)) * ts
    lo, hi = np.floor(0.7 / d / 0.5) * 0.5 * d, np.ceil(0.7 / d / 0.5) * 0.5 * d
    assert set(np.unique(draws[:, 0, 1:])) == {np.float32(lo), np.float32(hi)}
    share_up = np.mean(draws[:, 0, 1:] == np.float32(hi))
    p_up = (0.7 - lo) / (hi - lo)
    assert abs(share_up - p_up) < 4 * np.sqrt(p_up * (1 - p_up) / draws[:, 0, 1:].size)
    x, _ = recipe.quantize(g, "d/Linear/input", "forward")
    np.testing.assert_array_equal(x, nvfp4_reference(g, row_blocks(g.shape, -1)))
    assert recipe.changes["stochastic_tensors"] == 400


def test_four_over_six_keeps_the_scale_of_smaller_squared_error():
    rows = np.array([[6.0, 4.6, 4.6, 4.6], [6.0, 1.0, 1.0, 1.0]])
    vals, to4, saturated = four_over_six(rows, 1.0)
    # scale to 4: divisor 1.5, 4.6 / 1.5 = 3.07 -> 3 -> 4.5; to 6: 4.6 -> 4
    np.testing.assert_array_equal(vals[0], [6.0, 4.5, 4.5, 4.5])
    # 1.0 / 1.5 = 0.67 -> 0.5 -> 0.75 would be worse: 6 stays
    np.testing.assert_array_equal(vals[1], [6.0, 1.0, 1.0, 1.0])
    assert to4.tolist() == [True, False] and saturated == 0


def test_four_over_six_is_never_worse_than_the_plain_nvfp4_block():
    x = (RNG.standard_normal((64, 16)) * RNG.uniform(0.1, 10, (64, 1))).astype(np.float32)
    plain = mx.quantize(x, "nvfp4").astype(np.float64)
    ts = mx.tensor_scale_of(float(np.max(np.abs(x))), mx.BLOCK_FORMATS["nvfp4"])
    vals, to4, _ = four_over_six(x.astype(np.float64), ts)
    err = lambda v: np.sum((x - v) ** 2, axis=1)  # noqa: E731
    assert np.all(err(vals) <= err(plain) * (1 + 1e-6))  # (plain: rounded to float32)
    assert np.all(err(vals)[to4] < err(plain)[to4])
    np.testing.assert_array_equal(vals[~to4].astype(np.float32), plain[~to4])
    assert 0 < to4.sum() < 64


def test_bf16_tail_layers_are_rounded_to_bf16_without_blocks():
    x = (RNG.standard_normal((4, 20)) * 7).astype(np.float32)
    recipe = NVFP4BlockScaling(bf16_layers=("head",))
    q, _ = recipe.quantize(x, "head/Linear/input", "forward")
    np.testing.assert_array_equal(q, x.astype(ml_dtypes.bfloat16).astype(np.float32))
    assert recipe.log.records[0].fmt == "bfloat16" and recipe.changes["bf16_tensors"] == 1


@pytest.mark.parametrize("bad, match", [(dict(disable_rht="no"), "disable_rht must be a bool"),
                                        (dict(bf16_layers="head"), "tuple of layer names"),
                                        (dict(seed=-1), "seed must be")])
def test_bad_settings_are_refused_by_name(bad, match):
    with pytest.raises((TypeError, ValueError), match=match):
        NVFP4BlockScaling(**bad)


def test_a_small_model_trains_under_the_recipe_and_every_component_acts():
    nn.set_random_seed(0)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(128, 16)).astype(np.float32)
    Y = (X[:, :4].argmax(axis=1)).astype(np.int64)
    model = nn.Sequential([nn.Dense(32, activation="relu"), nn.Dense(4, name="head")])
    model.compile(nn.SGD(0.1), nn.losses.SparseCategoricalCrossentropy(from_logits=True))
    recipe = NVFP4BlockScaling(bf16_layers=("head",))
    with nn.fp8_autocast(recipe):
        h = model.fit(X, Y, batch_size=32, epochs=8, seed=0, verbose=0)
    loss = np.asarray(h.history["loss"])
    assert np.isfinite(loss).all() and loss[-1] < 0.6 * loss[0]
    assert all(recipe.changes[k] > 0 for k in ("rht_tensors", "tiled_tensors",
                                               "stochastic_tensors", "bf16_tensors"))
    state = recipe.state_dict()
    again = NVFP4BlockScaling(bf16_layers=("head",))
    again.load_state_dict(state)
    assert again.state_dict() == state


def test_policy_name_nvfp4_te_makes_the_recipe():
    assert isinstance(nn.fp8.get_recipe("nvfp4_te"), NVFP4BlockScaling)
    assert fpsim.mx.BLOCK_FORMATS["nvfp4"] is NVFP4BlockScaling().format("backward")
