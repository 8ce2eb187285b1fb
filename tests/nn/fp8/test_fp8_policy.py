"""Recipe policies and fp8_autocast: names, where a recipe applies, training with telemetry."""

from __future__ import annotations

import numpy as np
import pytest

import fpsim
import nn
from nn.fp8 import POLICY_RECIPES, BlockScaling, CurrentScaling, DelayedScaling, TF32Inputs
from nn.losses import SparseCategoricalCrossentropy

RNG = np.random.default_rng(3)
X = RNG.normal(size=(48, 12)).astype(np.float32)
Y = RNG.integers(0, 4, size=48)


@pytest.mark.parametrize("name", sorted(POLICY_RECIPES))
def test_recipe_policy_names_round_trip(name):
    policy = nn.Policy(name)
    assert policy.name == name and nn.Policy(policy.name) == policy
    assert policy.variable_format == fpsim.FP32 and policy.recipe is not None
    assert policy.recipe.policy_name == name
    layer = nn.Dense(3, dtype=name)
    again = nn.Dense.from_config(layer.get_config())
    assert again.policy == policy and again.policy.recipe is not policy.recipe


def test_recipe_policies_compute_in_bf16_except_tf32():
    assert nn.Policy("fp8_hybrid_delayed").compute_format == fpsim.BF16
    assert nn.Policy("nvfp4").compute_format == fpsim.BF16
    assert nn.Policy("mixed_tf32").compute_format == fpsim.FP32
    assert isinstance(nn.Policy("mixed_tf32").recipe, TF32Inputs)
    assert isinstance(nn.Policy("fp8_e4m3_current").recipe, CurrentScaling)
    hybrid = nn.Policy("fp8_hybrid_delayed").recipe
    assert isinstance(hybrid, DelayedScaling) and hybrid.fp8_format == "hybrid"
    assert nn.Policy("mxfp4").recipe.format("forward").name == "mxfp4_e2m1"


def test_policies_with_different_recipes_are_different():
    assert nn.Policy("fp8_hybrid_delayed") != nn.Policy("mixed_bfloat16")
    assert nn.Policy("fp8_hybrid_delayed") != nn.Policy("fp8_e4m3_delayed")
    assert nn.Policy("mxfp8") != nn.Policy("mxfp4")
    assert nn.Policy("mxfp8") == "mxfp8" and nn.Policy("mixed_float16").recipe is None


def test_unknown_policy_names_the_recipe_policies():
    with pytest.raises(ValueError, match="fp8_hybrid_delayed"):
        nn.Policy("fp8_hybrid_delayd")


def test_unknown_recipe_name_in_fp8_autocast_lists_the_known_ones():
    with pytest.raises(ValueError, match="known recipe names"):
        nn.fp8_autocast("fp9")
    with pytest.raises(TypeError, match="enabled"):
        nn.fp8_autocast("mxfp8", enabled=1)


def test_fp8_autocast_beats_layer_policies_and_enabled_false_switches_it_off():
    layer = nn.Dense(4, dtype="float32")
    recipe = DelayedScaling()
    with nn.fp8_autocast(recipe):
        layer(X)
        with nn.fp8_autocast(recipe, enabled=False):
            plain = layer(X)
    assert sorted(recipe.states) == [f"{layer.name}/Linear/input", f"{layer.name}/Linear/weight"]
    assert recipe.states[f"{layer.name}/Linear/input"].steps == 1  # not the disabled call
    np.testing.assert_array_equal(plain.data, layer(X).data)


def test_nn_fp8_autocast_is_the_same_context_as_nn_fp8_autocast():
    assert nn.fp8.autocast is nn.fp8_autocast
    with nn.fp8.autocast("mxfp8") as ctx:
        assert isinstance(ctx.recipe, BlockScaling) and nn.fp8.active_recipe() is ctx.recipe
    assert nn.fp8.active_recipe() is None


class Block(nn.Layer):
    """A layer of recipe policy "mxfp8" with its own matmul and a float32 Dense inside."""

    def __init__(self) -> None:
        super().__init__(name="block", dtype="mxfp8")
        self.head = nn.Dense(4, dtype="float32", name="head")

    def call(self, x, training=False):
        return self.head(x @ nn.Tensor(np.eye(12, dtype=np.float32)))


def test_a_plain_layer_inside_a_recipe_layer_runs_without_the_recipe():
    block = Block()
    out = block(X)
    assert [r.name for r in block.policy.recipe.log.records] == ["block/MatMul/a",
                                                                  "block/MatMul/b"]
    assert out.fmt == fpsim.FP32  # the float32 head computed in fp32, unquantized


