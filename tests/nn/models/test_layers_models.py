"""The new layers together: a small CNN and a one-block transformer language model, end to end
(gradients against float64 central differences), saved and loaded, rebuilt from their configs,
and seen by the per-layer telemetry."""

from __future__ import annotations

import numpy as np
import pytest
from layer_gradcheck import check_layer_gradients

import fpsim
import nn
from nn import layers
from nn.engine import sites
from nn.losses import sparse_categorical_crossentropy
from nn.training.loop import telemetry_sites

NEW_LAYERS = ["Add", "AveragePooling2D", "BatchNormalization", "Conv2D", "Conv2d", "Embedding",
              "GlobalAveragePooling2D", "LayerNorm", "LayerNormalization", "MaxPooling2D",
              "MultiHeadAttention", "TokenAndPositionEmbedding", "TransformerBlock"]


def small_cnn(dtype: str | None = None) -> nn.Sequential:
    return nn.Sequential([
        layers.Conv2D(3, 3, padding="same", activation="tanh", dtype=dtype),
        layers.BatchNormalization(dtype=dtype),
        layers.MaxPooling2D(dtype=dtype),
        layers.Conv2D(4, 2, strides=2, activation="gelu", dtype=dtype),
        layers.AveragePooling2D((1, 1), dtype=dtype),
        layers.GlobalAveragePooling2D(dtype=dtype),
        nn.Dense(3, dtype=dtype),
    ])


def tiny_lm(dtype: str | None = None, normalize_first: bool = False) -> nn.Sequential:
    return nn.Sequential([
        layers.TokenAndPositionEmbedding(7, 5, 4, dtype=dtype),
        layers.TransformerBlock(4, num_heads=2, ff_dim=6, normalize_first=normalize_first,
                                dtype=dtype),
        nn.Dense(7, dtype=dtype),
    ])


def _mean_loss(model: nn.Sequential, x: np.ndarray, y: np.ndarray) -> nn.Tensor:
    return sparse_categorical_crossentropy(y, model(x, training=True), from_logits=True).mean()


