"""The registries: every registered class rebuilds from its config, every layer with weights
survives a checkpoint, and a layer defined here joins with one decorator and no other edit.

The oracle for a round trip is the original object: its config (and, through a checkpoint,
its weights and predictions) compared exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from resume import assert_resume_is_bit_identical

import nn
import nn.faces.keras  # noqa: F401 (registers the Keras 3 face's KerasDense in every worker)
from nn.engine.registry import ACTIVATIONS, LAYERS, LOSSES, METRICS, OPTIMIZERS, Registry

CE = nn.losses.SparseCategoricalCrossentropy

# constructor arguments for classes without defaults for every argument; a newly registered
# class that needs arguments makes test_every_registered_class_* fail until it is listed here
EXAMPLES = {
    "Dense": lambda: nn.Dense(5, activation="tanh", use_bias=True, seed=3, name="ex_dense"),
    "KerasDense": lambda: nn.faces.keras.layers.Dense(4, "tanh", dtype="mixed_float16",
                                                      seed=2),
    "Activation": lambda: nn.Activation("gelu", dtype="mixed_bfloat16"),
    "Linear": lambda: nn.Linear(6, 5, seed=1, dtype="mixed_float16"),  # follows a Dense(6)
    "ReLU": lambda: nn.ReLU(negative_slope=0.25),
    "Dropout": lambda: nn.Dropout(0.3),  # unseeded: its spawned generator is checkpointed
    "Sequential": lambda: nn.Sequential([nn.Dense(4), nn.ReLU()], name="ex_seq"),
    # any width: the tests below put them after Dense layers of different sizes
    "InputLayer": lambda: nn.layers.InputLayer((None,), dtype="bfloat16"),
    "Functional": lambda: (lambda i: nn.Model(inputs=i, outputs=nn.ReLU(0.5)(i), name="ex_fn"))(
        nn.Input(shape=(None,), name="ex_in")),
    "WeightedLoss": lambda: nn.WeightedLoss(CE(from_logits=True), 0.5),
    "SparseCategoricalCrossentropy": lambda: CE(from_logits=True, name="my_ce"),
    "Adam": lambda: nn.Adam(0.01, beta_1=0.8),
    "SGD": lambda: nn.SGD(0.1, momentum=0.5, nesterov=True),
    "Accuracy": lambda: nn.metrics.Accuracy(name="my_acc"),
    "Conv2D": lambda: nn.Conv2D(3, 2, padding="same", activation="relu"),
    "Conv2d": lambda: nn.Conv2d(4, 2, 3, padding=1),
    "Embedding": lambda: nn.Embedding(5, 3),
    "LayerNorm": lambda: nn.LayerNorm(6),
    "MultiHeadAttention": lambda: nn.MultiHeadAttention(2, 3),
    "TokenAndPositionEmbedding": lambda: nn.layers.TokenAndPositionEmbedding(5, 4, 6),
    "TransformerBlock": lambda: nn.layers.TransformerBlock(6, 2, 8),
    # the Keras 3 face's layers (nn's, with Keras's policies: nn.faces.keras.base_layer)
    "KerasActivation": lambda: nn.faces.keras.layers.Activation("gelu", dtype="mixed_bfloat16"),
    "KerasConv2D": lambda: nn.faces.keras.layers.Conv2D(3, 2, padding="same"),
    "KerasDropout": lambda: nn.faces.keras.layers.Dropout(0.3),
    "KerasEmbedding": lambda: nn.faces.keras.layers.Embedding(5, 3),
    "KerasInputLayer": lambda: nn.faces.keras.layers.InputLayer((None,), dtype="bfloat16"),
    "KerasMultiHeadAttention": lambda: nn.faces.keras.layers.MultiHeadAttention(2, 3),
    "KerasSequential": lambda: nn.faces.keras.Sequential(
        [nn.faces.keras.layers.Dense(4), nn.faces.keras.layers.ReLU()], name="ex_kseq"),
}
# layers whose input is not (batch, features): images (NHWC; NCHW for Conv2d), sequences,
# integer ids (these come first in the model); multi-input layers cannot sit in a Sequential
IMAGE_LAYERS = {"Conv2D", "Conv2d", "MaxPooling2D", "AveragePooling2D",
                "GlobalAveragePooling2D", "KerasConv2D", "KerasMaxPooling2D",
                "KerasAveragePooling2D", "KerasGlobalAveragePooling2D"}
SEQUENCE_LAYERS = {"TransformerBlock", "LayerNorm"}
ID_LAYERS = {"Embedding", "TokenAndPositionEmbedding", "KerasEmbedding"}
MULTI_INPUT_LAYERS = {"Add", "MultiHeadAttention", "KerasAdd", "KerasMultiHeadAttention"}


def _nn_own(reg: Registry) -> list[str]:
    """The names of the classes nn itself registers (not those a test file registers: which of
    those are present depends on which test files one worker imported first)."""
    return sorted(n for n in reg.classes() if reg.get_class(n).__module__.startswith("nn."))


CLASSES = [(reg, name) for reg in (LAYERS, OPTIMIZERS, LOSSES, METRICS) for name in _nn_own(reg)]


def _example(reg: Registry, name: str):
    make = EXAMPLES.get(name)
    return make() if make is not None else reg.get_class(name)()


@pytest.mark.parametrize("reg,name", CLASSES, ids=[f"{r.kind}-{n}" for r, n in CLASSES])
def test_every_registered_class_round_trips_through_get_config_and_from_config(reg, name):
    obj = _example(reg, name)
    assert type(obj) is reg.get_class(name)
    saved = reg.serialize(obj)
    clone = reg.deserialize(saved)
    assert type(clone) is type(obj) and clone is not obj
    assert reg.serialize(clone) == saved


def test_the_registries_hold_every_public_class_of_their_kind():
    layer_classes = {c.__name__ for c in vars(nn).values()
                     if isinstance(c, type) and issubclass(c, nn.Layer)
                     and c not in (nn.Layer, nn.Model)}  # the two base classes
    assert layer_classes <= set(LAYERS.classes())
    opt_classes = {c.__name__ for c in vars(nn.optimizers).values()
                   if isinstance(c, type) and issubclass(c, nn.optimizers.Optimizer)
                   and c is not nn.optimizers.Optimizer}
    assert opt_classes == set(OPTIMIZERS.classes())
    loss_classes = {c.__name__ for m in (nn.losses, nn.models.model) for c in vars(m).values()
                    if isinstance(c, type) and issubclass(c, nn.losses.Loss)
                    and c is not nn.losses.Loss}
    assert loss_classes == set(LOSSES.classes())


def _input_for(layer_name: str, n: int = 6) -> np.ndarray:
    rng = np.random.default_rng(0)
    if layer_name in ID_LAYERS:
        return rng.integers(0, 5, (n, 4)).astype(np.float32)
    shape = {**dict.fromkeys(IMAGE_LAYERS, (4, 4, 4)),
             **dict.fromkeys(SEQUENCE_LAYERS, (3, 4))}.get(layer_name, (4,))
    return rng.normal(size=(n, *shape)).astype(np.float32)


def _sandwich(name: str, layer: nn.Layer) -> list[nn.Layer]:
    """``layer`` between Dense layers (a Flatten before the last where its output is not 2-D)."""
    head = [] if name in ID_LAYERS else [nn.Dense(6, name="first")]
    flat = [] if name in {"GlobalAveragePooling2D", "BatchNormalization", "Dropout", "ReLU",
                          "Activation", "Dense", "LayerNormalization"} else [nn.Flatten()]
    return [*head, layer, *flat, nn.Dense(3, name="last")]


LAYER_NAMES = [n for n in _nn_own(LAYERS)
               if n not in ("Sequential", "KerasSequential") and n not in MULTI_INPUT_LAYERS]


@pytest.mark.parametrize("name", LAYER_NAMES)
def test_every_registered_layer_survives_save_and_load(name, tmp_path):
    nn.set_random_seed(1)
    layer = _example(LAYERS, name)
    model = nn.Sequential(_sandwich(name, layer))
    x = _input_for(name)
    model.compile("adam", CE(from_logits=True))
    model.fit(x, np.arange(6) % 3, batch_size=3, epochs=1, verbose=0, seed=0)
    model.save(tmp_path / "m.npz")
    loaded = nn.load_model(tmp_path / "m.npz")
    assert [type(v) for v in loaded.layers] == [type(v) for v in model.layers]
    assert nn.layers.serialize(loaded) == nn.layers.serialize(model)
    assert len(loaded.weights) == len(model.weights)
    for a, b in zip(model.get_weights(), loaded.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(model.predict(x), loaded.predict(x))
    loaded.save(tmp_path / "again.npz")  # a loaded model saves again


@nn.layers.register
class ScaleTestOnly(nn.Layer):
    """y = x * w (one weight per feature): a layer with weights known to no file of nn."""

    def __init__(self, init: float = 2.0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.init = init

    def build(self, input_shape):
        self.w = self.add_weight("w", (input_shape[-1],), lambda shape, rng: np.full(shape,
                                                                                      self.init))

    def call(self, x, training=False):
        return x * self.read(self.w)

    def get_config(self):
        return {**super().get_config(), "init": self.init}


def test_a_layer_with_weights_defined_in_a_test_saves_and_loads_with_one_decorator(tmp_path):
    model = nn.Sequential([ScaleTestOnly(init=3.0, name="scale"), nn.Dense(2, name="head")])
    x = np.ones((4, 3), np.float32)
    model.compile("sgd", "mse")
    model.fit(x, np.zeros((4, 2), np.float32), batch_size=2, epochs=1, verbose=0, seed=0)
    model.save(tmp_path / "m.npz")
    loaded = nn.load_model(tmp_path / "m.npz")
    assert isinstance(loaded.layers[0], ScaleTestOnly) and loaded.layers[0].init == 3.0
    np.testing.assert_array_equal(loaded.layers[0].w.data, model.layers[0].w.data)
    assert not np.array_equal(model.layers[0].w.data, np.full(3, 3.0, np.float32))  # trained
    np.testing.assert_array_equal(loaded.predict(x), model.predict(x))


def test_an_unregistered_layer_is_refused_by_save_saying_how_to_register(tmp_path):
    class Unlisted(nn.Layer):
        def call(self, x, training=False):
            return x

    model = nn.Sequential([Unlisted(), nn.Dense(2)])
    model(np.ones((1, 2), np.float32))
    with pytest.raises(ValueError, match="Unlisted is not a registered layer.*register"):
        model.save(tmp_path / "m.npz")
    assert not (tmp_path / "m.npz").exists()


def test_a_name_registered_twice_to_different_classes_is_refused():
    reg = Registry("thing")

    @reg.register
    class A:
        pass

    class B:
        pass

    with pytest.raises(ValueError, match="'A' is already registered"):
        reg.register(B, name="A")


def test_lookup_functions_give_names_and_instances_for_the_cli():
    assert nn.optimizers.names() == ["adam", "rmsprop", "sgd"]
    assert isinstance(nn.optimizers.get("Adam"), nn.Adam)
    assert isinstance(nn.optimizers.get("adam"), nn.Adam)
    assert isinstance(nn.optimizers.get("ADAM"), nn.Adam)
    assert {"mse", "sparse_categorical_crossentropy"} <= set(nn.losses.names())
    assert isinstance(nn.losses.get("mse"), nn.losses.MeanSquaredError)
    assert nn.metrics.get("acc").name == "acc"
    assert "accuracy" in nn.metrics.names()
    assert nn.layers.get("Dense") is nn.Dense and "Dropout" in nn.layers.names()
    assert {"relu", "gelu", "softmax"} <= set(ACTIVATIONS.names())
    with pytest.raises(ValueError, match="unknown optimizer 'adagrad'; known: .*adam"):
        nn.optimizers.get("adagrad")


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
@pytest.mark.parametrize("name", LAYER_NAMES)
def test_every_registered_layer_resumes_from_a_checkpoint_bit_identically(name, policy,
                                                                          tmp_path):
    """fit 3 epochs straight vs fit 1, save, load, fit 2: weights, step losses and loss scales
    bit-identical (under mixed_float16 through the dynamic loss scale)."""
    x = _input_for(name, 24)
    y = np.arange(24) % 3

    def make():
        nn.set_random_seed(5)
        with nn.policy_scope(policy):
            model = nn.Sequential(_sandwich(name, _example(LAYERS, name)))
        return model.compile("adam", CE(from_logits=True))

    assert_resume_is_bit_identical(make, x, y, tmp_path / "ck.npz", batch_size=8, seed=1)
