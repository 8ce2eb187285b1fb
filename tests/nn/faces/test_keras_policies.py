"""The Keras 3 face's layers hold Keras 3's dtype policies (keras/src/layers/layer.py): a
``DTypePolicy`` that never equals a string, Keras's automatic names, and a
``DTypePolicyMap`` looked up by the layer's ``path``."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import nn
from nn.faces import keras
from nn.faces.keras import base_layer
from nn.faces.keras import layers as L

BF16 = ml_dtypes.bfloat16
ARGS = {  # constructor arguments of every layer class the face exports
    "Activation": ("relu",), "Add": (), "AveragePooling2D": (), "BatchNormalization": (),
    "Conv2D": (2, 3), "Dense": (2,), "Dropout": (0.5,), "Embedding": (5, 3), "Flatten": (),
    "GlobalAveragePooling2D": (), "LayerNormalization": (), "MaxPooling2D": (),
    "MultiHeadAttention": (2, 4), "ReLU": (),
}
KERAS_NAMES = {  # keras.src.utils.naming.to_snake_case of Keras's class names
    "Activation": "activation", "Add": "add", "AveragePooling2D": "average_pooling2d",
    "BatchNormalization": "batch_normalization", "Conv2D": "conv2d", "Dense": "dense",
    "Dropout": "dropout", "Embedding": "embedding", "Flatten": "flatten",
    "GlobalAveragePooling2D": "global_average_pooling2d",
    "LayerNormalization": "layer_normalization", "MaxPooling2D": "max_pooling2d",
    "MultiHeadAttention": "multi_head_attention", "ReLU": "re_lu",
}


def test_the_tables_cover_every_layer_class_the_face_exports():
    exported = {n for n in L.__all__ if isinstance(getattr(L, n), type)}
    assert exported - {"Layer", "InputLayer"} == set(ARGS) == set(KERAS_NAMES)
    assert all(issubclass(getattr(L, n), base_layer.Layer) for n in exported)


@pytest.mark.parametrize("name", sorted(ARGS))
def test_every_face_layer_holds_a_keras_dtype_policy_that_never_equals_a_string(name):
    layer = getattr(L, name)(*ARGS[name], dtype="mixed_bfloat16")
    assert type(layer.dtype_policy) is keras.DTypePolicy
    assert layer.dtype_policy != "mixed_bfloat16"  # Keras 3: a policy never equals a str
    assert layer.dtype_policy == keras.DTypePolicy("mixed_bfloat16")
    assert (layer.compute_dtype, layer.variable_dtype, layer.dtype) == (
        "bfloat16", "float32", "float32")


@pytest.mark.parametrize("name", sorted(ARGS))
def test_every_face_layer_is_named_as_keras_names_it(name):
    first = getattr(L, name)(*ARGS[name])
    base = KERAS_NAMES[name]
    assert first.name == base or first.name.startswith(f"{base}_")
    assert base_layer.keras_name(getattr(L, name)) == base


def test_nn_policy_and_global_policy_become_keras_policies():
    nn.set_global_policy("mixed_float16")
    try:
        relu = L.ReLU()
    finally:
        nn.set_global_policy("float32")
    assert type(relu.dtype_policy) is keras.DTypePolicy and relu.compute_dtype == "float16"
    norm = L.LayerNormalization(dtype=nn.Policy("bfloat16"))
    assert type(norm.dtype_policy) is keras.DTypePolicy and norm.variable_dtype == "bfloat16"


def test_a_quantized_policy_on_a_layer_other_than_dense_raises_naming_dense():
    policy = keras.dtype_policies.QuantizedFloat8DTypePolicy("float8", "float32")
    with pytest.raises(ValueError, match="only keras.layers.Dense runs .*'float8'"):
        L.Conv2D(2, 3, dtype=policy)
    routed = L.Conv2D(2, 3, dtype=keras.dtype_policies.DTypePolicyMap(
        "float32", {"conv": "float8_from_float32"}), name="conv")
    with pytest.raises(ValueError, match="only keras.layers.Dense runs .*'float8'"):
        routed(np.ones((1, 4, 4, 1), np.float32))


# --- DTypePolicyMap: a layer looks itself up by its path ---------------------------------
def _map():
    return keras.dtype_policies.DTypePolicyMap(
        "float32", {"sequential/dense_.*": "mixed_bfloat16", "head": "float16"})


def _keras_dense_bf16(x, kernel, bias):
    """Keras 3's Dense under mixed_bfloat16: x, kernel to bf16; matmul (fp32 sums) to bf16;
    the bias (bf16) added in bf16."""
    mm = (x.astype(BF16).astype(np.float32) @ kernel.astype(BF16).astype(np.float32))
    return (mm.astype(BF16) + bias.astype(BF16)).astype(np.float32)


@pytest.mark.parametrize("built_by", ["build", "first call"])
def test_layers_of_a_sequential_look_up_sequential_slash_name(built_by):
    policy_map = _map()
    model = keras.Sequential([L.Dense(3, dtype=policy_map, name="dense"),
                              L.Dense(2, dtype=policy_map, name="dense_1")], name="sequential")
    x = np.random.default_rng(0).normal(size=(4, 5)).astype(np.float32)
    if built_by == "build":
        model.build((None, 5))
    else:
        model(x)
    first, second = model.layers
    assert (first.path, second.path) == ("sequential/dense", "sequential/dense_1")
    # "sequential/dense_.*" does not fullmatch "sequential/dense": the default, float32
    assert [first.compute_dtype, second.compute_dtype] == ["float32", "bfloat16"]
    assert [first.kernel.fmt.name, second.kernel.fmt.name] == ["float32", "float32"]
    assert first.dtype_policy is policy_map  # Keras 3: the layer keeps the map itself


def test_a_routed_layer_computes_and_stores_in_the_policy_its_path_finds():
    policy_map = _map()
    head = L.Dense(3, dtype=policy_map, name="head")
    x = np.random.default_rng(1).normal(size=(4, 5)).astype(np.float32)
    y = head(x)
    assert head.path == "head" and (head.compute_dtype, head.variable_dtype) == (
        "float16", "float16")
    assert head.kernel.fmt.name == "float16" and y.fmt.name == "float16"
    body = L.Dense(3, dtype=keras.dtype_policies.DTypePolicyMap(
        "float32", {"body": "mixed_bfloat16"}), name="body")
    y = body(x)
    kernel, bias = (w.numpy() for w in body.weights)
    assert body.kernel.fmt.name == "float32"
    np.testing.assert_array_equal(y.numpy(), _keras_dense_bf16(x, kernel, bias))


def test_the_functional_api_calls_layers_before_the_model_exists_so_their_path_is_the_name():
    policy_map = keras.dtype_policies.DTypePolicyMap("float32", {"hidden": "mixed_float16"})
    inputs = keras.Input(shape=(4,))
    hidden = L.Dense(3, dtype=policy_map, name="hidden")
    model = keras.Model(inputs=inputs, outputs=L.Dense(2, dtype=policy_map)(hidden(inputs)))
    assert hidden.path == "hidden" and hidden.compute_dtype == "float16"
    assert model.layers[-1].compute_dtype == "float32"


def test_setting_dtype_policy_on_a_routed_layer_writes_into_the_map_at_its_path():
    policy_map = _map()
    layer = L.Dense(2, dtype=policy_map, name="out")
    layer(np.ones((1, 3), np.float32))
    layer.dtype_policy = "bfloat16"
    assert policy_map["out"] == keras.DTypePolicy("bfloat16")
    assert layer.dtype_policy is policy_map and layer.compute_dtype == "bfloat16"


def test_an_nn_layer_given_a_map_raises_naming_the_face_layers():
    with pytest.raises(ValueError, match="routed by the layers of nn.faces.keras.layers only"):
        nn.Dense(2, dtype=_map())(np.ones((1, 3), np.float32))


def test_compiling_a_routed_model_before_its_layers_have_paths_raises_saying_build_first():
    policy_map = keras.dtype_policies.DTypePolicyMap("float32", {"sequential/dense_1": "float16"})
    model = keras.Sequential([L.Dense(4, dtype=policy_map, name="dense"),
                              L.Dense(3, dtype=policy_map, name="dense_1")], name="sequential")
    with pytest.raises(ValueError, match="has no path yet.*model.build"):
        model.compile(keras.optimizers.SGD(0.1), "mse")
    model.build((None, 5))
    model.compile(keras.optimizers.SGD(0.1), "mse")
    model.fit(np.ones((4, 5), np.float32), np.ones((4, 3), np.float32), verbose=0)
    assert [layer.compute_dtype for layer in model.layers] == ["float32", "float16"]


def test_keras_input_takes_keras_argument_order_and_makes_a_keras_input_layer():
    inputs = keras.Input((3,), None, "float16")  # Keras 3: (shape, batch_size, dtype, ...)
    model = keras.Model(inputs=inputs, outputs=L.Dense(2)(inputs))
    first = model.layers[0]
    assert isinstance(first, L.InputLayer) and first.name.startswith("input_layer")
    assert inputs.dtype.name == "float16" and first.dtype_policy != "float16"
    assert keras.Input(batch_shape=(4, 3)).shape == (4, 3)
    with pytest.raises(ValueError, match="sparse=True is not emulated"):
        keras.Input((3,), sparse=True)
