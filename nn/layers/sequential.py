"""``Sequential``: layers applied in order, and a ``Model`` (compile, fit, save, ...).

Layer names are unique within a model (as in Keras) and a layer object appears once: both are
checked when a layer is added (``check_new_layers``, shared with the functional model), so a
checkpoint can name every weight without ambiguity.

Both faces construct it: ``Sequential([a, b, c])`` (Keras, optionally ``name`` second) and
``Sequential(a, b, c)`` (PyTorch). ``build(input_shape)`` creates the weights without data.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from nn.engine.formats import default_tensor_format
from nn.engine.tensor import Tensor
from nn.layers.base import Layer, deserialize, register, serialize
from nn.layers.symbolic import SymbolicTensor
from nn.models.model import Model, check_build_shape
from nn.training.loop import walk_layers


def check_new_layers(model: Layer, present: list[Layer], new: list[Layer]) -> None:
    """Raise ValueError if a layer of ``new`` (or inside it) is already among ``present`` (or
    inside them) or in ``new`` before it, or takes a name already used: Keras's unique-name
    rule, plus nn's one-use-per-model rule (no shared layers)."""
    inside = [inner for own in present for inner in walk_layers(own)]
    ids = {id(p) for p in inside}
    names = {p.name: p for p in inside}
    for layer in new:
        if not isinstance(layer, Layer):
            raise TypeError(f"model '{model.name}' takes Layer instances, got {layer!r}")
        for inner in walk_layers(layer):
            if id(inner) in ids or inner is model:
                raise ValueError(
                    f"layer '{inner.name}' is already in model '{model.name}': a layer object "
                    "can be used once per model (shared layers are not supported); create "
                    f"another layer, e.g. {type(inner).__name__}(...) with its own name")
            if inner.name in names:
                raise ValueError(
                    f"model '{model.name}' already has a layer named '{inner.name}' "
                    f"({type(names[inner.name]).__name__}); layer names must be unique within a "
                    "model, pass another name= or leave name=None for an automatic one")
            ids.add(id(inner))
            names[inner.name] = inner


def _layers_from_args(args: tuple[Any, ...], layers: Iterable[Layer] | None,
                      name: str | None) -> tuple[list[Any], str | None]:
    """The layer list and name from Keras's ``(layers=None, name=None)`` or PyTorch's
    ``(*modules)`` spelling; TypeError for anything ambiguous."""
    if not args:
        return list(layers or []), name
    if layers is not None:
        raise TypeError("Sequential: pass the layers either positionally or as layers=[...], "
                        "not both")
    if isinstance(args[0], (list, tuple)):
        if len(args) == 2 and isinstance(args[1], str) and name is None:
            return list(args[0]), args[1]  # Keras: Sequential(layers, name)
        if len(args) == 1:
            return list(args[0]), name
    elif all(isinstance(a, (Layer, SymbolicTensor)) for a in args):
        return list(args), name  # PyTorch: Sequential(a, b, c)
    kinds = ", ".join(type(a).__name__ for a in args)
    raise TypeError(f"Sequential takes a list of layers, Sequential([a, b, c]) (Keras), or the "
                    f"layers as arguments, Sequential(a, b, c) (PyTorch); got ({kinds})")


class Container(Model):
    """A model made of ``self.layers`` (Sequential, Functional): its children are that list's
    layers, keyed by position (``Module.CHILD_LIST``), so its variables are theirs, in layer
    order."""

    layers: list[Layer]


@register
class Sequential(Container):
    """Layers applied in order. Each layer casts to its own compute format; no cast here.

    A ``Model``: ``compile``, ``fit``, ``evaluate``, ``predict``, ``summary``, ``save``.

    ``add`` raises ValueError for a layer whose name is already used in the model (Keras's
    rule) and for a layer object already in it (a shared layer: not supported, make a second
    layer; sharing would tie both uses to one set of weights).
    """

    def __init__(self, *args: Any, layers: Iterable[Layer] | None = None,
                 name: str | None = None) -> None:
        items, name = _layers_from_args(args, layers, name)
        super().__init__(name=name)
        self.layers: list[Layer] = []
        self._input: SymbolicTensor | None = None
        for layer in items:
            self.add(layer)

    def add(self, layer: Layer | SymbolicTensor) -> None:
        """Append ``layer`` (checked: a Layer, not already in the model, a name not used).

        ``nn.Input(shape=...)`` may come first, as in Keras: every layer is then built as it
        is added."""
        if isinstance(layer, SymbolicTensor):
            if self.layers or self._input is not None:
                raise ValueError(f"Sequential model '{self.name}': nn.Input can only be its "
                                 "first element")
            if layer.node is None or layer.node.style != "input":
                raise ValueError(f"Sequential model '{self.name}' takes nn.Input(...) first, not "
                                 "a tensor made by a layer; for a graph of layer calls use "
                                 "nn.Model(inputs=..., outputs=...)")
            self._input = layer
            return
        check_new_layers(self, self.layers, [layer])
        self.layers.append(layer)
        self.built = self.is_built
        if self._input is not None:
            self._build_from(self._input.shape, self._input.fmt)

    def build(self, input_shape: Any = None) -> None:
        """Create every layer's weights for inputs of ``input_shape`` (batch first, may be
        None), without data: ``model.build((None, 784))``, as in Keras."""
        shape = check_build_shape(self, input_shape)
        if not self.layers:
            raise ValueError(f"Sequential model '{self.name}' has no layers to build")
        self._build_from(shape, default_tensor_format())

    def _build_from(self, shape: tuple[int | None, ...], fmt: Any) -> None:
        x: Any = SymbolicTensor(shape, fmt)
        for layer in self.layers:
            x = layer(x)
        self.built = True

    @property
    def is_built(self) -> bool:
        """True once every layer that makes its weights from its input's shape (a ``build`` of
        its own: Dense, ...) has made them; layers without weights (ReLU, ...) and eager ones
        (nn.Linear) need nothing."""
        return bool(self.layers) and all(layer.built or type(layer).build is Layer.build
                                         for layer in self.layers)

    def get_weights(self) -> list[np.ndarray]:
        self.require_built("get_weights()")
        return Layer.get_weights(self)

    def set_weights(self, weights: Iterable[Any]) -> None:
        self.require_built("set_weights()")
        Layer.set_weights(self, weights)

    def _as_input(self, x: Any) -> Tensor:
        if isinstance(x, Tensor):
            return x
        arr = np.asarray(x)
        # integer ids for a first layer that looks them up (Embedding): exact in the carrier
        integer_ok = bool(self.layers) and getattr(self.layers[0], "integer_input", False)
        if arr.dtype.kind != "f" and not (integer_ok and arr.dtype.kind in "iu"):
            first = self.layers[0].name if self.layers else self.name
            raise TypeError(
                f"layer '{first}' expects floating-point input, got an array of dtype "
                f"{arr.dtype}; convert it first, e.g. x.astype('float32')"
            )
        return Tensor(arr)

    def __call__(self, x: Any, training: bool | None = None) -> Tensor:  # None: each layer's mode
        if not self.layers:
            raise ValueError(f"Sequential model '{self.name}' has no layers")
        x = self._as_input(x)
        for layer in self.layers:
            x = layer(x, training=training)
        self.built = True
        return x

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "layers": [serialize(layer) for layer in self.layers]}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Sequential:
        return cls(layers=[deserialize(c) for c in config["layers"]], name=config.get("name"))

    def get_build_config(self) -> dict[str, Any] | None:
        return None  # each layer has its own; the model is built when they are

    def build_from_config(self, config: dict[str, Any]) -> None:
        self.built = True
