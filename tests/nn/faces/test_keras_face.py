"""The Keras faces: nn's tf.keras-flavoured top level (``nn.mixed_precision``,
``Policy.compute_dtype``/``variable_dtype``, ``from nn import layers``, fixed-scale
``LossScaleOptimizer``, ``policy_scope``'s meaning), then Keras 3's ``nn.faces.keras``."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import fpsim
import nn
from nn import layers
from nn.faces import keras
from nn.precision import mixed_precision
from nn.precision.loss_scale_keras3 import Keras3LossScaleOptimizer


def test_mixed_precision_names_are_the_ones_in_their_home_modules():
    assert mixed_precision.Policy is nn.Policy
    assert mixed_precision.set_global_policy is nn.set_global_policy
    assert mixed_precision.global_policy is nn.global_policy
    assert mixed_precision.LossScaleOptimizer is nn.LossScaleOptimizer
    # Keras 3's spellings are the Keras 3 face's, with its semantics
    assert mixed_precision.DTypePolicy is keras.DTypePolicy
    assert mixed_precision.dtype_policy is keras.config.dtype_policy
    assert mixed_precision.set_dtype_policy is keras.config.set_dtype_policy


def test_set_global_policy_through_mixed_precision_sets_new_layers_policy():
    mixed_precision.set_global_policy("mixed_float16")
    policy = mixed_precision.global_policy()
    assert (policy.compute_dtype, policy.variable_dtype) == ("float16", "float32")
    assert layers.Dense(2).dtype_policy == "mixed_float16"


@pytest.mark.parametrize("name, compute, variable", [
    ("float32", "float32", "float32"),
    ("mixed_float16", "float16", "float32"),
    ("mixed_bfloat16", "bfloat16", "float32"),
    ("float16", "float16", "float16"),
    ("bfloat16", "bfloat16", "bfloat16"),
    ("mixed_e4m3fn", "float8_e4m3fn", "float32"),
    ("float64", "float64", "float64"),
])
def test_policy_dtypes_are_keras_strings_and_formats_stay_formats(name, compute, variable):
    p = nn.Policy(name)
    assert (p.compute_dtype, p.variable_dtype) == (compute, variable)
    assert isinstance(p.compute_dtype, str) and isinstance(p.variable_dtype, str)
    assert nn.DType.of(p.compute_format) == p.compute_dtype
    assert p.variable_format is None or isinstance(p.variable_format, fpsim.Format)


def test_from_nn_import_layers_has_the_guide_layers():
    for name in ("Dense", "Activation", "Dropout", "Flatten", "ReLU", "Layer"):
        assert getattr(layers, name) is getattr(nn, name)


def test_a_fixed_scale_loss_scale_optimizer_has_no_growth_steps():
    opt = nn.LossScaleOptimizer(nn.SGD(), dynamic=False)
    assert opt.dynamic_growth_steps is None and opt.dynamic_counter is None
    assert nn.LossScaleOptimizer(nn.SGD()).dynamic_growth_steps == 2000
    with pytest.raises(ValueError, match="dynamic_growth_steps must be None when dynamic=False"):
        nn.LossScaleOptimizer(nn.SGD(), dynamic=False, dynamic_growth_steps=100)


def test_a_fixed_scale_survives_save_and_load(tmp_path):
    nn.set_global_policy("mixed_float16")
    nn.set_random_seed(0)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(16, 4)).astype(np.float32), rng.integers(0, 3, 16)
    model = nn.Sequential([nn.Dense(3)]).compile("sgd", "sparse_categorical_crossentropy")
    model.fit(x, y, epochs=1, verbose=0, loss_scale=128)
    model.save(tmp_path / "m.npz")
    loaded = nn.load_model(tmp_path / "m.npz")
    scaler = loaded.loss_scale_optimizer
    assert scaler.loss_scale == 128 and not scaler.dynamic
    assert scaler.dynamic_growth_steps is None


def test_policy_scope_sets_the_policy_of_layers_created_inside_only():
    nn.set_random_seed(0)
    model = nn.Sequential([nn.Dense(3)])
    x = np.ones((2, 4), np.float32)
    before = model(x).numpy()
    with nn.policy_scope("mixed_float16"):
        out = model(x)  # built before the block: keeps its float32 policy
        inner = nn.Dense(3)
    assert out.dtype == "float32" and np.array_equal(out.numpy(), before)
    assert inner.dtype_policy == "mixed_float16"


# =============================================================================================
# The Keras 3 face: ``from nn.faces import keras`` (issue 25). One test per idiom; the oracle
# of each is Keras 3's documented rule (keras/src/...), numbers recorded on real Keras 3.15.1
# where the issue gives them, or numpy / ml_dtypes arithmetic.
# =============================================================================================


def _variable(values):
    return nn.Variable(np.asarray(values, np.float32), name="w")


def _scaled_gradient(opt, w, x):
    """The Keras 3 custom loop's gradient: d(scale_loss(sum(w * x)))/dw, from a tape."""
    with nn.GradientTape() as tape:
        loss = (w * nn.Tensor(np.asarray(x, np.float32))).sum()
        scaled = opt.scale_loss(loss)
    return tape.gradient(scaled, [w])


