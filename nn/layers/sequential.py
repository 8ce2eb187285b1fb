"""``Sequential``: layers applied in order, and a ``Model`` (compile, fit, save, ...).

Layer names are unique within a model (as in Keras) and a layer object appears once: both are
checked when a layer is added, so a checkpoint can name every weight without ambiguity.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from nn.layers.base import Layer, deserialize, register, serialize
from nn.model import Model
from nn.tensor import Tensor, Variable
from nn.training import walk_layers


@register
class Sequential(Layer, Model):
    """Layers applied in order. Each layer casts to its own compute format; no cast here.

    A ``Model``: ``compile``, ``fit``, ``evaluate``, ``predict``, ``summary``, ``save``.

    ``add`` raises ValueError for a layer whose name is already used in the model (Keras's
    rule) and for a layer object already in it (a shared layer: not supported, make a second
    layer; sharing would tie both uses to one set of weights).
    """

    def __init__(self, layers: Iterable[Layer] | None = None, name: str | None = None) -> None:
        super().__init__(name=name)
        self.layers: list[Layer] = []
        for layer in layers or []:
            self.add(layer)

    def add(self, layer: Layer) -> None:
        """Append ``layer`` (checked: a Layer, not already in the model, a name not used)."""
        if not isinstance(layer, Layer):
            raise TypeError(f"Sequential takes Layer instances, got {layer!r}")
        present = [inner for own in self.layers for inner in walk_layers(own)]
        ids = {id(p) for p in present}
        names = {p.name: p for p in present}
        for new in walk_layers(layer):
            if id(new) in ids or new is self:
                raise ValueError(
                    f"layer '{new.name}' is already in model '{self.name}': a layer object can "
                    "be used once per model (shared layers are not supported); create another "
                    f"layer, e.g. {type(new).__name__}(...) with its own name")
            if new.name in names:
                raise ValueError(
                    f"model '{self.name}' already has a layer named '{new.name}' "
                    f"({type(names[new.name]).__name__}); layer names must be unique within a "
                    "model, pass another name= or leave name=None for an automatic one")
            ids.add(id(new))
            names[new.name] = new
        self.layers.append(layer)

    @property
    def weights(self) -> list[Variable]:
        return [v for layer in self.layers for v in layer.weights]

    @property
    def trainable_variables(self) -> list[Variable]:
        if not self.trainable:
            return []
        return [v for layer in self.layers for v in layer.trainable_variables]

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
        return cls([deserialize(c) for c in config["layers"]], name=config.get("name"))

    def get_build_config(self) -> dict[str, Any] | None:
        return None  # each layer has its own; the model is built when they are

    def build_from_config(self, config: dict[str, Any]) -> None:
        self.built = True
