"""Keras's functional API on nn: nn.Input, layers called on symbolic tensors, nn.Model(inputs=,
outputs=), and the model-building rules shared with Sequential (build, Sequential(*layers)).

Oracles: the same layers applied by hand to concrete tensors (bit-identical), a numpy float64
forward for float32 models, weights from a first call for build(), and the saved model itself.
"""

from __future__ import annotations

import numpy as np
import pytest

import nn
from nn import functions as F
from nn.layers.symbolic import SymbolicTensor

CE = nn.losses.SparseCategoricalCrossentropy


def _data(n: int = 40, d: int = 6, classes: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)).astype(np.float32), rng.integers(0, classes, n)


def _functional(policy: str = "float32", d: int = 6, units: int = 8, seed: int = 0):
    nn.set_random_seed(seed)
    with nn.policy_scope(policy):
        inputs = nn.Input(shape=(d,), name="features")
        x = nn.Dense(units, activation="relu", name="hidden")(inputs)
        x = nn.Dense(3, name="logits")(x)
        outputs = nn.Activation("softmax", dtype="float32", name="probs")(x)
    return nn.Model(inputs=inputs, outputs=outputs, name="net")


# --- symbolic tensors -------------------------------------------------------------------------
def test_input_has_batch_axis_none_and_reports_float32_whatever_the_policy():
    with nn.policy_scope("mixed_float16"):
        inputs = nn.Input(shape=(784,), name="digits")
    assert isinstance(inputs, SymbolicTensor)
    assert inputs.shape == (None, 784) and inputs.ndim == 2
    assert inputs.dtype.name == "float32" and str(inputs.dtype) == "float32"
    assert nn.Input(shape=(3, 4), batch_size=5).shape == (5, 3, 4)


def test_a_layer_called_on_a_symbolic_tensor_builds_and_reports_its_compute_format():
    with nn.policy_scope("mixed_float16"):
        inputs = nn.Input(shape=(12,))
        dense = nn.Dense(5, activation="relu", name="dense_1")
        x = dense(inputs)
    assert dense.built and dense.kernel is not None and dense.kernel.shape == (12, 5)
    assert dense.kernel.fmt.name == "float32"  # master weights
    assert x.shape == (None, 5)
    assert x.dtype.name == "float16" and x.dtype == "float16" and x.dtype != "float32"
    assert str(x.dtype) == "float16" and x.layer_name == "dense_1"


def test_incorrect_softmax_is_float16_and_a_float32_activation_layer_is_float32():
    with nn.policy_scope("mixed_float16"):
        x = nn.Dense(4, name="d")(nn.Input(shape=(3,)))
        incorrect = nn.Dense(10, activation="softmax", name="predictions")(x)
        correct = nn.Activation("softmax", dtype="float32")(nn.Dense(10, name="logits")(x))
    assert incorrect.dtype.name == "float16"
    assert correct.dtype.name == "float32"


def test_an_axis_given_as_none_stays_none_through_a_shape_polymorphic_layer():
    out = nn.Flatten()(nn.Input(shape=(None, 4)))
    assert out.shape == (None, None)
    assert nn.Flatten()(nn.Input(shape=(2, 4))).shape == (None, 8)


def test_a_symbolic_tensor_has_no_values_and_no_arithmetic():
    inputs = nn.Input(shape=(3,))
    for attempt in (lambda: inputs + 1, lambda: 2 * inputs, lambda: np.asarray(inputs),
                    lambda: inputs.numpy()):
        with pytest.raises(TypeError, match="no values.*nn.Model.*inside a layer"):
            attempt()


def test_input_refuses_an_int_shape_and_non_positive_sizes():
    with pytest.raises(TypeError, match=r"shape=\(784,\)"):
        nn.Input(shape=784)
    with pytest.raises(ValueError, match="positive ints or None"):
        nn.Input(shape=(0, 3))


# --- the model ----------------------------------------------------------------------------------
def test_model_of_inputs_and_outputs_is_a_functional_model_with_its_layers_in_graph_order():
    model = _functional()
    assert isinstance(model, nn.Model) and type(model).__name__ == "Functional"
    assert [layer.name for layer in model.layers] == ["features", "hidden", "logits", "probs"]
    assert [v.name for v in model.weights] == ["hidden/kernel", "hidden/bias", "logits/kernel",
                                              "logits/bias"]
    assert model.name == "net"


