"""``Add()``: the elementwise sum of a list of tensors (Keras's merge layer), for residuals.

``Add()([a, b])`` casts each input to the layer's compute format and adds them left to right,
each addition rounded once (as ``a + b`` on tensors, which also works for a residual).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nn import functions as F
from nn.engine import sites
from nn.engine.sites import name_scope
from nn.engine.tensor import Tensor
from nn.layers.base import Layer, register


@register
class Add(Layer):
    """``Add()([x1, x2, ...])``: x1 + x2 + ..., all of the same shape."""

    def __call__(self, inputs: Sequence[Any], training: bool | None = None) -> Tensor:
        """Sum ``inputs`` (a list or tuple of at least two tensors/arrays of equal shape)."""
        training = self.resolve_training(training)
        if not isinstance(inputs, (list, tuple)) or len(inputs) < 2:
            raise ValueError(f"layer '{self.name}' (Add) must be called on a list of at least 2 "
                             f"inputs, e.g. Add()([x, y]); got {type(inputs).__name__}")
        xs = [self._as_input(x) for x in inputs]
        shapes = [x.shape for x in xs]
        if any(s != shapes[0] for s in shapes):
            raise ValueError(f"layer '{self.name}' (Add) needs inputs of one shape, got shapes "
                             f"{shapes}")
        if not self.built:
            self._build_once(shapes[0])
        with name_scope(self.name):
            y = xs[0]
            for x in xs[1:]:
                y = F.add(y, x)
        y.grad_site = sites.activation_grad(self.name)
        return y
