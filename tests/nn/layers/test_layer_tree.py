"""One layer tree: the layers a layer holds (as attributes, in lists, tuples or dicts, at any
depth) are found by one walk, used by weights, trainable_variables, parameters(), state_dict,
summary, fit, checkpoints, fp8 recipes and telemetry.

Oracle: each subclassed model computes what a ``Sequential`` of the same layers computes, so
given the same initial weights, fit and a hand-written loop must leave bit-identical weights in
both; the resume check trains straight and save/load/train-on (tests/nn/resume.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from resume import assert_resume_is_bit_identical

import nn
from nn.fp8.scope import recipes_of
from nn.training.loop import iter_layers, telemetry_sites

RNG = np.random.default_rng(11)
X = RNG.normal(size=(40, 6)).astype(np.float32)
Y = RNG.integers(0, 3, size=40)
CE = nn.losses.SparseCategoricalCrossentropy


@nn.layers.register
class KerasNet(nn.Model):
    """Keras's way: layers as attributes in ``__init__``, ``call(x, training)``."""

    def __init__(self, hidden: int = 8, dtype: Any = None, name: str | None = None) -> None:
        super().__init__(name=name)
        self.hidden = hidden
        self.body = nn.Dense(hidden, activation="relu", dtype=dtype)
        self.head = nn.Dense(3)

    def call(self, x: Any, training: bool = False) -> Any:
        return self.head(self.body(x, training=training), training=training)

    def get_config(self) -> dict[str, Any]:
        return {"hidden": self.hidden, "name": self.name}


@nn.layers.register
class TorchNet(nn.Model):
    """PyTorch's way: ``forward(x)``, with a list of layers."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name=name)
        self.stack = [nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)]

    def forward(self, x: Any) -> Any:
        for layer in self.stack:
            x = layer(x)
        return x

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name}


class OldSpelling(nn.Layer, nn.Model):
    """nn's older spelling of a custom model: means ``class OldSpelling(nn.Model)``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 4)
        self.fc2 = nn.Linear(4, 3)

    def call(self, x: Any, training: bool = False) -> Any:
        return self.fc2(self.fc1(x))


def _same_as_sequential(model: nn.Model, x: np.ndarray) -> nn.Sequential:
    """A Sequential of fresh copies of ``model``'s leaf layers with its weights."""
    leaves = [layer for layer in iter_layers(model) if layer is not model]
    twin = nn.Sequential([type(layer).from_config({**layer.get_config(), "name": None})
                          for layer in leaves])
    twin(x[:1])
    twin.set_weights(model.get_weights())
    return twin


@pytest.mark.parametrize("make", [KerasNet, TorchNet, OldSpelling])
def test_every_walk_finds_the_layers_held_as_attributes(make):
    nn.set_random_seed(0)
    model = make()
    model(X[:2])
    n = 4  # two kernels and two biases
    assert isinstance(model, nn.Layer) and isinstance(model, nn.Model)
    assert len(model.weights) == len(model.trainable_variables) == n
    assert [id(v) for v in model.parameters()] == [id(v) for v in model.trainable_variables]
    assert len(model.state_dict()) == n and len(model.get_weights()) == n
    assert len(list(model.children())) == (3 if make is TorchNet else 2)
    assert set(telemetry_sites(model)) == {
        layer.name for layer in iter_layers(model)} - {model.name}
    text = model.summary(print_fn=None)
    assert f"total params: {sum(v.size for v in model.weights):,}" in text


