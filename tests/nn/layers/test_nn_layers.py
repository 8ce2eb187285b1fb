"""Layers, policies and the seed guide's model; bad input raises clear errors."""

from __future__ import annotations

import numpy as np
import pytest

import fpsim
import nn
from fpsim import BF16, FP16, FP32

POLICIES = ["float32", "mixed_float16", "mixed_bfloat16", "float16", "bfloat16", "float64"]


def _guide_model(units: int = 64) -> nn.Sequential:
    """The seed guide's model (4096 units there, 64 here)."""
    return nn.Sequential([
        nn.Dense(units, activation="relu", name="dense_1"),
        nn.Dense(units, activation="relu", name="dense_2"),
        nn.Dense(10, name="dense_logits"),
        nn.Activation("softmax", dtype="float32", name="predictions"),
    ])


@pytest.mark.parametrize("policy", POLICIES)
def test_seed_guide_model_builds_trains_one_step_and_outputs_fp32_under_each_policy(policy):
    nn.set_global_policy(policy)
    model = _guide_model()
    x = np.random.default_rng(0).random((16, 784), dtype=np.float32)
    y = np.arange(16) % 10
    out = model(x, training=True)
    assert out.fmt == FP32 and out.shape == (16, 10)
    assert np.allclose(out.data.sum(axis=1), 1, atol=1e-5)
    compute = nn.Policy(policy).compute_format
    for layer in model.layers[:3]:
        assert layer.compute_format == compute
        assert layer.kernel.fmt == nn.Policy(policy).variable_format
    loss = nn.losses.SparseCategoricalCrossentropy()(y, out)
    assert loss.fmt == FP32
    loss.backward()
    for v in model.trainable_variables:
        assert v.grad is not None and v.grad.fmt == v.fmt and np.all(np.isfinite(v.grad.data))


def test_softmax_left_in_a_mixed_float16_dense_layer_produces_fp16_output():
    """The seed guide's INCORRECT example: Dense(10, activation='softmax') under mixed_float16."""
    with nn.policy_scope("mixed_float16"):
        incorrect = nn.Dense(10, activation="softmax", seed=0)
        correct = nn.Sequential([nn.Dense(10, seed=0), nn.Activation("softmax", dtype="float32")])
    x = np.random.default_rng(1).random((4, 20), dtype=np.float32)
    wrong, right = incorrect(x), correct(x)
    assert wrong.fmt == FP16
    assert np.array_equal(wrong.data, fpsim.round(wrong.data, FP16))
    assert right.fmt == FP32
    assert not np.array_equal(right.data, fpsim.round(right.data, FP16))


def test_layer_policy_is_taken_from_the_global_policy_at_creation():
    with nn.policy_scope("mixed_bfloat16"):
        inside = nn.Dense(2)
    outside = nn.Dense(2)
    assert inside.compute_format == BF16 and inside.variable_format == FP32
    assert outside.compute_format == FP32
    assert nn.Dense(2, dtype="mixed_float16").compute_format == FP16


def test_layer_casts_its_input_to_the_compute_format():
    dense = nn.Dense(2, dtype="mixed_float16", seed=0)
    x = nn.Tensor(np.float32([[1.0001, 70000.0]]), requires_grad=True)
    out = dense(x)
    assert out.fmt == FP16
    out.backward(np.ones(out.shape, np.float32))
    assert x.grad.fmt == FP32  # the Cast's backward brings the gradient back to fp32


@pytest.mark.parametrize(
    "name,compute,variable",
    [("float32", FP32, FP32), ("float64", None, None), ("mixed_float16", FP16, FP32),
     ("mixed_bfloat16", BF16, FP32), ("float16", FP16, FP16), ("bfloat16", BF16, BF16),
     ("mixed_e4m3fn", fpsim.E4M3FN, FP32), ("mixed_fp8_e5m2", fpsim.E5M2, FP32)],
)
def test_policy_names_map_to_compute_and_variable_formats(name, compute, variable):
    p = nn.Policy(name)
    assert (p.compute_format, p.variable_format, p.name) == (compute, variable, name)


def test_policy_scope_restores_the_previous_global_policy():
    nn.set_global_policy("mixed_float16")
    with nn.policy_scope("bfloat16") as p:
        assert nn.global_policy() is p and p.compute_format == BF16
    assert nn.global_policy() == nn.Policy("mixed_float16")


def test_variables_are_read_through_a_cast_into_the_compute_format():
    with nn.policy_scope("mixed_float16"):
        dense = nn.Dense(3, seed=0)
        dense(np.ones((1, 2), np.float32))
    read = dense.read(dense.kernel)
    assert read.fmt == FP16 and dense.kernel.fmt == FP32
    assert np.array_equal(read.data, fpsim.round(dense.kernel.data, FP16))


def test_dropout_zeroes_a_rate_share_in_training_and_is_identity_in_inference():
    layer = nn.Dropout(0.25, seed=0)
    x = np.ones((200, 50), np.float32)
    train = layer(x, training=True).data
    assert abs((train == 0).mean() - 0.25) < 0.02
    assert np.allclose(train[train != 0], 1 / 0.75)
    assert np.array_equal(layer(x).data, x)


def test_flatten_keeps_the_batch_axis():
    assert nn.Flatten()(np.zeros((3, 2, 4), np.float32)).shape == (3, 8)


