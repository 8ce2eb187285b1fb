"""BatchNormalization, LayerNormalization and LayerNorm: Keras 3's formulas (biased variance,
moving statistics), gradients against float64 central differences, and the precision rule
(statistics in fp32 under mixed policies, in fp16 under the pure "float16" policy)."""

from __future__ import annotations

import numpy as np
import pytest
from layer_gradcheck import check_layer_gradients

import nn
from nn import layers


def f64(x: np.ndarray) -> nn.Tensor:
    return nn.Tensor(x, fmt="float64")


def test_batch_norm_weights_are_gamma_beta_moving_mean_moving_variance_in_that_order():
    bn = layers.BatchNormalization()
    bn(np.ones((2, 3), np.float32))
    assert [v.name for v in bn.weights] == [f"{bn.name}/gamma", f"{bn.name}/beta",
                                            f"{bn.name}/moving_mean", f"{bn.name}/moving_variance"]
    assert [v.name for v in bn.trainable_variables] == [f"{bn.name}/gamma", f"{bn.name}/beta"]
    np.testing.assert_array_equal(np.concatenate(bn.get_weights()), [1, 1, 1, 0, 0, 0, 0, 0, 0,
                                                                     1, 1, 1])


def test_batch_norm_training_normalizes_with_the_biased_batch_variance():
    x = np.random.default_rng(0).standard_normal((4, 3, 3, 2)) * 3 + 1
    bn = layers.BatchNormalization(epsilon=1e-3, dtype="float64")
    y = bn(f64(x), training=True).data
    mean, var = x.mean(axis=(0, 1, 2)), x.var(axis=(0, 1, 2))  # numpy's var is biased
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-3), rtol=1e-12)


def test_batch_norm_moving_statistics_follow_moving_times_momentum_plus_batch_times_rest():
    rng = np.random.default_rng(1)
    bn = layers.BatchNormalization(momentum=0.9)
    mm, mv = np.zeros(2), np.ones(2)
    for _ in range(3):
        x = (rng.standard_normal((8, 2)) * 2 + 5).astype(np.float32)
        bn(x, training=True)
        mm = mm * 0.9 + x.astype(np.float64).mean(axis=0) * 0.1
        mv = mv * 0.9 + x.astype(np.float64).var(axis=0) * 0.1
        np.testing.assert_allclose(bn.moving_mean.data, mm, rtol=1e-6)
        np.testing.assert_allclose(bn.moving_variance.data, mv, rtol=1e-5)


def test_batch_norm_inference_uses_the_moving_statistics_and_leaves_them_unchanged():
    bn = layers.BatchNormalization(epsilon=1e-3, dtype="float64")
    x = np.random.default_rng(2).standard_normal((5, 2)) + 3
    bn(f64(x), training=True)
    before = [w.copy() for w in bn.get_weights()]
    y = bn(f64(x), training=False).data
    g, b, mm, mv = before
    np.testing.assert_allclose(y, (x - mm) / np.sqrt(mv + 1e-3) * g + b, rtol=1e-12)
    for w, w0 in zip(bn.get_weights(), before, strict=True):
        np.testing.assert_array_equal(w, w0)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(6, 3), (2, 3, 2, 4)])
def test_batch_norm_gradients_match_central_differences(training, shape):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape)
    bn = layers.BatchNormalization(dtype="float64", momentum=0.5,
                                   gamma_initializer="he_uniform", beta_initializer="he_uniform")
    bn(f64(x), training=True)
    check_layer_gradients(lambda t: bn(t, training=training), [x], bn.trainable_variables)


@pytest.mark.parametrize("axis", [-1, (-2, -1)])
def test_layer_normalization_equals_the_formula_and_its_gradients_match(axis):
    nn.set_random_seed(4)  # the he_uniform gamma and beta: the same draw whatever ran before
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 4)) * 2 + 1
    ln = layers.LayerNormalization(axis=axis, dtype="float64",
                                   gamma_initializer="he_uniform", beta_initializer="he_uniform")
    y = ln(f64(x)).data
    axes = (-1,) if axis == -1 else (-2, -1)
    mean, var = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
    g, b = ln.get_weights()
    # (an absolute floor too: where g * x_hat + b cancels, float64's rounding of the two ways
    # of computing it differs by ulps of the terms, not of the result)
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-3) * g + b, rtol=1e-12,
                               atol=1e-12)
    check_layer_gradients(ln, [x], ln.trainable_variables)


