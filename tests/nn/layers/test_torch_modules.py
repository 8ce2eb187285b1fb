"""nn.Linear and the PyTorch module verbs every layer has: parameters, state_dict, train/eval."""

from __future__ import annotations

import math

import numpy as np
import pytest
from nn_gradcheck import check_model_gradients

import nn


def test_linear_has_pytorch_layout_and_init_bounds():
    layer = nn.Linear(50, 30)
    assert layer.built and layer.weight.shape == (30, 50) and layer.bias.shape == (30,)
    bound = 1 / math.sqrt(50)
    for w in (layer.weight.data, layer.bias.data):
        assert np.abs(w).max() <= bound
    # U(-b, b): over 1500 draws the extremes come within 1% of the bound, the mean near 0
    assert np.abs(layer.weight.data).max() > 0.99 * bound
    assert abs(float(layer.weight.data.mean())) < 0.05 * bound
    assert nn.Linear(3, 2, bias=False).bias is None


def test_linear_computes_x_times_weight_transposed_plus_bias():
    layer = nn.Linear(5, 3, seed=1)
    x = np.random.default_rng(0).normal(size=(4, 5)).astype(np.float32)
    w, b = layer.weight.data.astype(np.float64), layer.bias.data.astype(np.float64)
    np.testing.assert_allclose(layer(x).data, x @ w.T + b, rtol=1e-6)
    x3 = x.reshape(2, 2, 5)  # (*, in_features), as in PyTorch
    np.testing.assert_allclose(layer(x3).data, (x @ w.T + b).reshape(2, 2, 3), rtol=1e-6)


def test_linear_rounds_like_dense_under_mixed_float16():
    layer = nn.Linear(6, 4, seed=2, dtype="mixed_float16")
    assert layer.weight.fmt.name == "float32"  # fp32 master weights
    x = np.random.default_rng(1).normal(size=(3, 6)).astype(np.float32)
    out = layer(x)
    h = lambda a: a.astype(np.float16).astype(np.float64)  # noqa: E731
    expected = h(h(x) @ h(layer.weight.data).T + h(layer.bias.data))
    assert out.fmt.name == "float16"
    np.testing.assert_allclose(out.data, expected, rtol=2**-10)


def test_linear_gradients_match_float64_central_differences():
    nn.set_global_policy("float64")
    model = nn.Sequential([nn.Linear(4, 5, seed=0), nn.ReLU(), nn.Linear(5, 3, seed=1)])
    x = np.random.default_rng(2).normal(size=(6, 4))
    y = np.random.default_rng(3).normal(size=(6, 3))
    check_model_gradients(model, lambda t, p: nn.MSELoss()(p, t), x, y)


def test_linear_rejects_bad_arguments_and_inputs_naming_them():
    with pytest.raises(ValueError, match="in_features"):
        nn.Linear(0, 3)
    with pytest.raises(ValueError, match="out_features"):
        nn.Linear(3, 2.5)
    with pytest.raises(TypeError, match="bias"):
        nn.Linear(3, 2, bias="yes")
    with pytest.raises(ValueError, match="in_features=3"):
        nn.Linear(3, 2)(np.ones((2, 4), np.float32))


def test_linear_model_saves_and_loads_with_its_weights(tmp_path):
    model = nn.Sequential([nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)])
    model.compile("sgd", "mse")
    x = np.ones((2, 3), np.float32)
    model(x)  # save() wants every layer built, the weightless ReLU included
    model.save(tmp_path / "m.npz")
    loaded = nn.load_model(tmp_path / "m.npz")
    np.testing.assert_array_equal(loaded(x).data, model(x).data)


def test_state_dict_keys_do_not_depend_on_automatic_layer_names():
    a = nn.Sequential([nn.Dense(4), nn.ReLU(), nn.Dense(2)])
    b = nn.Sequential([nn.Dense(4), nn.ReLU(), nn.Dense(2)])  # names dense_2, dense_3, ...
    x = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    a(x), b(x)
    assert a.layers[0].name != b.layers[0].name
    assert list(a.state_dict()) == list(b.state_dict()) == ["0.kernel", "0.bias", "2.kernel",
                                                            "2.bias"]
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(b(x).data, a(x).data)