def test_dense_applies_to_the_last_axis_of_higher_rank_input():
    dense = nn.Dense(5, seed=0)
    assert dense(np.ones((2, 3, 4), np.float32)).shape == (2, 3, 5)


def test_weights_round_trip_through_get_and_set_weights():
    model = _guide_model(8)
    model(np.zeros((1, 6), np.float32))
    weights = [w + 1 for w in model.get_weights()]
    model.set_weights(weights)
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), weights, strict=True))


def test_trainable_variables_are_the_kernels_and_biases_in_layer_order():
    model = _guide_model(8)
    model(np.zeros((1, 6), np.float32))
    names = [v.name for v in model.trainable_variables]
    assert names == ["dense_1/kernel", "dense_1/bias", "dense_2/kernel", "dense_2/bias",
                     "dense_logits/kernel", "dense_logits/bias"]


# --- bad input -----------------------------------------------------------------------------------


def test_unknown_activation_name_raises_listing_the_known_ones():
    with pytest.raises(ValueError, match="unknown activation 'swish'.*relu"):
        nn.Dense(3, activation="swish")
    with pytest.raises(ValueError, match="unknown activation"):
        nn.Activation("softmaxx")


def test_unknown_policy_name_raises_listing_the_valid_forms():
    with pytest.raises(ValueError, match="unknown policy 'mixed_float17'.*mixed_<format>"):
        nn.Policy("mixed_float17")
    with pytest.raises(ValueError, match="unknown policy"):
        nn.set_global_policy("half_and_half")


def test_unknown_loss_name_raises_listing_the_known_ones():
    with pytest.raises(ValueError, match="unknown loss 'hinge'.*mean_squared_error"):
        nn.losses.get("hinge")


def test_wrong_input_shape_names_the_layer_and_both_shapes():
    dense = nn.Dense(4, name="hidden")
    dense(np.zeros((2, 8), np.float32))
    with pytest.raises(ValueError, match=r"'hidden' expects input of shape \(batch, 8\), got "
                                         r"shape \(2, 9\)"):
        dense(np.zeros((2, 9), np.float32))


def test_non_float_input_raises_a_type_error_naming_the_dtype():
    with pytest.raises(TypeError, match="floating-point input, got an array of dtype int64"):
        nn.Dense(2)(np.zeros((2, 3), np.int64))
    with pytest.raises(TypeError, match="floating-point input"):
        _guide_model(4)(np.zeros((2, 3), np.int32))
    with pytest.raises(TypeError, match="real numbers"):
        nn.Tensor(["a", "b"])


def test_bad_labels_raise_clear_errors():
    loss = nn.losses.SparseCategoricalCrossentropy(from_logits=True)
    logits = nn.Tensor(np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"labels must lie in 0..3"):
        loss([0, 1, 4], logits)
    with pytest.raises(ValueError, match=r"labels of shape \(2,\) do not match predictions"):
        loss([0, 1], logits)
    with pytest.raises(ValueError, match="must be integers"):
        loss([0.5, 1, 2], logits)
    with pytest.raises(ValueError, match=r"targets of shape \(3, 3\) do not match"):
        nn.losses.MeanSquaredError()(np.zeros((3, 3)), logits)


def test_matmul_shape_mismatch_names_both_shapes():
    with pytest.raises(ValueError, match=r"shapes \(2, 3\) and \(4, 5\) are not aligned"):
        nn.Tensor(np.zeros((2, 3))) @ nn.Tensor(np.zeros((4, 5)))


def test_backward_of_a_non_scalar_without_a_gradient_raises():
    t = nn.Tensor(np.ones(3), requires_grad=True) * 2.0
    with pytest.raises(ValueError, match="one-element tensor"):
        t.backward()


def test_invalid_layer_arguments_raise():
    with pytest.raises(ValueError, match="positive integer"):
        nn.Dense(0)
    with pytest.raises(ValueError, match=r"rate must be a finite number in \[0, 1\)"):
        nn.Dropout(1.0)
    with pytest.raises(ValueError, match="unknown initializer"):
        nn.Dense(2, kernel_initializer="orthogonal_ish")
    with pytest.raises(TypeError, match="Layer instances"):
        nn.Sequential([np.zeros(3)])


def test_serialized_model_rebuilds_the_same_architecture_and_outputs():
    with nn.policy_scope("mixed_float16"):
        model = nn.Sequential([nn.Flatten(), nn.Dense(6, activation="tanh", seed=1),
                               nn.ReLU(0.1), nn.Dropout(0.3, seed=2), nn.Dense(3, seed=3),
                               nn.Activation("softmax", dtype="float32")])
    x = np.random.default_rng(0).random((4, 2, 5), dtype=np.float32)
    expected = model(x).data
    config = nn.layers.serialize(model)
    clone = nn.layers.deserialize(config)
    clone(x)
    clone.set_weights(model.get_weights())
    assert nn.layers.serialize(clone) == config
    assert [layer.policy for layer in clone.layers] == [layer.policy for layer in model.layers]
    assert np.array_equal(clone(x).data, expected)
    with pytest.raises(ValueError, match="unknown layer class 'Conv3D'"):
        nn.layers.deserialize({"class_name": "Conv3D", "config": {}})