# --- silently different before: now Keras 3's --------------------------------------------------
def test_keras3_scale_loss_then_apply_gradients_steps_by_the_true_gradient():
    w = _variable([1.0, 2.0])
    opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(learning_rate=0.5))
    grads = _scaled_gradient(opt, w, [0.25, -0.5])
    np.testing.assert_array_equal(grads[0].numpy(), np.float32([0.25, -0.5]) * 2**15)
    opt.apply_gradients(zip(grads, [w], strict=True))
    # Keras 3 divides by the scale inside apply: w - 0.5 * x, not 32768 times that
    np.testing.assert_array_equal(w.numpy(), np.float32([1 - 0.125, 2 + 0.25]))


def test_keras3_loss_scale_has_no_floor_after_repeated_non_finite_steps():
    # real Keras 3.15.1 (issue 25): 2, 1, 0.5, 0.25, ... ; tf.keras (nn.LossScaleOptimizer)
    # stops at 1
    w = _variable([1.0])
    k3 = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1), initial_scale=4.0)
    tf = nn.LossScaleOptimizer(nn.SGD(0.1), initial_scale=4.0)
    seen3, seen_tf = [], []
    for _ in range(4):
        k3.apply_gradients([(np.float32([np.inf]), w)])
        tf.apply_gradients([(np.float32([np.inf]), w)])
        seen3.append(k3.dynamic_scale)
        seen_tf.append(tf.loss_scale)
    assert seen3 == [2.0, 1.0, 0.5, 0.25]
    assert seen_tf == [2.0, 1.0, 1.0, 1.0]
    assert w.numpy()[0] == 1.0


def test_keras3_skipped_step_does_not_advance_iterations():
    w = _variable([1.0])
    opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))
    opt.apply_gradients([(np.float32([np.nan]), w)])
    assert opt.iterations == 0 and opt.step_counter == 0 and w.numpy()[0] == 1.0
    tf = nn.LossScaleOptimizer(nn.SGD(0.1))
    tf.apply_gradients([(np.float32([np.nan]), w)])
    assert tf.iterations == 1  # tf.keras counts the skipped step


def test_keras3_unscaling_divides_each_gradient_by_the_scale_rounded_once():
    w = _variable(np.zeros(64))
    g = np.random.default_rng(0).normal(size=64).astype(np.float32)
    opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(1.0), initial_scale=3.0)
    opt.apply_gradients([(g, w)])
    expected = -(g.astype(np.float64) / 3.0).astype(np.float32)  # the correctly rounded g / 3
    np.testing.assert_array_equal(w.numpy(), expected)


def test_keras3_scale_doubles_after_dynamic_growth_steps_finite_steps():
    w = _variable([0.0])
    opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.0), initial_scale=8.0,
                                              dynamic_growth_steps=3)
    scales = []
    for _ in range(7):
        opt.apply_gradients([(np.float32([1.0]), w)])
        scales.append((opt.dynamic_scale, opt.step_counter))
    assert scales == [(8, 1), (8, 2), (16, 0), (16, 1), (16, 2), (32, 0), (32, 1)]


