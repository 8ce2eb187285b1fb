"""``keras.Sequential`` and ``keras.Model``: nn's models, with the paths of Keras 3.

``keras.Model`` is ``nn.Model`` (a functional model's layers are called before the model
exists, so their path is their name, as in Keras 3; a subclassed model's ``call`` runs its
layers inside its name scope: ``"my_model/dense"``). ``keras.Sequential`` is
``nn.Sequential`` whose layers build and run inside the model's name scope, so that their
``path`` is ``"sequential/dense"`` as in Keras 3 (``nn.Sequential`` runs its layers at the
caller's scope: its monitor sites are the layers' own names).
"""

from __future__ import annotations

from typing import Any

from nn.engine.registry import LAYERS
from nn.engine.sites import name_scope
from nn.engine.tensor import Tensor
from nn.layers import Sequential as _NnSequential
from nn.layers.base import _unique_name
from nn.models.model import Model


@LAYERS.register
class KerasSequential(_NnSequential):
    """Keras 3's ``Sequential(layers=None, trainable=True, name=None)`` over nn's: its layers
    build and compute inside its name scope (their path and monitor sites start with the
    model's name)."""

    def __init__(self, *args: Any, layers: Any = None, name: str | None = None) -> None:
        super().__init__(*args, layers=layers, name=name or _unique_name("sequential"))

    def _build_from(self, shape: tuple[int | None, ...], fmt: Any) -> None:
        with name_scope(self.name):
            super()._build_from(shape, fmt)

    def __call__(self, x: Any, training: bool | None = None) -> Tensor:
        with name_scope(self.name):
            return super().__call__(x, training)


Sequential = KerasSequential

__all__ = ["Model", "Sequential"]