def test_custom_model_keys_use_attribute_names():
    class Net(nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(3, 4)
            self.blocks = [nn.Linear(4, 4), nn.Linear(4, 2)]

        def call(self, x, training=False):
            x = self.fc1(x)
            for block in self.blocks:
                x = block(x)
            return x

    net = Net()
    assert [k for k, _ in net.named_parameters()] == [
        "fc1.weight", "fc1.bias", "blocks.0.weight", "blocks.0.bias", "blocks.1.weight",
        "blocks.1.bias"]
    assert [type(m).__name__ for m in net.modules()] == ["Net", "Linear", "Linear", "Linear"]


def test_state_dict_is_a_copy_and_holds_non_trainable_weights():
    layer = nn.Linear(2, 2)
    layer.bias.trainable = False
    sd = layer.state_dict()
    sd["weight"][...] = 7
    assert not np.any(layer.weight.data == 7)
    assert list(sd) == ["weight", "bias"]
    assert [k for k, _ in layer.named_parameters()] == ["weight"]


def test_load_state_dict_strict_lists_missing_and_unexpected_keys_and_changes_nothing():
    model = nn.Sequential([nn.Linear(2, 3), nn.Linear(3, 1)])
    before = model.state_dict()
    sd = dict(before)
    del sd["1.bias"]
    sd["2.weight"] = np.zeros((1, 1))
    sd["0.weight"] = np.full((3, 2), 5.0)
    with pytest.raises(RuntimeError, match=r'Missing key\(s\).*"1.bias"(.|\n)*Unexpected key\(s\)'
                                           r'.*"2.weight"'):
        model.load_state_dict(sd)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, before[k])
    result = model.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["1.bias"] and result.unexpected_keys == ["2.weight"]
    np.testing.assert_array_equal(model.layers[0].weight.data, 5.0)


def test_load_state_dict_shape_mismatch_names_the_key_even_when_not_strict():
    model = nn.Sequential([nn.Linear(2, 3)])
    with pytest.raises(RuntimeError, match=r"size mismatch for 0.weight.*\(2, 3\).*\(3, 2\)"):
        model.load_state_dict({"0.weight": np.zeros((2, 3))}, strict=False)


def test_parameters_of_an_unbuilt_model_raise_saying_how_to_build():
    model = nn.Sequential([nn.Dense(3)])
    with pytest.raises(ValueError, match=r"call the model on a batch once.*nn.Linear"):
        list(model.parameters())


def test_train_and_eval_set_the_mode_used_by_calls_without_training_argument():
    model = nn.Sequential([nn.Linear(4, 4), nn.Dropout(0.5, seed=0)])
    x = np.ones((64, 4), np.float32)
    assert model.training is None
    np.testing.assert_array_equal(model(x).data, model(x, training=False).data)  # Keras default
    assert model.train() is model and all(m.training is True for m in model.modules())
    dropped = model(x).data
    assert np.count_nonzero(dropped == 0) > 0  # dropout on in train mode
    assert model.eval() is model and all(m.training is False for m in model.modules())
    np.testing.assert_array_equal(model(x).data, model.layers[0](x).data)  # dropout off
    assert np.count_nonzero(model(x, training=True).data == 0) > 0  # an explicit argument wins
    with pytest.raises(ValueError, match="mode"):
        model.train("yes")


def test_module_zero_grad_and_device_calls():
    layer = nn.Linear(2, 2)
    layer(np.ones((1, 2), np.float32)).sum().backward()
    layer.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(layer.weight.grad.data, 0)
    layer.zero_grad()
    assert layer.weight.grad is None
    assert layer.to("cpu") is layer
    with pytest.raises(ValueError, match="fpsim emulates every format on the CPU"):
        layer.to("cuda")
