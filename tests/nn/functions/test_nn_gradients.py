"""Every op's backward equals float64 central differences, on hypothesis-drawn shapes
(broadcasting included), and so does the backward of small whole models."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nn_gradcheck import check_model_gradients, check_op_gradients

import nn
from nn import functions as F

FEW = settings(max_examples=12, deadline=None)

shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)
seeds = st.integers(0, 2**31 - 1)


@st.composite
def broadcast_pair(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two shapes that broadcast: the second drops leading axes and sets some axes to 1."""
    a = draw(shapes)
    drop = draw(st.integers(0, len(a) - 1))
    b = tuple(1 if draw(st.booleans()) else n for n in a[drop:])
    return (a, b) if draw(st.booleans()) else (b, a)


def _values(seed: int, shape: tuple[int, ...], lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(lo, hi, shape)


def _away_from_zero(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    v = _values(seed, shape, 0.2, 2.0)
    return v * np.random.default_rng(seed + 1).choice([-1.0, 1.0], shape)


@pytest.mark.parametrize("op", [F.add, F.sub, F.mul], ids=["add", "sub", "mul"])
@FEW
@given(pair=broadcast_pair(), seed=seeds)
def test_binary_op_gradient_matches_central_differences_with_broadcasting(op, pair, seed):
    check_op_gradients(op, _values(seed, pair[0]), _values(seed + 7, pair[1]), seed=seed)


@FEW
@given(pair=broadcast_pair(), seed=seeds)
def test_div_gradient_matches_central_differences_with_broadcasting(pair, seed):
    check_op_gradients(F.div, _values(seed, pair[0]), _away_from_zero(seed + 7, pair[1]),
                       seed=seed)


@FEW
@given(shape=shapes, seed=seeds)
def test_neg_gradient_matches_central_differences(shape, seed):
    check_op_gradients(F.neg, _values(seed, shape), seed=seed)


@pytest.mark.parametrize("p", [2.0, 3.0, 0.5, -1.0, -1.5])
@FEW
@given(shape=shapes, seed=seeds)
def test_pow_gradient_matches_central_differences(p, shape, seed):
    check_op_gradients(lambda a: a ** p, _values(seed, shape, 0.3, 2.0), seed=seed)


@pytest.mark.parametrize(
    "op,lo,hi",
    [(F.exp, -2, 2), (F.log, 0.2, 3), (F.sqrt, 0.2, 3), (F.erf, -2, 2), (F.sigmoid, -4, 4),
     (F.tanh, -3, 3), (F.gelu, -3, 3)],
    ids=["exp", "log", "sqrt", "erf", "sigmoid", "tanh", "gelu"],
)
@FEW
@given(shape=shapes, seed=seeds)
def test_smooth_unary_op_gradient_matches_central_differences(op, lo, hi, shape, seed):
    check_op_gradients(op, _values(seed, shape, lo, hi), seed=seed)


@pytest.mark.parametrize(
    "op", [F.relu, lambda a: F.leaky_relu(a, 0.2), lambda a: F.clip(a, -1.0, 1.0)],
    ids=["relu", "leaky_relu", "clip"],
)
@FEW
@given(shape=shapes, seed=seeds)
def test_piecewise_op_gradient_matches_central_differences_away_from_kinks(op, shape, seed):
    v = _away_from_zero(seed, shape)
    v[np.abs(np.abs(v) - 1.0) < 0.05] = 0.5  # keep clip's kinks at +-1 out of reach too
    check_op_gradients(op, v, seed=seed)


@pytest.mark.parametrize("op", [F.softmax, F.log_softmax], ids=["softmax", "log_softmax"])
@FEW
@given(shape=shapes, seed=seeds, data=st.data())
def test_softmax_gradient_matches_central_differences_on_any_axis(op, shape, seed, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    check_op_gradients(lambda a: op(a, axis=axis), _values(seed, shape, -3, 3), seed=seed)


@pytest.mark.parametrize("op", [F.sum, F.mean], ids=["sum", "mean"])
@FEW
@given(shape=shapes, seed=seeds, data=st.data())
def test_reduction_gradient_matches_central_differences(op, shape, seed, data):
    axis = data.draw(st.none() | st.integers(0, len(shape) - 1))
    keepdims = data.draw(st.booleans())
    check_op_gradients(lambda a: op(a, axis=axis, keepdims=keepdims), _values(seed, shape),
                       seed=seed)


@FEW
@given(shape=shapes, seed=seeds, data=st.data())
def test_max_gradient_matches_central_differences_for_distinct_values(shape, seed, data):
    axis = data.draw(st.none() | st.integers(0, len(shape) - 1))
    n = int(np.prod(shape))
    v = np.random.default_rng(seed).permutation(n).reshape(shape) * 0.1
    check_op_gradients(lambda a: F.max(a, axis=axis), v, seed=seed)


@FEW
@given(shape=shapes, seed=seeds)
def test_reshape_and_transpose_gradients_match_central_differences(shape, seed):
    check_op_gradients(lambda a: F.transpose(F.reshape(a, (-1,) + shape[1:])), _values(seed, shape),
                       seed=seed)


@FEW
@given(pair=broadcast_pair(), seed=seeds)
def test_broadcast_to_gradient_sums_back_to_the_input_shape(pair, seed):
    small, big = sorted(pair, key=lambda s: (len(s), np.prod(s)))
    target = np.broadcast_shapes(small, big)
    check_op_gradients(lambda a: F.broadcast_to(a, target), _values(seed, small), seed=seed)


@FEW
@given(shape=st.tuples(st.integers(1, 5), st.integers(1, 4)), seed=seeds)
def test_getitem_gradient_scatters_and_adds_repeated_indices(shape, seed):
    rows = np.random.default_rng(seed).integers(0, shape[0], 6)
    check_op_gradients(lambda a: a[rows, 0] + a[1:, :].sum(), _values(seed, shape), seed=seed)


@FEW
@given(n=st.integers(1, 4), k=st.integers(1, 4), m=st.integers(1, 4), batch=shapes, seed=seeds)
def test_matmul_gradient_matches_central_differences_with_batch_broadcasting(
    n, k, m, batch, seed
):
    a = _values(seed, batch[-1:] + (n, k))
    b = _values(seed + 1, (k, m))
    check_op_gradients(F.matmul, a, b, seed=seed)
    check_op_gradients(F.matmul, b.T.copy(), a.swapaxes(-1, -2).copy(), seed=seed)


@pytest.mark.parametrize("activation", [None, "relu"])
@FEW
@given(n=st.integers(1, 4), k=st.integers(1, 4), m=st.integers(1, 4), seed=seeds)
def test_linear_gradient_matches_central_differences(activation, n, k, m, seed):
    check_op_gradients(lambda x, w, b: F.linear(x, w, b, activation), _away_from_zero(seed, (n, k)),
                       _values(seed + 1, (k, m)), _away_from_zero(seed + 2, (m,)), seed=seed,
                       rtol=1e-4)


@FEW
@given(shape=shapes, seed=seeds)
def test_dropout_gradient_is_the_same_mask_and_scale(shape, seed):
    rng_seed = seed % 1000
    check_op_gradients(lambda a: F.dropout(a, 0.4, rng=np.random.default_rng(rng_seed)),
                       _values(seed, shape), seed=seed)


@FEW
@given(shape=shapes, seed=seeds)
def test_gradients_accumulate_when_a_tensor_is_used_twice(shape, seed):
    check_op_gradients(lambda a: a * a + a.exp() * a, _values(seed, shape), seed=seed)


# --- whole models ------------------------------------------------------------------------------

ACTIVATIONS = ["relu", "leaky_relu", "sigmoid", "tanh", "gelu", "softmax", "log_softmax", None]
LOSSES = {
    "sparse_ce_logits": nn.losses.SparseCategoricalCrossentropy(from_logits=True),
    "sparse_ce_probs": nn.losses.SparseCategoricalCrossentropy(),
    "ce_logits": nn.losses.CategoricalCrossentropy(from_logits=True),
    "ce_probs": nn.losses.CategoricalCrossentropy(),
    "mse": nn.losses.MeanSquaredError(),
}


def _model_and_data(hidden_activation, loss_name, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (5, 4))
    labels = rng.integers(0, 3, 5)
    y = np.eye(3)[labels] if loss_name in ("ce_logits", "ce_probs", "mse") else labels
    probs = loss_name in ("sparse_ce_probs", "ce_probs")
    with nn.policy_scope("float64"):
        model = nn.Sequential([
            nn.Dense(6, activation=hidden_activation, seed=seed, bias_initializer="ones"),
            nn.Dense(5, activation=hidden_activation, seed=seed + 1),
            nn.Dense(3, activation="softmax" if probs else None, seed=seed + 2),
        ])
    return model, x, y


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_three_dense_model_gradient_matches_central_differences_for_each_activation(activation):
    model, x, y = _model_and_data(activation, "sparse_ce_logits")
    check_model_gradients(model, LOSSES["sparse_ce_logits"], x, y)


@pytest.mark.parametrize("loss_name", list(LOSSES))
def test_three_dense_model_gradient_matches_central_differences_for_each_loss(loss_name):
    model, x, y = _model_and_data("tanh", loss_name, seed=3)
    check_model_gradients(model, LOSSES[loss_name], x, y)


def test_model_with_flatten_relu_layer_and_dropout_in_inference_matches_central_differences():
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (4, 2, 3))
    y = rng.integers(0, 2, 4)
    with nn.policy_scope("float64"):
        model = nn.Sequential([nn.Flatten(), nn.Dense(5, seed=1), nn.ReLU(negative_slope=0.1),
                               nn.Dropout(0.5), nn.Dense(2, seed=2)])
    check_model_gradients(model, LOSSES["sparse_ce_logits"], x, y)


@FEW
@given(n=st.integers(1, 5), c=st.integers(1, 5), seed=seeds)
def test_fused_sparse_softmax_cross_entropy_gradient_matches_central_differences(n, c, seed):
    labels = np.random.default_rng(seed).integers(0, c, n)
    check_op_gradients(lambda z: F.sparse_softmax_cross_entropy(z, labels),
                       _values(seed, (n, c), -3, 3), seed=seed)
