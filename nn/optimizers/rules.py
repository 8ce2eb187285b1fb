"""The update rules: SGD, RMSprop, Adam (Keras's formulas; PyTorch's spelling accepted)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from nn.engine.checks import number
from nn.engine.registry import OPTIMIZERS
from nn.optimizers.base import Optimizer, _alias, learning_rate_args


@OPTIMIZERS.register(aliases=("sgd",))
class SGD(Optimizer):
    """Stochastic gradient descent with optional (Nesterov) momentum; Keras's formulas.

    - momentum == 0: ``w = w - lr * g``
    - momentum > 0: ``m = momentum * m - lr * g``; ``w = w + m``
    - nesterov: ``m = momentum * m - lr * g``; ``w = w + momentum * m - lr * g``

    Defaults as Keras: learning_rate=0.01, momentum=0.0, nesterov=False; momentum in [0, 1].
    PyTorch's spelling ``SGD(model.parameters(), lr=0.1, momentum=0.9)``: default lr=1e-3.
    """

    def __init__(self, learning_rate: Any = None, *extra: Any, momentum: float = 0.0,
                 nesterov: bool = False, lr: float | None = None,
                 params: Iterable[Any] | None = None, name: str | None = None,
                 slot_dtype: str | None = None, update_rounding: str = "nearest_even",
                 kahan: bool = False, seed: int | None = None) -> None:
        rate, params, _ = learning_rate_args("SGD", learning_rate, lr, params, extra, 0.01, 1e-3)
        self.momentum = number("momentum", momentum, lo=0.0, hi=1.0)
        self.nesterov = bool(nesterov)
        self.slot_names = ("momentum",) if self.momentum > 0 else ()
        super().__init__(rate, params=params, name=name, slot_dtype=slot_dtype,
                         update_rounding=update_rounding, kahan=kahan, seed=seed)

    def _update(self, g, w, slots, t):
        c = w.dtype.type
        lr_g = c(self.learning_rate) * g
        if self.momentum == 0:
            return lr_g
        m = slots["momentum"]
        m *= c(self.momentum)
        m -= lr_g
        self._store(m)
        if self.nesterov:
            return -(c(self.momentum) * m - lr_g)
        return -m

    def get_config(self) -> dict[str, Any]:
        return super().get_config() | {"momentum": self.momentum, "nesterov": self.nesterov}


@OPTIMIZERS.register(aliases=("rmsprop",))
class RMSprop(Optimizer):
    """RMSprop; Keras's formulas (epsilon inside the square root).

    - ``v = rho * v + (1 - rho) * g**2``
    - centered: ``a = rho * a + (1 - rho) * g``; ``denominator = v - a**2 + epsilon``;
      otherwise ``denominator = v + epsilon``
    - ``increment = lr * g / sqrt(denominator)``
      (``pytorch_epsilon=True``: ``lr * g / (sqrt(denominator - epsilon) + epsilon)``)
    - momentum > 0: ``m = momentum * m + increment``; ``w = w - m``; else ``w = w - increment``

    Defaults as Keras: learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7, centered=False.
    PyTorch's spelling ``RMSprop(model.parameters(), lr=..., alpha=..., eps=...)`` takes
    PyTorch's defaults and placement of eps: lr=0.01, alpha (rho)=0.99, eps=1e-8 outside the
    square root (``pytorch_epsilon=True``).
    """

    def __init__(self, learning_rate: Any = None, *extra: Any, rho: float = 0.9,
                 momentum: float = 0.0, epsilon: float = 1e-7, centered: bool = False,
                 lr: float | None = None, alpha: float | None = None, eps: float | None = None,
                 pytorch_epsilon: bool | None = None, params: Iterable[Any] | None = None,
                 name: str | None = None, slot_dtype: str | None = None,
                 update_rounding: str = "nearest_even", kahan: bool = False,
                 seed: int | None = None) -> None:
        rate, params, torch_face = learning_rate_args("RMSprop", learning_rate, lr, params, extra,
                                                      0.001, 0.01)
        if torch_face:  # PyTorch's defaults unless the user wrote the argument
            rho, epsilon = (0.99 if alpha is None else alpha), (1e-8 if eps is None else eps)
            rho_name, eps_name = "alpha", "eps"
        else:
            rho_name, rho = _alias("RMSprop", ("rho", rho, 0.9), ("alpha", alpha))
            eps_name, epsilon = _alias("RMSprop", ("epsilon", epsilon, 1e-7), ("eps", eps))
        self.rho = number(rho_name, rho, lo=0.0, hi=1.0, hi_open=True)
        self.momentum = number("momentum", momentum, lo=0.0, hi=1.0)
        self.epsilon = number(eps_name, epsilon, lo=0.0, hi=math.inf)
        self.centered = bool(centered)
        self.pytorch_epsilon = torch_face if pytorch_epsilon is None else bool(pytorch_epsilon)
        self.slot_names = (("velocity",) + (("momentum",) if self.momentum > 0 else ())
                           + (("average_gradient",) if self.centered else ()))
        super().__init__(rate, params=params, name=name, slot_dtype=slot_dtype,
                         update_rounding=update_rounding, kahan=kahan, seed=seed)

    def _update(self, g, w, slots, t):
        c = w.dtype.type
        rho, one_minus_rho = c(self.rho), c(1 - self.rho)
        v = slots["velocity"]
        v[...] = rho * v + one_minus_rho * np.square(g)
        self._store(v)
        if self.centered:
            a = slots["average_gradient"]
            a[...] = rho * a + one_minus_rho * g
            self._store(a)
            variance = v - np.square(a)
        else:
            variance = v
        eps = self._state_constant(self.epsilon, w.dtype)
        if self.pytorch_epsilon:
            increment = c(self.learning_rate) * g / (np.sqrt(variance) + eps)
        else:
            increment = c(self.learning_rate) * g / np.sqrt(variance + eps)
        if self.momentum > 0:
            m = slots["momentum"]
            m[...] = c(self.momentum) * m + increment
            self._store(m)
            return m
        return increment

    def get_config(self) -> dict[str, Any]:
        return super().get_config() | {"rho": self.rho, "momentum": self.momentum,
                                       "epsilon": self.epsilon, "centered": self.centered,
                                       "pytorch_epsilon": self.pytorch_epsilon}


@OPTIMIZERS.register(aliases=("adam",))
class Adam(Optimizer):
    """Adam; Keras's formulas (epsilon is "epsilon hat", added outside the square root).

    With ``t = iterations + 1``:

    - ``alpha = lr * sqrt(1 - beta_2**t) / (1 - beta_1**t)``
    - ``m = m + (g - m) * (1 - beta_1)``; ``v = v + (g**2 - v) * (1 - beta_2)``
    - ``w = w - m * alpha / (sqrt(v) + epsilon_t)`` with ``epsilon_t = epsilon`` (Keras) or,
      ``pytorch_epsilon=True``, ``epsilon * sqrt(1 - beta_2**t)``: PyTorch's
      ``lr * m_hat / (sqrt(v_hat) + eps)`` rewritten in Keras's form.

    Defaults as Keras: learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7.
    ``slot_dtype="float16"`` keeps m, v and epsilon in fp16 (see ``Optimizer``).
    PyTorch's spelling ``Adam(model.parameters(), lr=..., betas=(0.9, 0.999), eps=1e-8)``
    takes PyTorch's defaults (eps=1e-8) and placement of eps (``pytorch_epsilon=True``).
    """

    slot_names = ("momentum", "velocity")

    def __init__(self, learning_rate: Any = None, *extra: Any, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-7, lr: float | None = None,
                 betas: tuple[float, float] | None = None, eps: float | None = None,
                 pytorch_epsilon: bool | None = None, params: Iterable[Any] | None = None,
                 name: str | None = None, slot_dtype: str | None = None,
                 update_rounding: str = "nearest_even", kahan: bool = False,
                 seed: int | None = None) -> None:
        rate, params, torch_face = learning_rate_args("Adam", learning_rate, lr, params, extra,
                                                      0.001, 0.001)
        b1_name, b2_name = "beta_1", "beta_2"
        if betas is not None:
            if (beta_1, beta_2) != (0.9, 0.999):
                raise ValueError(f"Adam: got both betas={betas!r} and beta_1/beta_2; pass one "
                                 "(betas is PyTorch's spelling, beta_1/beta_2 Keras's)")
            if not (isinstance(betas, (tuple, list)) and len(betas) == 2):
                raise ValueError(f"Adam: betas must be a pair (beta1, beta2), got {betas!r}")
            (beta_1, beta_2), b1_name, b2_name = betas, "betas[0]", "betas[1]"
        if torch_face:
            eps_name, epsilon = "eps", (1e-8 if eps is None else eps)
        else:
            eps_name, epsilon = _alias("Adam", ("epsilon", epsilon, 1e-7), ("eps", eps))
        self.beta_1 = number(b1_name, beta_1, lo=0.0, hi=1.0, hi_open=True)
        self.beta_2 = number(b2_name, beta_2, lo=0.0, hi=1.0, hi_open=True)
        self.epsilon = number(eps_name, epsilon, lo=0.0, hi=math.inf)
        self.pytorch_epsilon = torch_face if pytorch_epsilon is None else bool(pytorch_epsilon)
        super().__init__(rate, params=params, name=name, slot_dtype=slot_dtype,
                         update_rounding=update_rounding, kahan=kahan, seed=seed)

    def _update(self, g, w, slots, t):
        c = w.dtype.type
        one = c(1)
        beta_1_power = np.power(c(self.beta_1), c(t))
        beta_2_power = np.power(c(self.beta_2), c(t))
        alpha = c(self.learning_rate) * np.sqrt(one - beta_2_power) / (one - beta_1_power)
        m, v = slots["momentum"], slots["velocity"]
        m += (g - m) * c(1 - self.beta_1)
        v += (np.square(g) - v) * c(1 - self.beta_2)
        self._store(m)
        self._store(v)
        eps = self._state_constant(self.epsilon, w.dtype)
        if self.pytorch_epsilon:
            eps = eps * np.sqrt(one - beta_2_power)
        return m * alpha / (np.sqrt(v) + eps)

    def get_config(self) -> dict[str, Any]:
        return super().get_config() | {"beta_1": self.beta_1, "beta_2": self.beta_2,
                                       "epsilon": self.epsilon,
                                       "pytorch_epsilon": self.pytorch_epsilon}