def _keras3_scale_rule(scale, counter, finite, growth_steps):
    """Keras 3's _stateful_handle_(non_)finite_grads, step by step in numpy float32."""
    with np.errstate(over="ignore"):
        if not finite:
            return np.float32(scale) * np.float32(0.5), 0
        if counter == growth_steps - 1:
            return np.float32(scale) * np.float32(2.0), 0
        return np.float32(scale), counter + 1


def test_keras3_scale_doubles_to_inf_and_stays_there_as_keras3():
    w = _variable([1.0])
    opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.5), initial_scale=2.0**126,
                                              dynamic_growth_steps=2)
    grads = [1.0, 1.0, 1.0, 1.0, np.inf, 1.0, 1.0]  # the scaled gradients handed to apply
    scale, counter, seen, expected = np.float32(2.0**126), 0, [], []
    for g in grads:
        opt.apply_gradients([(np.float32([g]), w)])
        scale, counter = _keras3_scale_rule(scale, counter, np.isfinite(g), 2)
        seen.append((opt.dynamic_scale, opt.step_counter))
        expected.append((float(scale), counter))
    assert seen == expected
    assert seen[3] == (np.inf, 0)  # 2**127 * 2 overflowed: Keras 3 stores inf
    assert seen[4] == (np.inf, 0)  # a non-finite step: inf * 0.5 is still inf
    assert opt.iterations == 6  # the finite steps at inf are applied: g / inf = 0
    # the custom loop's next step: scale_loss gives inf, so do the gradients; skipped, inf kept
    before = w.numpy().copy()
    opt.apply_gradients(zip(_scaled_gradient(opt, w, [0.25]), [w], strict=True))
    assert opt.last_step_skipped and opt.dynamic_scale == np.inf and opt.iterations == 6
    np.testing.assert_array_equal(w.numpy(), before)


def test_keras3_scale_at_inf_survives_its_state_dict():
    opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1), initial_scale=2.0**127,
                                              dynamic_growth_steps=1)
    opt.apply_gradients([(np.float32([0.0]), _variable([0.0]))])
    assert opt.dynamic_scale == np.inf
    again = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))
    again._state.load_state_dict(opt._state.state_dict())
    assert again.dynamic_scale == np.inf


def test_keras3_get_config_has_keras3_keys_and_rebuilds_the_same_optimizer():
    opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam(0.01), initial_scale=256.0,
                                              dynamic_growth_steps=10, name="lso")
    config = opt.get_config()
    assert sorted(config) == ["dynamic_growth_steps", "initial_scale", "inner_optimizer", "name"]
    again = nn.LossScaleOptimizer.from_config(config)  # nn's checkpoints call this one
    assert type(again) is Keras3LossScaleOptimizer and again.get_config() == config


def test_tf_keras_scale_loss_raises_naming_both_contracts():
    opt = nn.LossScaleOptimizer(nn.SGD(0.1))
    with pytest.raises(AttributeError, match="get_scaled_loss.*nn.faces.keras.optimizers"):
        opt.scale_loss(1.0)


def test_keras3_tf_keras_methods_raise_naming_scale_loss():
    opt = keras.mixed_precision.LossScaleOptimizer(keras.optimizers.SGD(0.1))
    with pytest.raises(AttributeError, match="opt.scale_loss"):
        opt.get_scaled_loss(1.0)
    with pytest.raises(AttributeError, match="nn.LossScaleOptimizer"):
        opt.get_unscaled_gradients([np.ones(2, np.float32)])


def test_keras3_dynamic_false_raises_naming_nn_fixed_scale():
    with pytest.raises(ValueError, match=r"nn.LossScaleOptimizer\(optimizer, initial_scale=S, "
                                         r"dynamic=False\)"):
        keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(), dynamic=False)
    with pytest.raises(ValueError, match="does not support arguments: loss_scale"):
        keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(), loss_scale=2.0)


@pytest.mark.parametrize("face", ["tf.keras", "keras3"])
@pytest.mark.parametrize("value", ["False", "True", 0, None])
def test_a_string_or_number_for_dynamic_is_refused_naming_the_argument(face, value):
    cls = nn.LossScaleOptimizer if face == "tf.keras" else keras.optimizers.LossScaleOptimizer
    with pytest.raises(TypeError, match="dynamic must be True or False"):
        cls(nn.SGD(), dynamic=value)