def test_layer_norm_pytorch_face_is_layer_normalization_with_eps_1e_5():
    x = np.random.default_rng(5).standard_normal((3, 2, 4)).astype(np.float32)
    torch_face = layers.LayerNorm((2, 4))
    keras_face = layers.LayerNormalization(axis=(-2, -1), epsilon=1e-5)
    np.testing.assert_array_equal(torch_face(x).data, keras_face(x).data)
    assert torch_face.epsilon == 1e-5 and torch_face.gamma is not None
    assert torch_face.gamma.shape == (2, 4)
    with pytest.raises(ValueError, match="normalized_shape"):
        layers.LayerNorm(5)(x)


def _large_activations() -> np.ndarray:
    """Activations of size ~1000 (as deep fp16 residual streams reach): the squared
    deviations (~1e6) overflow fp16's max 65504."""
    rng = np.random.default_rng(6)
    return (rng.standard_normal((4, 16)) * 1000).astype(np.float32)


@pytest.mark.parametrize("make", [layers.LayerNormalization, layers.BatchNormalization])
def test_norm_statistics_run_in_fp32_under_mixed_float16_and_stay_finite(make):
    x = _large_activations()
    with nn.policy_scope("mixed_float16"):
        y = make()(x, training=True)
    assert y.fmt.name == "float16"
    assert np.all(np.isfinite(y.data))
    assert np.max(np.abs(y.data)) > 1  # really normalized, not flushed


@pytest.mark.parametrize("make", [layers.LayerNormalization, layers.BatchNormalization])
def test_norm_statistics_in_pure_float16_overflow_and_lose_the_signal(make):
    x = _large_activations()
    with nn.policy_scope("float16"):
        y = make()(x, training=True)
    # the variance overflowed to inf, so every output collapsed to beta (0)
    assert np.all(y.data == 0)
    per_layer = make(dtype="float16")(x, training=True)
    assert np.all(per_layer.data == 0)


def test_norm_output_under_mixed_float16_is_the_fp32_result_rounded_once():
    x = (np.random.default_rng(7).standard_normal((3, 8)) * 5).astype(np.float32)
    with nn.policy_scope("mixed_float16"):
        y = layers.LayerNormalization()(x)
    x16 = x.astype(np.float16).astype(np.float64)
    ref = (x16 - x16.mean(-1, keepdims=True)) / np.sqrt(x16.var(-1, keepdims=True) + 1e-3)
    # fp32 arithmetic inside, then one rounding: within one fp16 ulp of the exact value
    np.testing.assert_allclose(y.data, ref, rtol=2**-10, atol=2**-24)


@pytest.mark.parametrize("make,needle", [
    (lambda: layers.BatchNormalization(momentum=1.5), "momentum"),
    (lambda: layers.BatchNormalization(epsilon=0), "epsilon"),
    (lambda: layers.BatchNormalization(axis=1), "axis=-1"),
    (lambda: layers.LayerNormalization(axis=0), "axis"),
    (lambda: layers.LayerNormalization(center="yes"), "center"),
    (lambda: layers.LayerNorm(0), "normalized_shape"),
])
def test_bad_arguments_raise_naming_the_argument(make, needle):
    with pytest.raises((ValueError, TypeError), match=needle):
        make()


def test_wrong_channel_count_raises_naming_the_layer_and_both_shapes():
    bn = layers.BatchNormalization(name="bn")
    bn(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"'bn'.*\(batch, \.\.\., 3\).*\(2, 4\)"):
        bn(np.zeros((2, 4), np.float32))