def test_a_functional_model_computes_what_its_layers_compute_by_hand_bit_for_bit():
    model = _functional("mixed_float16")
    x, _ = _data()
    hidden, logits, probs = model.layers[1:]
    by_hand = probs(logits(hidden(x))).data
    np.testing.assert_array_equal(model.predict(x, verbose=0), by_hand)
    assert model(x).fmt.name == "float32"


def test_a_float32_functional_model_matches_a_numpy_float64_forward():
    model = _functional()
    x, _ = _data()
    k1, b1, k2, b2 = (w.astype(np.float64) for w in model.get_weights())
    z = np.maximum(x @ k1 + b1, 0) @ k2 + b2
    expected = np.exp(z - z.max(1, keepdims=True))
    expected /= expected.sum(1, keepdims=True)
    np.testing.assert_allclose(model.predict(x, verbose=0), expected, rtol=1e-5, atol=1e-6)


def test_outputs_that_need_an_input_missing_from_inputs_are_a_disconnected_graph():
    a, b = nn.Input(shape=(2,), name="a"), nn.Input(shape=(2,), name="b")
    out = _Sum()([nn.Dense(2)(a), nn.Dense(2)(b)])
    with pytest.raises(ValueError, match="input 'b', which is not in Model.*disconnected"):
        nn.Model(inputs=a, outputs=out)


def test_inputs_must_come_from_nn_input():
    x = nn.Dense(2)(nn.Input(shape=(2,)))
    with pytest.raises(ValueError, match="straight from nn.Input"):
        nn.Model(inputs=x, outputs=nn.Dense(1)(x))
    with pytest.raises(TypeError, match="symbolic tensor"):
        nn.Model(inputs=np.zeros((1, 2)), outputs=x)


def test_a_layer_called_twice_in_one_graph_is_refused_as_a_shared_layer():
    inputs = nn.Input(shape=(3,))
    dense = nn.Dense(3, name="twice")
    with pytest.raises(ValueError, match="'twice' is already in model.*shared layers"):
        nn.Model(inputs=inputs, outputs=dense(dense(inputs)))


def test_calling_the_model_on_data_of_the_wrong_shape_names_the_input_and_both_shapes():
    model = _functional()
    with pytest.raises(ValueError, match=r"input 'features' expects shape \(None, 6\), got "
                                         r"\(2, 5\)"):
        model(np.zeros((2, 5), np.float32))


def test_summary_lists_the_input_layer_shapes_formats_and_connections():
    text = _functional("mixed_float16").summary(print_fn=None)
    lines = text.splitlines()
    assert "connected to" in lines[1]
    row = next(line for line in lines if line.startswith("logits (Dense)"))
    assert "(None, 3)" in row and "float16" in row and row.rstrip().endswith("hidden")
    assert any(line.startswith("features (InputLayer)") and "(None, 6)" in line
               for line in lines)
    assert f"total params: {6 * 8 + 8 + 8 * 3 + 3:,}" in text


def test_the_config_is_the_graph_and_names_only_registered_classes():
    config = _functional().get_config()
    assert [e["class_name"] for e in config["layers"]] == ["InputLayer", "Dense", "Dense",
                                                           "Activation"]
    assert config["layers"][2]["inbound"] == {"call": "tensor", "kwargs": {},
                                              "tensors": [["hidden", 0]]}
    assert config["inputs"] == [["features", 0]] and config["outputs"] == [["probs", 0]]
    for entry in config["layers"]:
        assert not entry["class_name"].startswith("_")
        cls = nn.engine.registry.LAYERS.get_class(entry["class_name"])
        assert cls.__name__ == entry["class_name"]