def test_small_cnn_gradients_match_central_differences_end_to_end():
    rng = np.random.default_rng(0)
    x, y = nn.Tensor(rng.standard_normal((3, 6, 6, 2)), fmt="float64"), rng.integers(0, 3, 3)
    model = small_cnn("float64")
    model(x)
    check_layer_gradients(lambda: _mean_loss(model, x, y), [], model.trainable_variables,
                          rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("normalize_first", [False, True])
def test_one_block_transformer_gradients_match_central_differences_end_to_end(normalize_first):
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 7, (2, 6))
    x, y = ids[:, :-1], ids[:, 1:]
    model = tiny_lm("float64", normalize_first)
    model(x)
    check_layer_gradients(lambda: _mean_loss(model, x, y), [], model.trainable_variables,
                          rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("policy", ["float32", "mixed_float16", "mixed_bfloat16", "float16"])
def test_the_cnn_and_the_language_model_train_under_every_policy(policy):
    rng = np.random.default_rng(2)
    with nn.policy_scope(policy):
        cnn, lm = small_cnn(), tiny_lm()
    images, labels = rng.standard_normal((16, 6, 6, 2)).astype(np.float32), rng.integers(0, 3, 16)
    # a learnable sequence; fit takes float x, and Embedding accepts whole floats as Keras does
    ids = np.tile(np.arange(6) % 7, (16, 1)).astype(np.float32)
    for model, x, y in ((cnn, images, labels), (lm, ids[:, :-1], ids[:, 1:])):
        model.compile(optimizer=nn.Adam(0.01),
                      loss=nn.losses.SparseCategoricalCrossentropy(from_logits=True))
        loss = model.fit(x, y, epochs=4, batch_size=8, verbose=0).history["loss"]
        assert np.all(np.isfinite(loss)) and loss[-1] < loss[0], (policy, loss)


def _conv_sequential() -> nn.Sequential:
    return nn.Sequential([layers.Conv2d(2, 3, 3, padding=1), layers.LayerNorm((3, 4, 4)),
                          layers.Flatten(), nn.Dense(2)])


@pytest.mark.parametrize("make,x", [
    (small_cnn, np.random.default_rng(3).standard_normal((4, 6, 6, 2)).astype(np.float32)),
    (tiny_lm, np.random.default_rng(3).integers(0, 7, (4, 5)).astype(np.float32)),
    (_conv_sequential, np.random.default_rng(3).standard_normal((4, 2, 4, 4)).astype(np.float32)),
])
def test_save_and_load_model_round_trip_gives_identical_outputs(tmp_path, make, x):
    with nn.policy_scope("mixed_float16"):
        model = make()
    model(x, training=True)  # moves BatchNormalization's moving statistics off their start
    model.save(tmp_path / "m.npz")
    loaded = nn.load_model(tmp_path / "m.npz")
    assert [v.name for v in loaded.weights] == [v.name for v in model.weights]
    for a, b in zip(loaded.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(loaded(x).data, model(x).data)
    assert loaded(x).fmt == model(x).fmt


def _built(name: str) -> tuple[nn.Layer, tuple]:
    """A built instance of each new layer class and the arguments of a call."""
    rng = np.random.default_rng(4)
    img = rng.standard_normal((2, 5, 5, 3)).astype(np.float32)
    seq = rng.standard_normal((2, 4, 6)).astype(np.float32)
    ids = rng.integers(0, 5, (2, 4))
    made: dict[str, tuple[nn.Layer, tuple]] = {
        "Add": (layers.Add(), ([seq, seq],)),
        "AveragePooling2D": (layers.AveragePooling2D(3, strides=2, padding="same"), (img,)),
        "BatchNormalization": (layers.BatchNormalization(momentum=0.9, epsilon=1e-4), (img,)),
        "Conv2D": (layers.Conv2D(2, (3, 2), strides=(2, 1), padding="same",
                                 activation="relu", accumulator="bfloat16"), (img,)),
        "Conv2d": (layers.Conv2d(3, 2, 3, stride=2, padding=1, bias=False),
                   (img.transpose(0, 3, 1, 2),)),
        "Embedding": (layers.Embedding(5, 3), (ids,)),
        "GlobalAveragePooling2D": (layers.GlobalAveragePooling2D(keepdims=True), (img,)),
        "LayerNorm": (layers.LayerNorm(6, eps=1e-4), (seq,)),
        "LayerNormalization": (layers.LayerNormalization(axis=(-2, -1), center=False), (seq,)),
        "MaxPooling2D": (layers.MaxPooling2D((2, 3), padding="same"), (img,)),
        "MultiHeadAttention": (layers.MultiHeadAttention(2, 3, value_dim=2, use_bias=False),
                               (seq, seq[:, :3])),
        "TokenAndPositionEmbedding": (layers.TokenAndPositionEmbedding(5, 4, 6), (ids,)),
        "TransformerBlock": (layers.TransformerBlock(6, 2, 8, normalize_first=True), (seq,)),
    }
    layer, args = made[name]
    layer(*args)
    return layer, args


@pytest.mark.parametrize("name", NEW_LAYERS)
def test_get_config_from_config_round_trip_rebuilds_the_same_layer(name):
    layer, args = _built(name)
    config = nn.layers.serialize(layer)
    clone = nn.layers.deserialize(config)
    assert type(clone) is type(layer)
    assert nn.layers.serialize(clone) == config
    clone(*args)
    assert [w.shape for w in clone.get_weights()] == [w.shape for w in layer.get_weights()]
    clone.set_weights(layer.get_weights())
    np.testing.assert_array_equal(clone(*args).data, layer(*args).data)


def test_every_new_layer_is_registered():
    assert set(NEW_LAYERS) <= set(nn.layers.names())


def test_per_layer_telemetry_counts_the_gradients_of_the_new_layers():
    rng = np.random.default_rng(5)
    with nn.policy_scope("mixed_float16"):
        cnn = small_cnn()
    x, y = rng.standard_normal((4, 6, 6, 2)).astype(np.float32), rng.integers(0, 3, 4)
    with fpsim.monitor() as m:
        _mean_loss(cnn, x, y).backward()
    site_map = telemetry_sites(cnn)
    for layer in cnn.layers[:-1]:
        for site in site_map[layer.name][sites.ACTIVATION]:
            assert m.counts.get(site, {}).get("elements", 0) > 0, site
    for layer in (cnn.layers[0], cnn.layers[3]):
        for var in layer.trainable_variables:
            assert m.counts[sites.weight_grad(var.name)]["elements"] == var.size


def test_attention_weight_gradients_are_counted_at_their_weight_sites():
    with nn.policy_scope("mixed_float16"):
        mha = layers.MultiHeadAttention(2, 3)
    x = np.random.default_rng(6).standard_normal((2, 4, 5)).astype(np.float32)
    with fpsim.monitor() as m:
        mha(x, x, use_causal_mask=True).cast("float32").sum().backward()
    for var in mha.trainable_variables:
        assert m.counts[sites.weight_grad(var.name)]["elements"] == var.size, var.name
    assert m.counts[sites.activation_grad(mha.name)]["elements"] == 2 * 4 * 5
