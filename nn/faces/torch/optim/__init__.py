"""``torch.optim``: ``SGD`` and ``Adam`` with PyTorch's signatures, defaults and update
formulas, ``Optimizer``, and ``lr_scheduler``.

``SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False)`` keeps
PyTorch's momentum buffer ``b = momentum * b + g`` and steps ``w -= lr * b`` (``lr`` read at each
step, so a scheduler's change applies from the next step, as in PyTorch; nn's Keras-form SGD
keeps ``-lr * b`` and would not). ``Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
weight_decay=0)`` is nn's Adam with PyTorch's placement of eps. ``weight_decay`` adds
``weight_decay * w`` to the gradient (PyTorch's L2 form). Arithmetic in fp32, one rounding
into a variable's format.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from nn.engine.checks import number
from nn.optimizers import SGD as _SGD
from nn.optimizers import Adam as _Adam
from nn.optimizers import Optimizer, lr_scheduler


def _decayed(g: np.ndarray, w: np.ndarray, weight_decay: float) -> np.ndarray:
    return g if weight_decay == 0 else g + w.dtype.type(weight_decay) * w


class SGD(_SGD):
    """PyTorch's SGD (see the module docstring)."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                 *, maximize: bool = False, foreach: Any = None,
                 differentiable: bool = False, fused: Any = None) -> None:
        if dampening != 0 or maximize or differentiable or fused:
            raise NotImplementedError("SGD: dampening, maximize, differentiable and fused are "
                                      "not supported by nn's face (leave them at their "
                                      "defaults)")
        if nesterov and momentum <= 0:
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        self.weight_decay = number("weight_decay", weight_decay, lo=0.0)
        super().__init__(params=list(params), lr=lr, momentum=momentum, nesterov=nesterov)

    def _update(self, g, w, slots, t):
        c = w.dtype.type
        g = _decayed(g, w, self.weight_decay)
        if not self.slot_names:
            return c(self.learning_rate) * g
        b = slots["momentum"]
        b *= c(self.momentum)
        b += g  # PyTorch's first step sets b = g: the same, from b = 0
        self._store(b)
        step = g + c(self.momentum) * b if self.nesterov else b
        return c(self.learning_rate) * step


class Adam(_Adam):
    """PyTorch's Adam (see the module docstring)."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, *, foreach: Any = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False,
                 fused: Any = None) -> None:
        if amsgrad or maximize or capturable or differentiable or fused:
            raise NotImplementedError("Adam: amsgrad, maximize, capturable, differentiable "
                                      "and fused are not supported by nn's face (leave them "
                                      "at their defaults)")
        self.weight_decay = number("weight_decay", weight_decay, lo=0.0)
        super().__init__(params=list(params), lr=lr, betas=betas, eps=eps,
                         pytorch_epsilon=True)

    def _update(self, g, w, slots, t):
        return super()._update(_decayed(g, w, self.weight_decay), w, slots, t)


__all__ = ["SGD", "Adam", "Optimizer", "lr_scheduler"]
