"""Small behaviours of the model and the engine met on the transformer models: ``summary`` of a
model with composite layers, ``fit``/``evaluate`` on integer token ids, and the rounding of an
indexing gradient with repeated indices."""

from __future__ import annotations

import numpy as np
import pytest

import nn
from nn import layers
from nn.losses import SparseCategoricalCrossentropy
from nn.models.summary import summary_text


def _tiny_lm() -> nn.Sequential:
    return nn.Sequential([layers.TokenAndPositionEmbedding(7, 5, 4),
                          layers.TransformerBlock(4, num_heads=2, ff_dim=6), nn.Dense(7)])


def _compiled_lm() -> nn.Sequential:
    nn.set_random_seed(0)
    model = _tiny_lm()
    model.compile(nn.Adam(0.01), SparseCategoricalCrossentropy(from_logits=True))
    return model


def test_summary_of_a_built_model_with_composite_layers_lists_one_row_per_top_level_layer():
    model = _compiled_lm()
    ids = np.zeros((4, 5), dtype=np.int64)
    model.fit(ids, ids, epochs=1, verbose=0)
    text = summary_text(model)
    block = model.layers[1]
    assert f"{block.name} (TransformerBlock)" in text
    assert block.ln1.name not in text
    assert f"total params: {sum(v.size for v in model.weights):,}" in text


def test_fit_and_evaluate_take_integer_token_ids_like_the_same_ids_as_floats():
    ids = np.random.default_rng(0).integers(0, 7, (8, 6))
    x, y = ids[:, :-1], ids[:, 1:]
    as_int = _compiled_lm()  # the weights are drawn when fit builds the model
    h_int = as_int.fit(x, y, epochs=2, batch_size=4, verbose=0, seed=0)
    as_float = _compiled_lm()
    h_float = as_float.fit(x.astype(np.float32), y, epochs=2, batch_size=4, verbose=0, seed=0)
    assert h_int.history["loss"] == h_float.history["loss"]
    assert as_int.evaluate(x, y, verbose=0) == as_float.evaluate(x.astype(np.float32), y,
                                                                 verbose=0)


def test_fit_refuses_integer_x_when_the_first_layer_is_not_an_embedding():
    model = nn.Sequential([nn.Dense(2)])
    model.compile(nn.SGD(0.1), "mse")
    with pytest.raises(TypeError, match="integer ids only when the first layer is an Embedding"):
        model.fit(np.zeros((4, 3), dtype=np.int64), np.zeros((4, 2)), verbose=0)


def test_indexing_gradient_sum_that_is_not_an_fp16_value_is_rounded_to_fp16():
    grads = np.array([1.0, 2.0**-12, 2.0**-12 + 2.0**-20], dtype=np.float32)
    with nn.policy_scope("float16"):
        w = nn.Variable(np.zeros(1, np.float32))
    w[np.array([0, 0, 0])].backward(grads)
    exact = grads.astype(np.float64).sum()
    assert w.grad.data[0] == np.float32(np.float16(exact))
    assert w.grad.data[0] != np.float32(exact)