def test_keras_dtype_policy_never_equals_a_string_while_nn_policy_does():
    assert (keras.DTypePolicy("float16") == "float16") is False  # Keras 3
    assert keras.DTypePolicy("float16") == keras.dtype_policies.FloatDTypePolicy("float16")
    assert keras.DTypePolicy("float16") != keras.DTypePolicy("mixed_float16")
    assert nn.Policy("float16") == "float16"  # nn's tf.keras-era equality, kept


def test_keras_dense_rounds_the_fp16_product_then_the_fp16_bias_sum():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(64, 3)).astype(np.float16)
    k = rng.normal(size=(3, 4)).astype(np.float16)
    b = rng.normal(size=4).astype(np.float16)
    keras.config.set_dtype_policy("mixed_float16")
    face, fused = keras.layers.Dense(4), nn.Dense(4)
    for layer in (face, fused):
        layer.build((None, 3))
        layer.set_weights([k.astype(np.float32), b.astype(np.float32)])
    # 3 products of fp16 values are exact in float64 and their sum is exact in float32
    product = x.astype(np.float64) @ k.astype(np.float64)
    two = (product.astype(np.float16) + b).astype(np.float16)  # numpy fp16 add: one rounding
    one = (product + b.astype(np.float64)).astype(np.float32).astype(np.float16)
    np.testing.assert_array_equal(face(x.astype(np.float32)).numpy(), two)
    np.testing.assert_array_equal(fused(x.astype(np.float32)).numpy(), one)
    assert np.any(two != one)  # the faces do differ on this data


def test_keras_conv2d_rounds_the_fp16_convolution_then_the_fp16_bias_sum():
    rng = np.random.default_rng(4)
    # multiples of 1/64 below 4 (x) and 1 (kernel): each of the 9 products is a multiple of
    # 1/4096 below 4 and their sum has at most 18 bits, exact in float32 and float64 alike
    x = (rng.integers(-255, 256, size=(2, 6, 6, 1)) / 64).astype(np.float32)
    k = (rng.integers(-63, 64, size=(3, 3, 1, 3)) / 64).astype(np.float32)
    b = rng.normal(size=3).astype(np.float16).astype(np.float32)
    keras.config.set_dtype_policy("mixed_float16")
    face, fused = keras.layers.Conv2D(3, 3), nn.Conv2D(3, 3)
    for layer in (face, fused):
        layer.build((None, 6, 6, 1))
        layer.set_weights([k, b])
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (3, 3), (1, 2))
    conv = np.einsum("nhwcij,ijco->nhwo", windows, k.astype(np.float64))  # exact
    b64 = b.astype(np.float64)
    two = (conv.astype(np.float16).astype(np.float64) + b64).astype(np.float16)
    one = (conv + b64).astype(np.float32).astype(np.float16)  # fp32 sum, then fp16
    np.testing.assert_array_equal(face(x).numpy(), two)
    np.testing.assert_array_equal(fused(x).numpy(), one)
    assert np.any(two != one)  # the faces do differ on this data


def test_weights_set_after_build_are_the_ones_the_call_uses():
    d = keras.layers.Dense(2)
    d.build((None, 3))
    d.set_weights([np.ones((3, 2)), np.zeros(2)])
    np.testing.assert_array_equal(d(np.ones((1, 3), np.float32)).numpy(), [[3.0, 3.0]])


# --- names that were missing -----------------------------------------------------------------
def test_config_set_dtype_policy_is_the_global_policy_of_new_layers():
    keras.config.set_dtype_policy("mixed_bfloat16")
    assert keras.config.dtype_policy() == keras.DTypePolicy("mixed_bfloat16")
    assert nn.global_policy().name == "mixed_bfloat16"
    layer = keras.layers.Dense(2)
    assert repr(layer.dtype_policy) == '<DTypePolicy "mixed_bfloat16">'
    assert keras.mixed_precision.global_policy is keras.config.dtype_policy
    with pytest.raises(ValueError, match="Expected the string name of a policy"):
        keras.config.set_dtype_policy(16)