# --- BatchNormalization(statistics_dtype=...): only the statistics' format changes -------------
def _two_channels(big: float) -> np.ndarray:
    """(16, 3, 3, 2) fp16-exact activations: channel 0 deviates from its mean by up to about
    ``big``, channel 1 by a few units."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((16, 3, 3, 2)) * [big / 3, 2.0] + [40.0, 1.0]
    return x.astype(np.float16).astype(np.float32)


def _float64_batch_norm(x: np.ndarray, epsilon: float = 1e-3) -> np.ndarray:
    x = x.astype(np.float64)
    return (x - x.mean(axis=(0, 1, 2))) / np.sqrt(x.var(axis=(0, 1, 2)) + epsilon)


def test_batch_norm_fp16_statistics_match_the_float64_formula_to_fp16_precision():
    x = _two_channels(big=20.0)  # deviations well below 256: nothing overflows
    with nn.policy_scope("mixed_float16"):
        bn = layers.BatchNormalization(statistics_dtype="float16")
        y = bn(x, training=True)
    assert bn.stats_format.name == "float16"
    assert all(w.fmt.name == "float32" for w in bn.weights)  # variables stay fp32
    # mean, variance, 1/sqrt and the products each rounded to fp16 (11 bits): a few ulps
    np.testing.assert_allclose(y.data, _float64_batch_norm(x), rtol=2**-8, atol=2**-8)
    assert np.all(np.isfinite(bn.moving_variance.data))


def test_batch_norm_fp16_statistics_kill_a_channel_whose_deviation_squares_past_65504():
    x = _two_channels(big=900.0)
    d = np.abs(x[..., 0] - x[..., 0].astype(np.float64).mean())
    assert d.max() > 256  # its square passes fp16's max, 65504
    fp16_grads, outputs = [], {}
    for stats in (None, "float16"):
        with nn.policy_scope("mixed_float16"):
            bn = layers.BatchNormalization(statistics_dtype=stats)
            xt = nn.Tensor(x, requires_grad=True)
            y = bn(xt, training=True)
            (y * y).sum().backward()  # any loss that depends on every output
        outputs[stats] = (y.data, bn.moving_variance.data.copy(), xt.grad)
        if stats:
            fp16_grads.append(xt.grad)
    ref = _float64_batch_norm(x)
    y32, mv32, g32 = outputs[None]
    np.testing.assert_allclose(y32, ref, rtol=2**-10, atol=2**-10)  # fp32 statistics: fine
    assert np.all(np.isfinite(mv32)) and np.any(g32[..., 0] != 0)
    y16, mv16, g16 = outputs["float16"]
    assert np.all(y16[..., 0] == 0)  # var = inf: the channel collapsed to beta
    np.testing.assert_array_equal(g16[..., 0], 0)  # and passes no gradient back
    assert np.isinf(mv16[0]) and np.isfinite(mv16[1])  # its moving variance is inf for good
    np.testing.assert_allclose(y16[..., 1], ref[..., 1], rtol=2**-8, atol=2**-8)


def test_batch_norm_fp16_statistics_equal_a_float16_layer_bit_for_bit():
    x = _two_channels(big=20.0)
    with nn.policy_scope("mixed_float16"):
        y = layers.BatchNormalization(statistics_dtype="float16")(x, training=True)
    y16 = layers.BatchNormalization(dtype="float16")(x, training=True)
    np.testing.assert_array_equal(y.data, y16.data)


def test_batch_norm_statistics_dtype_is_in_its_config_and_round_trips():
    config = layers.BatchNormalization(statistics_dtype="float16").get_config()
    assert config["statistics_dtype"] == "float16"
    assert layers.BatchNormalization.from_config(config).statistics_dtype == "float16"
    assert "statistics_dtype" not in layers.BatchNormalization().get_config()


def test_batch_norm_bad_statistics_dtype_raises_naming_the_argument_and_value():
    with pytest.raises(ValueError, match="BatchNormalization: statistics_dtype.*float17"):
        layers.BatchNormalization(statistics_dtype="float17")