def test_save_and_load_round_trip_predicts_and_trains_on_bit_identically(tmp_path):
    x, y = _data()
    model = _functional("mixed_float16").compile("adam", "sparse_categorical_crossentropy",
                                                 ["accuracy"])
    model.fit(x, y, batch_size=8, epochs=1, seed=3, verbose=0)
    model.save(tmp_path / "f.npz")
    loaded = nn.load_model(tmp_path / "f.npz")
    assert type(loaded).__name__ == "Functional"
    assert loaded.get_config() == model.get_config()
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    assert isinstance(loaded.optimizer, nn.LossScaleOptimizer)
    assert loaded.optimizer.loss_scale == model.optimizer.loss_scale
    h1 = model.fit(x, y, batch_size=8, epochs=1, seed=3, verbose=0)
    h2 = loaded.fit(x, y, batch_size=8, epochs=1, seed=3, verbose=0)
    assert h1.step_loss == h2.step_loss
    for a, b in zip(model.get_weights(), loaded.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_fit_records_telemetry_for_every_layer_of_the_graph_but_the_input():
    x, y = _data()
    model = _functional("mixed_float16").compile("sgd", "sparse_categorical_crossentropy")
    h = model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    events = h.gradient_events[0]
    assert set(events) == {"hidden", "logits", "probs"}
    assert events["hidden"]["activation"]["elements"] == len(x) * 8


def test_get_weights_and_set_weights_round_trip():
    model = _functional()
    weights = [w + 1 for w in model.get_weights()]
    model.set_weights(weights)
    for a, b in zip(model.get_weights(), weights, strict=True):
        np.testing.assert_array_equal(a, b)


# --- several inputs -------------------------------------------------------------------------------
class _Sum(nn.Layer):
    """A two-input layer called on a list, as Keras's Add: ``_Sum()([a, b])``. Its own
    ``__call__`` has no functional-API code: the Layer base routes symbolic calls."""

    def __call__(self, inputs, training=False):
        self.built = True
        a, b = (F.cast(t if isinstance(t, nn.Tensor) else nn.Tensor(t), self.compute_format)
                for t in inputs)
        return a + b


class _Scaled(nn.Layer):
    """A two-argument layer, as MultiHeadAttention's ``layer(query, value)``."""

    def __call__(self, a, b, training=False, factor=1.0):
        self.built = True
        return (a + b) * factor


_REGISTERED: list[type] = []


def _register_two_input_layers() -> None:
    """Registered when a test runs, not at import: the registry tests parametrize over the
    registered layers when they are collected, and these take two inputs."""
    if not _REGISTERED:
        _REGISTERED.extend(nn.layers.register(cls) for cls in (_Sum, _Scaled))


def test_a_layer_called_on_a_list_of_symbolic_tensors_records_every_input():
    _register_two_input_layers()
    a, b = nn.Input(shape=(2,), name="a"), nn.Input(shape=(2,), name="b")
    out = _Sum(name="sum")([nn.Dense(2, name="da")(a), nn.Dense(2, name="db")(b)])
    model = nn.Model(inputs=[a, b], outputs=out)
    assert [layer.name for layer in model.layers] == ["a", "b", "da", "db", "sum"]
    assert model.get_config()["layers"][-1]["inbound"]["tensors"] == [["da", 0], ["db", 0]]
    xa, xb = np.ones((3, 2), np.float32), np.full((3, 2), 2.0, np.float32)
    da, db = model.layers[2], model.layers[3]
    np.testing.assert_array_equal(model.predict([xa, xb], verbose=0),
                                  (da(xa) + db(xb)).data)
    np.testing.assert_array_equal(model({"a": xa, "b": xb}).data, (da(xa) + db(xb)).data)


def test_a_layer_called_with_two_tensor_arguments_keeps_its_keyword_options(tmp_path):
    _register_two_input_layers()
    a, b = nn.Input(shape=(2,), name="a"), nn.Input(shape=(2,), name="b")
    model = nn.Model(inputs=[a, b], outputs=_Scaled(name="scaled")(a, b, factor=0.5))
    node = model.get_config()["layers"][-1]["inbound"]
    assert node == {"call": "args", "kwargs": {"factor": 0.5}, "tensors": [["a", 0], ["b", 0]]}
    x = np.array([[1.0, 3.0]], np.float32)
    np.testing.assert_array_equal(model([x, x]).data, x)
    model.save(tmp_path / "two.npz")
    loaded = nn.load_model(tmp_path / "two.npz")
    assert loaded.get_config() == model.get_config()
    np.testing.assert_array_equal(loaded([x, 3 * x]).data, 2 * x)


def test_fit_of_a_two_input_model_raises_not_implemented():
    a, b = nn.Input(shape=(2,)), nn.Input(shape=(2,))
    model = nn.Model(inputs=[a, b], outputs=_Sum()([a, b])).compile("sgd", "mse")
    with pytest.raises(NotImplementedError, match="several inputs"):
        model.fit([np.ones((2, 2))] * 2, np.ones((2, 2)), verbose=0)


# --- building and constructing Sequential -------------------------------------------------------
def test_an_unbuilt_sequential_model_has_no_weights_and_says_how_to_build_it():
    model = nn.Sequential([nn.Dense(4), nn.Dense(2)])
    with pytest.raises(ValueError, match=r"not built.*model\(x\).*model.build\(\(None, 784\)\)"
                                         r".*nn.Input"):
        model.get_weights()
    with pytest.raises(ValueError, match="not built"):
        model.set_weights([])


def test_sequential_build_creates_the_weights_a_first_call_would_create():
    nn.set_random_seed(4)
    built = nn.Sequential([nn.Dense(4), nn.Dense(2)])
    built.build((None, 7))
    nn.set_random_seed(4)
    called = nn.Sequential([nn.Dense(4), nn.Dense(2)])
    called(np.zeros((1, 7), np.float32))
    assert [w.shape for w in built.get_weights()] == [(7, 4), (4,), (4, 2), (2,)]
    for a, b in zip(built.get_weights(), called.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    assert "(None, 2)" in built.summary(print_fn=None)


def test_build_refuses_a_shape_without_the_batch_axis():
    with pytest.raises(ValueError, match=r"batch axis first, e.g. model.build\(\(None, 784\)\)"):
        nn.Sequential([nn.Dense(2)]).build((784,))


def test_sequential_takes_layers_as_arguments_or_as_a_list():
    x = np.ones((2, 5), np.float32)
    nn.set_random_seed(1)
    a = nn.Sequential(nn.Dense(3, name="l1"), nn.ReLU(name="r1"))
    out_a = a(x).data
    nn.set_random_seed(1)
    b = nn.Sequential([nn.Dense(3, name="l2"), nn.ReLU(name="r2")], "named")
    assert [type(layer) for layer in a.layers] == [type(layer) for layer in b.layers]
    assert b.name == "named"
    np.testing.assert_array_equal(out_a, b(x).data)
    assert len(nn.Sequential(layers=[nn.Dense(1)]).layers) == 1


@pytest.mark.parametrize("args", [([nn.Dense(1)], nn.Dense(1)), (nn.Dense(1), [nn.Dense(1)]),
                                  (nn.Dense(1), "name")])
def test_sequential_refuses_a_mix_of_the_two_spellings(args):
    with pytest.raises(TypeError, match=r"Sequential\(\[a, b, c\]\).*Sequential\(a, b, c\)"):
        nn.Sequential(*args)


def test_an_input_first_in_a_sequential_model_builds_each_layer_as_it_is_added():
    model = nn.Sequential([nn.Input(shape=(5,)), nn.Dense(3), nn.Dense(2)])
    assert [w.shape for w in model.get_weights()] == [(5, 3), (3,), (3, 2), (2,)]
    model.add(nn.Dense(4))
    assert model.get_weights()[-2].shape == (2, 4)
    assert "(None, 4)" in model.summary(print_fn=None)
    with pytest.raises(ValueError, match="nn.Input can only be its first element"):
        model.add(nn.Input(shape=(4,)))
    with pytest.raises(ValueError, match="not a tensor made by a layer.*nn.Model"):
        nn.Sequential([nn.Dense(2)(nn.Input(shape=(3,)))])


def test_a_functional_model_can_be_a_layer_of_a_sequential_model():
    inner = _functional(d=4)
    outer = nn.Sequential([nn.Dense(4, name="pre"), inner])
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(outer(x).data, inner(outer.layers[0](x)).data)


def test_a_functional_model_called_on_a_symbolic_tensor_is_one_node_of_the_outer_graph(tmp_path):
    inner = _functional(d=4)
    inputs = nn.Input(shape=(3,), name="outer_in")
    outputs = inner(nn.Dense(4, name="pre")(inputs))
    assert outputs.shape == (None, 3) and outputs.dtype == "float32"
    outer = nn.Model(inputs=inputs, outputs=outputs, name="outer")
    assert [layer.name for layer in outer.layers] == ["outer_in", "pre", "net"]
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(outer(x).data, inner(outer.layers[1](x)).data)
    outer.save(tmp_path / "nested.npz")
    np.testing.assert_array_equal(nn.load_model(tmp_path / "nested.npz")(x).data, outer(x).data)