def test_dtype_policy_without_a_name_is_the_global_policy():
    keras.config.set_dtype_policy("mixed_float16")
    assert keras.DTypePolicy().name == "mixed_float16"
    assert keras.dtype_policies.QuantizedFloat8DTypePolicy("float8").name == (
        "float8_from_mixed_float16")


def test_dtype_policy_config_round_trips_and_is_not_quantized():
    p = keras.DTypePolicy("mixed_float16")
    assert p.get_config() == {"name": "mixed_float16"} and p.quantization_mode is None
    assert keras.DTypePolicy.from_config(p.get_config()) == p
    assert keras.dtype_policies.deserialize(keras.dtype_policies.serialize(p)) == p
    assert (p.compute_dtype, p.variable_dtype) == ("float16", "float32")


def test_dtype_policy_map_takes_exact_path_then_one_regex_then_default():
    f16, bf16 = keras.DTypePolicy("float16"), keras.DTypePolicy("bfloat16")
    m = keras.dtype_policies.DTypePolicyMap(default_policy="float32")
    m["encoder/layer_0/dense"] = bf16
    m["encoder/.*"] = f16
    m["decoder"] = bf16
    assert m["encoder/layer_0/dense"].name == "bfloat16"
    assert m["encoder/attention/query"].name == "float16"
    assert m["decoder/attention"].name == "float32"
    m["encoder/attention/.*"] = bf16
    with pytest.raises(ValueError, match="matches multiple dtype policy"):
        m["encoder/attention/query"]
    with pytest.raises(ValueError, match="already exist"):
        m["decoder"] = f16
    assert m.name == "map_float32" and len(m) == 4
    again = keras.dtype_policies.DTypePolicyMap.from_config(m.get_config())
    assert dict(again.items()) == dict(m.items())


def test_quantized_policies_nn_does_not_emulate_raise_naming_float8():
    with pytest.raises(ValueError, match="QuantizedFloat8DTypePolicy"):
        keras.dtype_policies.QuantizedDTypePolicy("int8", "float32")
    with pytest.raises(ValueError, match="Invalid quantization mode"):
        keras.dtype_policies.QuantizedDTypePolicy("int3", "float32")


def test_quantized_float8_policy_has_keras_history_1024_and_no_nn_recipe():
    p = keras.dtype_policies.QuantizedFloat8DTypePolicy("float8", "mixed_bfloat16")
    assert (p.name, p.quantization_mode, p.amax_history_length) == (
        "float8_from_mixed_bfloat16", "float8", 1024)
    assert p.recipe is None  # keras.layers.Dense runs Keras's own float8 steps
    assert (p.compute_dtype, p.variable_dtype) == ("bfloat16", "float32")
    assert p.get_config() == {"mode": "float8", "source_name": "mixed_bfloat16",
                              "amax_history_length": 1024}
    assert keras.dtype_policies.get("float8_from_mixed_bfloat16") == p
    short = keras.dtype_policies.QuantizedFloat8DTypePolicy("float8", "float32", 16)
    layer = keras.layers.Dense(2, dtype=short)
    layer.build((None, 3))
    assert layer.inputs_amax_history.shape == (16,)


def test_layer_compute_and_variable_dtype_are_strings_and_trainable_weights_listed():
    keras.config.set_dtype_policy("mixed_float16")
    d = keras.layers.Dense(3)
    d(np.ones((2, 4), np.float32))
    assert (d.compute_dtype, d.variable_dtype, d.dtype) == ("float16", "float32", "float32")
    assert d.trainable_weights == d.trainable_variables == [d.kernel, d.bias]
    assert d.non_trainable_weights == []


def test_compile_auto_scale_loss_wraps_only_when_true():
    keras.config.set_dtype_policy("mixed_float16")
    model = keras.Sequential([keras.layers.Dense(2)])
    model.compile(keras.optimizers.SGD(0.1), "mse")
    assert type(model.optimizer) is Keras3LossScaleOptimizer  # the face's policies: Keras 3's
    nn.set_global_policy("mixed_float16")
    tf_model = nn.Sequential([nn.Dense(2)]).compile(nn.SGD(0.1), "mse")
    assert type(tf_model.optimizer) is nn.LossScaleOptimizer  # nn's policies: tf.keras's
    model.compile(keras.optimizers.SGD(0.1), "mse", auto_scale_loss=False)
    assert isinstance(model.optimizer, nn.SGD) and model.loss_scale_optimizer is None
    with pytest.raises(TypeError, match="auto_scale_loss must be True or False"):
        model.compile("sgd", "mse", auto_scale_loss="False")