def test_fit_under_a_delayed_scaling_policy_logs_every_tensor_every_step():
    nn.set_random_seed(0)
    model = nn.Sequential([nn.Dense(16, activation="relu", dtype="fp8_hybrid_delayed"),
                           nn.Dense(4, dtype="float32")])
    model.compile(nn.SGD(0.1), SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(X, Y, batch_size=16, epochs=2, verbose=0, seed=0)
    steps = len(history.step_loss)
    assert steps == 6 and np.isfinite(history.step_loss).all()
    recipe = model.layers[0].policy.recipe
    name = model.layers[0].name
    for operand, fmt in (("input", "float8_e4m3fn"), ("weight", "float8_e4m3fn"),
                         ("grad_output", "float8_e5m2")):
        series = recipe.log.series(f"{name}/Linear/{operand}")
        assert series["step"].tolist() == list(range(steps))
        assert {r.fmt for r in recipe.log.records if r.name.endswith(operand)} == {fmt}
        # delayed: each step's scale is 448 (or 57344) / the largest amax seen before it
        fp8_max = 448.0 if fmt == "float8_e4m3fn" else 57344.0
        running = np.maximum.accumulate(series["amax"])[:-1].astype(np.float32)
        np.testing.assert_array_equal(series["scale"][1:], np.float32(fp8_max) / running)
    state = recipe.states[f"{name}/Linear/weight"]
    assert state.steps == steps and np.count_nonzero(state.amax_history) == steps


def test_conv_and_attention_matmuls_run_under_their_layers_recipe():
    conv = nn.Conv2D(3, 3, dtype="mxfp8")
    out = conv(RNG.normal(size=(2, 5, 5, 2)).astype(np.float32))
    out.sum().backward()
    names = conv.policy.recipe.log.names()
    assert names[:2] == [f"{conv.name}/Linear/input", f"{conv.name}/Linear/weight"]
    assert np.isfinite(conv.kernel.grad.data).all()
    mha = nn.MultiHeadAttention(num_heads=2, key_dim=4, dtype="fp8_hybrid_delayed")
    seq = RNG.normal(size=(2, 6, 8)).astype(np.float32)
    mha(seq, seq).sum().backward()
    names = mha.policy.recipe.log.names()
    for op in ("Linear", "Linear_1", "Linear_2", "Linear_3", "MatMul", "MatMul_1"):
        assert f"{mha.name}/{op}/grad_output" in names  # projections and both attention products


def test_recipes_of_a_model_finds_each_recipe_once():
    separate = nn.Sequential([nn.Dense(4, dtype="mxfp8"), nn.Dense(4, dtype="float32"),
                              nn.Dense(2, dtype="nvfp4")])
    assert [type(r).__name__ for r in nn.fp8.recipes_of(separate)] == ["BlockScaling"] * 2
    nn.set_global_policy("fp8_hybrid_delayed")
    shared = nn.Sequential([nn.Dense(4), nn.Dense(2)])
    (recipe,) = nn.fp8.recipes_of(shared)
    shared(X)
    assert {r.name.split("/")[0] for r in recipe.log.records} == {
        layer.name for layer in shared.layers}


def test_fp8_autocast_disabled_also_switches_off_recipe_policies():
    layer = nn.Dense(4, dtype="mxfp8")
    with nn.fp8_autocast("fp8_hybrid_delayed", enabled=False):
        out = layer(X)
        assert nn.fp8.active_recipe() is None
    assert len(layer.policy.recipe.log) == 0
    plain = nn.Dense(4, dtype="mixed_bfloat16")  # the same layer without a recipe
    plain(X[:1])
    plain.set_weights(layer.get_weights())
    np.testing.assert_array_equal(out.data, plain(X).data)


def test_fp8_autocast_of_some_modules_leaves_the_others_as_outside_it():
    x = nn.Tensor(np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32))
    linear, dense = nn.Linear(8, 8, seed=1), nn.Dense(8, seed=2, dtype="mxfp8")
    outside = (linear(x).data, dense(x).data)
    recipe = CurrentScaling()
    with nn.fp8_autocast(recipe, modules=(nn.Linear,)):
        inside = (linear(x).data, dense(x).data)
    assert {r.name.split("/")[0] for r in recipe.log.records} == {linear.name}
    assert not np.array_equal(inside[0], outside[0])  # quantized by the block
    np.testing.assert_array_equal(inside[1], outside[1])  # its own mxfp8 policy, as outside
    with pytest.raises(TypeError, match="modules must be None or a tuple of layer classes"):
        nn.fp8_autocast(recipe, modules=[nn.Linear])