@pytest.mark.parametrize("make", [KerasNet, TorchNet, OldSpelling])
def test_fit_trains_a_subclassed_model_as_the_same_sequential(make):
    nn.set_random_seed(1)
    model = make()
    model(X[:1])
    twin = _same_as_sequential(model, X)
    for m in (model, twin):
        m.compile(nn.SGD(0.1), CE(from_logits=True))
        m.fit(X, Y, batch_size=8, epochs=2, seed=3, verbose=0)
    assert not np.array_equal(model.get_weights()[0], twin.get_weights()[0] * 0)
    for a, b in zip(model.get_weights(), twin.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("make", [KerasNet, TorchNet, OldSpelling])
def test_a_hand_loop_trains_a_subclassed_model_as_the_same_sequential(make):
    nn.set_random_seed(2)
    model = make()
    model(X[:1])
    twin = _same_as_sequential(model, X)
    start = [w.copy() for w in model.get_weights()]
    for m in (model, twin):
        opt = nn.SGD(0.1, params=m.parameters())
        loss_fn = nn.CrossEntropyLoss()
        m.train()
        for i in range(0, 40, 8):
            opt.zero_grad()
            loss_fn(m(X[i:i + 8]), Y[i:i + 8]).backward()
            opt.step()
    assert any(not np.array_equal(a, b) for a, b in zip(start, model.get_weights(), strict=True))
    for a, b in zip(model.get_weights(), twin.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("make", [KerasNet, TorchNet])
def test_a_subclassed_model_saves_loads_and_resumes_bit_identically(make, tmp_path):
    def build() -> nn.Model:
        nn.set_random_seed(4)
        model = make(name="net")
        model(X[:1])
        return model.compile(nn.Adam(0.01), CE(from_logits=True))

    resumed = assert_resume_is_bit_identical(build, X, Y, tmp_path / "net.npz",
                                             batch_size=8, seed=5)
    assert type(resumed) is make
    state = build().state_dict()
    fresh = make(name="other")
    fresh(X[:1])
    fresh.load_state_dict(state)
    assert all(np.array_equal(a, b) for a, b in zip(fresh.state_dict().values(), state.values(),
                                                     strict=True))


def test_fp8_telemetry_of_a_layer_inside_a_subclassed_model_reaches_history():
    nn.set_random_seed(6)
    model = KerasNet(dtype="fp8_hybrid_delayed")
    model.compile(nn.SGD(0.05), CE(from_logits=True))
    history = model.fit(X, Y, batch_size=8, epochs=2, seed=0, verbose=0)
    [recipe] = recipes_of(model)
    assert recipe is model.body.policy.recipe
    name = f"{model.name}/{model.body.name}/Linear/input"  # name scopes nest, as in Keras
    assert name in history.fp8_names() and history.fp8[0][name]["quantizations"] == 5
    assert history.fp8_names() == recipe.log.names()
    events = history.gradient_events[0]
    assert set(events) == {model.body.name, model.head.name}  # per layer, not per model
    assert events[model.body.name]["activation"]["elements"] > 0


def test_nested_lists_and_dicts_of_layers_are_found_in_assignment_order():
    class Deep(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.first = nn.Linear(2, 2)
            self.groups = [[nn.Linear(2, 2)], {"a": nn.Linear(2, 2), "b": (nn.Linear(2, 2),)}]
            self.heads = {"q": nn.Linear(2, 1)}
            self.note = "not a layer"
            self.empty: list[Any] = []

    deep = Deep()
    deep.empty.append(nn.Linear(2, 3))  # a list filled after assignment is seen
    keys = [k for k, _ in deep.named_children()]
    assert keys == ["first", "groups.0.0", "groups.1.a", "groups.1.b.0", "heads.q", "empty.0"]
    assert [k for k, _ in deep.named_parameters()][:4] == [
        "first.weight", "first.bias", "groups.0.0.weight", "groups.0.0.bias"]
    assert len(deep.weights) == 12
    del deep.heads
    assert "heads.q" not in [k for k, _ in deep.named_children()]


def test_a_layer_held_twice_is_walked_once_and_a_frozen_one_holds_no_trainable_variable():
    class Twice(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(2, 2)
            self.again = [self.a]
            self.b = nn.Linear(2, 2)

    twice = Twice()
    assert [k for k, _ in twice.named_children()] == ["a", "b"]
    assert len(twice.weights) == 4
    twice.b.trainable = False
    assert len(twice.trainable_variables) == 2 and len(twice.weights) == 4
    twice.trainable = False
    assert twice.trainable_variables == [] and list(twice.parameters()) == []


def test_forward_gets_fits_training_mode_through_the_call_context():
    class Drop(nn.Model):
        def __init__(self) -> None:
            super().__init__()
            self.drop = nn.Dropout(0.5, seed=0)

        def forward(self, x: Any) -> Any:
            return self.drop(x)

    model = Drop()
    x = np.ones((4, 8), np.float32)
    assert np.array_equal(model(x).data, x)  # no mode set: inference (Keras's default)
    assert not np.array_equal(model(x, training=True).data, x)  # dropout on inside
    model.eval()
    assert np.array_equal(model(x).data, x)


def test_a_layer_built_by_hand_keeps_the_weights_set_before_its_first_call():
    """Keras 3: ``build`` marks the layer built, so ``set_weights`` after it is what the first
    call uses (it used to build new weights on that call)."""
    d = nn.Dense(2)
    d.build((None, 3))
    d.set_weights([np.ones((3, 2), np.float32), np.zeros(2, np.float32)])
    np.testing.assert_array_equal(d(np.ones((1, 3), np.float32)).numpy(), [[3.0, 3.0]])
    assert len(d.get_weights()) == 2 and d.built