def test_fit_steps_a_compiled_keras3_loss_scale_optimizer_by_its_rules(tmp_path):
    keras.config.set_dtype_policy("mixed_float16")
    nn.set_random_seed(0)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(32, 4)).astype(np.float32), rng.normal(size=(32, 2))
    model = keras.Sequential([keras.layers.Dense(2)])
    opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.01), initial_scale=2.0,
                                              dynamic_growth_steps=2)
    model.compile(opt, "mse")
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert opt.iterations == 4 and opt.dynamic_scale == 8.0  # grew twice in 4 finite steps
    model.save(tmp_path / "m.npz")
    loaded = nn.load_model(tmp_path / "m.npz")
    scaler = loaded.loss_scale_optimizer
    assert type(scaler) is Keras3LossScaleOptimizer and scaler.dynamic_scale == 8.0


def test_exponential_decay_is_keras_formula_in_float32():
    s = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=4, decay_rate=0.5)
    for step in (0, 1, 4, 7):
        assert s(step) == np.float32(np.float32(0.1) * np.float32(0.5) ** np.float32(step / 4))
    stair = keras.optimizers.schedules.ExponentialDecay(0.1, 4, 0.5, staircase=True)
    assert [float(stair(t)) for t in (0, 3, 4, 7, 8)] == [float(np.float32(v)) for v in (
        0.1, 0.1, 0.05, 0.05, 0.025)]


def test_piecewise_constant_decay_intervals_are_closed_on_the_right():
    # Keras's docstring example: 1.0 for steps <= 100000, 0.5 up to 110000, then 0.1
    s = keras.optimizers.schedules.PiecewiseConstantDecay([100000, 110000], [1.0, 0.5, 0.1])
    got = [float(s(t)) for t in (0, 100000, 100001, 110000, 110001)]
    assert got == [1.0, 1.0, 0.5, 0.5, float(np.float32(0.1))]


def test_cosine_decay_warms_up_linearly_then_decays_to_alpha():
    s = keras.optimizers.schedules.CosineDecay(0.0, decay_steps=10, alpha=0.1,
                                               warmup_target=1.0, warmup_steps=5)
    assert float(s(0)) == 0.0 and float(s(5)) == 1.0
    np.testing.assert_allclose(float(s(2)), 0.4, rtol=1e-7)
    np.testing.assert_allclose(float(s(10)), 0.9 * 0.5 * (1 + np.cos(np.pi / 2)) + 0.1,
                               rtol=1e-6)
    np.testing.assert_allclose(float(s(99)), 0.1, rtol=1e-6)


def test_a_schedule_as_learning_rate_is_read_at_the_optimizer_iterations():
    schedule = keras.optimizers.schedules.ExponentialDecay(0.5, decay_steps=1, decay_rate=0.5)
    opt = keras.optimizers.SGD(learning_rate=schedule)
    w = _variable([0.0])
    for _ in range(3):
        opt.apply_gradients([(np.float32([1.0]), w)])
    assert w.numpy()[0] == -(0.5 + 0.25 + 0.125)  # lr(0), lr(1), lr(2)
    assert opt.learning_rate == 0.0625  # lr(3), what the next update uses
    again = nn.SGD.from_config(opt.get_config())
    assert isinstance(again._learning_rate, keras.optimizers.schedules.ExponentialDecay)


def test_optimizer_before_a_lazy_models_first_call_says_it_builds_on_first_call():
    model = keras.Sequential([keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="builds its weights on its first call"):
        nn.SGD(model.trainable_variables, lr=0.1)


def test_dense_quantize_float8_casts_inputs_and_kernel_to_e4m3_at_scale_one_first():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(8, 5)).astype(np.float32)
    k = rng.normal(size=(5, 3)).astype(np.float32)
    d = keras.layers.Dense(3, use_bias=False)
    d.build((None, 5))
    d.set_weights([k])
    d.quantize("float8")
    assert d.dtype_policy.quantization_mode == "float8"
    assert d.inputs_amax_history.shape == (1024,)
    e4m3 = ml_dtypes.float8_e4m3fn  # delayed scaling: the first step casts with scale 1
    expected = (x.astype(e4m3).astype(np.float64) @ k.astype(e4m3).astype(np.float64))
    np.testing.assert_array_equal(d(x).numpy(), expected.astype(np.float32))


def test_model_quantize_float8_reaches_the_keras_dense_layers_only():
    model = keras.Sequential([keras.layers.Dense(4), keras.layers.ReLU(), keras.layers.Dense(2)])
    model.build((None, 3))
    model.quantize("float8")
    modes = [layer.dtype_policy.quantization_mode for layer in model.layers]
    assert modes == ["float8", None, "float8"]
    plain = nn.Sequential([nn.Dense(2)])
    plain.build((None, 3))
    with pytest.raises(ValueError, match="no layer of model .* supports it"):
        plain.quantize("float8")
    with pytest.raises(ValueError, match="not emulated by nn"):
        model.layers[0].quantize("int8")


def test_unsupported_dense_arguments_raise_naming_them():
    with pytest.raises(ValueError, match="kernel_regularizer"):
        keras.layers.Dense(2, kernel_regularizer="l2")


KERAS3_NAMES = {  # issue 25's list of the Keras 3 face
    "": ["layers", "Input", "Model", "Sequential", "mixed_precision", "config", "DTypePolicy",
         "dtype_policies", "optimizers", "losses", "metrics"],
    "config": ["set_dtype_policy", "dtype_policy"],
    "dtype_policies": ["DTypePolicy", "FloatDTypePolicy", "DTypePolicyMap",
                       "QuantizedDTypePolicy", "QuantizedFloat8DTypePolicy"],
    "mixed_precision": ["DTypePolicy", "LossScaleOptimizer", "Policy", "dtype_policy",
                        "global_policy", "set_dtype_policy", "set_global_policy"],
    "optimizers": ["SGD", "Adam", "RMSprop", "LossScaleOptimizer", "schedules"],
    "optimizers.schedules": ["LearningRateSchedule", "ExponentialDecay",
                             "PiecewiseConstantDecay", "CosineDecay"],
    "layers": ["Dense", "Activation", "Dropout", "Flatten", "ReLU", "Layer", "Conv2D",
               "LayerNormalization", "Embedding", "MultiHeadAttention"],
    "losses": ["SparseCategoricalCrossentropy", "MeanSquaredError"],
    "metrics": ["SparseCategoricalAccuracy", "Accuracy"],
}


@pytest.mark.parametrize("where", sorted(KERAS3_NAMES))
def test_the_keras3_face_has_every_name_the_issue_lists(where):
    namespace = keras
    for part in filter(None, where.split(".")):
        namespace = getattr(namespace, part)
    missing = [n for n in KERAS3_NAMES[where] if not hasattr(namespace, n)]
    assert missing == []


def test_a_keras3_module_the_face_lacks_raises_naming_nn_spelling():
    with pytest.raises(AttributeError, match="keras.ops is not part of nn's Keras 3 face; "
                                             "nn's spelling: nn.functions"):
        keras.ops  # noqa: B018
    assert keras.mixed_precision.Policy is keras.DTypePolicy


def test_a_float8_quantized_model_trains_and_reloads_with_its_scaling_state(tmp_path):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(32, 4)).astype(np.float32), rng.integers(0, 3, 32)
    model = keras.Sequential([keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)])
    model.build((None, 4))
    model.quantize("float8")
    model.compile(keras.optimizers.Adam(1e-2),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    history = model.layers[0].inputs_amax_history.numpy()
    assert np.count_nonzero(history) == 4  # an amax per batch: the newest first, then
    assert history[0] > 0 and (history[-3:] > 0).all()  # the older ones rolled to the end
    model.save(tmp_path / "m.npz")
    loaded = nn.load_model(tmp_path / "m.npz")
    policy = loaded.layers[0].dtype_policy
    assert type(policy) is keras.dtype_policies.QuantizedFloat8DTypePolicy
    for a, b in zip(loaded.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
