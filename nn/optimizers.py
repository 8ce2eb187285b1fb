"""Keras optimizers (SGD, RMSprop, Adam) that update variables in place, in fp32 arithmetic.

Numerics (the same for every optimizer):

- The update is computed in the variable's carrier dtype (float32; float64 under the "float64"
  policy) with Keras's formulas, and the slot variables (momentum, velocity, ...) live in that
  dtype too: fp32 slots even when the variable itself holds fp16 or bf16 values.
- Under a mixed policy the variables are fp32 master weights and nothing else is rounded.
- Under the pure "float16"/"bfloat16" policies the variable's values lie in that format: the new
  value ``w - update`` is rounded once to it with ``fpsim.round`` (nearest-even). An update
  smaller than half an ulp of ``w`` is then lost (*swamping*: fp16 keeps 11 significant bits,
  so ``w + lr*g == w`` once ``w`` is about 2048x larger than ``lr*g``).
- Every element whose non-zero update left the weight unchanged is counted in
  ``swamped_updates`` (and per variable name in ``swamped_counts``), for every format.

Two calling conventions share one implementation:

- Keras: ``opt.apply_gradients(zip(grads, variables))``; a ``None`` gradient skips its
  variable; ``iterations`` counts calls.
- PyTorch: ``opt = Adam(1e-3, params=model.trainable_variables)``; ``opt.step()`` applies each
  param's ``.grad``; ``opt.zero_grad()``. This is what ``nn.GradScaler.step(opt)`` calls. The
  formulas stay Keras's (e.g. Adam's bias correction uses the global ``iterations``).

Example (``w`` an ``nn.Variable``)::

    opt = SGD(learning_rate=0.1)
    opt.apply_gradients(zip([np.ones(w.shape, np.float32)], [w]))   # w.data -= 0.1
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

import fpsim
from nn.checks import count, number
from nn.registry import OPTIMIZERS


def _needs_rounding(fmt: Any) -> bool:
    """True when values of ``fmt`` are a strict subset of the carrier's (fp16, bf16, fp8...)."""
    return fmt is not None and fmt != fpsim.FP32


def _name_of(var: Any) -> str:
    return str(getattr(var, "name", None) or f"<variable {id(var):#x}>")


def gradient_array(grad: Any) -> np.ndarray:
    """The ndarray behind a gradient: an ``nn.Tensor``'s ``.data`` or an array-like itself."""
    data = grad.data if hasattr(grad, "data") and not isinstance(grad, np.ndarray) else grad
    arr = np.asarray(data)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"a gradient must be numeric, got an array of dtype {arr.dtype}")
    return arr


class Optimizer:
    """Base class: variable tracking, slots, swamping telemetry, state and both faces.

    Subclasses set ``slot_names`` and implement ``_update(g, w, slots, t)``, which updates the
    slots in place and returns the amount to subtract from ``w`` (in w's dtype).
    """

    slot_names: tuple[str, ...] = ()

    def __init__(self, learning_rate: float, *, params: Iterable[Any] | None = None,
                 name: str | None = None) -> None:
        self.name = name or type(self).__name__
        self.learning_rate = learning_rate
        self.iterations = 0
        self.swamped_updates = 0
        self.swamped_counts: dict[str, int] = {}
        self._variables: list[Any] = []
        self._index: dict[int, int] = {}
        self._slots: list[dict[str, np.ndarray]] = []
        self.params: list[Any] | None = None
        if params is not None:
            self.params = list(params)
            if not self.params:
                raise ValueError(f"{self.name}: params= is an empty list; pass the variables "
                                 "to optimize (e.g. model.trainable_variables)")
            self.build(self.params)

    # ---- validated attributes ------------------------------------------------------------
    @property
    def learning_rate(self) -> float:
        """The step size, a finite number >= 0 (checked on every assignment)."""
        return self._learning_rate

    @learning_rate.setter
    def learning_rate(self, value: float) -> None:
        self._learning_rate = number("learning_rate", value, lo=0.0, hi=math.inf)

    @property
    def iterations(self) -> int:
        """Updates applied so far (Adam's bias correction uses it); an integer >= 0."""
        return self._iterations

    @iterations.setter
    def iterations(self, value: int) -> None:
        self._iterations = count(f"{self.name}: iterations", value)

    # ---- variables and slots -------------------------------------------------------------
    @property
    def variables(self) -> list[Any]:
        """The variables this optimizer holds slots for, in the order they were first seen."""
        return list(self._variables)

    def build(self, variables: Iterable[Any]) -> None:
        """Create zero slots (in each variable's carrier dtype) for variables not yet seen."""
        for var in variables:
            if id(var) in self._index:
                continue
            data = getattr(var, "data", None)
            if not isinstance(data, np.ndarray) or data.dtype not in (np.float32, np.float64):
                raise TypeError(f"{self.name}: {_name_of(var)} is not a variable with a "
                                f"float32/float64 .data array (got {type(var).__name__})")
            self._index[id(var)] = len(self._variables)
            self._variables.append(var)
            self._slots.append({s: np.zeros_like(data) for s in self.slot_names})

    def get_slot(self, var: Any, slot_name: str) -> np.ndarray:
        """The slot array (live, not a copy) named ``slot_name`` of ``var``."""
        if id(var) not in self._index:
            raise KeyError(f"{self.name} holds no slots for {_name_of(var)}")
        if slot_name not in self.slot_names:
            raise KeyError(f"{self.name} has slots {self.slot_names}, not {slot_name!r}")
        return self._slots[self._index[id(var)]][slot_name]

    # ---- the Keras face -----------------------------------------------------------------
    def apply_gradients(self, grads_and_vars: Iterable[tuple[Any, Any]]) -> int:
        """Apply one update to every variable whose gradient is not None; returns iterations.

        - Gradients may be ``nn.Tensor``, ndarray or None (None: the variable is skipped).
        - Each gradient must have its variable's shape (no broadcasting).
        - Everything is validated before any variable changes.
        - ``iterations`` increases by one per call.
        """
        self._apply_prepared(self._prepare(grads_and_vars))
        return self.iterations

    def _prepare(self, grads_and_vars: Iterable[tuple[Any, Any]]) -> list[tuple[np.ndarray, Any]]:
        pairs = list(grads_and_vars)
        for pair in pairs:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise TypeError(f"{self.name}.apply_gradients takes (gradient, variable) pairs, "
                                f"e.g. zip(grads, variables); got an element {pair!r:.80}")
        present = [(g, v) for g, v in pairs if g is not None]
        if not present:
            names = ", ".join(_name_of(v) for _, v in pairs) or "none given"
            raise ValueError(f"{self.name}: no gradients provided for any variable ({names})")
        prepared = []
        for g, var in present:
            w = var.data
            arr = gradient_array(g)
            if arr.shape != w.shape:
                raise ValueError(f"{self.name}: gradient for {_name_of(var)} has shape "
                                 f"{arr.shape}, expected the variable's shape {w.shape}")
            prepared.append((arr.astype(w.dtype, copy=False), var))
        return prepared

    def _apply_prepared(self, prepared: list[tuple[np.ndarray, Any]]) -> None:
        self.build(var for _, var in prepared)
        t = self.iterations + 1  # Keras's local_step
        for g, var in prepared:
            w = var.data
            delta = self._update(g, w, self._slots[self._index[id(var)]], t)
            new = w - delta
            if _needs_rounding(getattr(var, "fmt", None)):
                new = fpsim.round(new, var.fmt)  # one rounding into the variable's format
            swamped = int(np.count_nonzero((new == w) & (delta != 0)))
            if swamped:
                self.swamped_updates += swamped
                key = _name_of(var)
                self.swamped_counts[key] = self.swamped_counts.get(key, 0) + swamped
            np.copyto(w, new)
        self.iterations += 1

    def _update(self, g: np.ndarray, w: np.ndarray, slots: dict[str, np.ndarray],
                t: int) -> np.ndarray:
        raise NotImplementedError

    # ---- the PyTorch face ---------------------------------------------------------------
    def _require_params(self, what: str) -> list[Any]:
        if self.params is None:
            raise RuntimeError(f"{self.name}.{what} needs an optimizer constructed with "
                               f"params=[...]; otherwise use apply_gradients(zip(grads, vars))")
        return self.params

    def step(self) -> None:
        """Apply each param's ``.grad`` (params without a gradient are skipped; none: no-op)."""
        params = self._require_params("step()")
        pairs = [(p.grad, p) for p in params if p.grad is not None]
        if pairs:
            self.apply_gradients(pairs)

    def zero_grad(self) -> None:
        """Clear every param's gradient (``param.zero_grad()``)."""
        for p in self._require_params("zero_grad()"):
            p.zero_grad()

    # ---- config and state ---------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        """The constructor arguments (Keras style); ``type(opt).from_config(cfg)`` rebuilds it."""
        return {"name": self.name, "learning_rate": self.learning_rate}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Optimizer:
        return cls(**config)

    def state_dict(self) -> dict[str, Any]:
        """Copies of the mutable state: ``iterations``, variable names and slots (in order)."""
        return {
            "iterations": self.iterations,
            "variables": [_name_of(v) for v in self._variables],
            "slots": [{k: a.copy() for k, a in s.items()} for s in self._slots],
        }

    def load_state_dict(self, state: dict[str, Any], variables: Iterable[Any] | None = None
                        ) -> None:
        """Restore ``state_dict()`` output; ``variables`` (same order as saved) are built first.

        Raises ValueError, changing nothing, if the number of variables, a slot name, a shape
        or a dtype differs.
        """
        if variables is not None:
            self.build(variables)
        try:
            iterations = state["iterations"]
            slots = list(state["slots"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{self.name}: not an optimizer state dict ({e!r}); expected keys "
                             "'iterations' and 'slots'") from None
        iterations = count(f"{self.name}: iterations", iterations)
        if not slots and iterations == 0:
            # saved before the first step: nothing was built, and fresh slots (zeros) are
            # exactly what that optimizer would have built
            for mine in self._slots:
                for arr in mine.values():
                    arr[...] = 0
            self.iterations = 0
            return
        if len(slots) != len(self._slots):
            raise ValueError(f"{self.name}: state holds slots for {len(slots)} variables, this "
                             f"optimizer tracks {len(self._slots)}; pass variables= to build")
        for i, (saved, mine) in enumerate(zip(slots, self._slots, strict=True)):
            name = _name_of(self._variables[i])
            if set(saved) != set(mine):
                raise ValueError(f"{self.name}: slots of {name} are {sorted(saved)}, "
                                 f"expected {sorted(mine)}")
            for k, arr in saved.items():
                arr = np.asarray(arr)
                if arr.shape != mine[k].shape or arr.dtype != mine[k].dtype:
                    raise ValueError(f"{self.name}: slot {k!r} of {name} is {arr.dtype}"
                                     f"{arr.shape}, expected {mine[k].dtype}{mine[k].shape}")
        for saved, mine in zip(slots, self._slots, strict=True):
            for k, arr in saved.items():
                np.copyto(mine[k], arr)
        self.iterations = iterations

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if k != "name")
        return f"{type(self).__name__}({args})"


@OPTIMIZERS.register(aliases=("sgd",))
class SGD(Optimizer):
    """Stochastic gradient descent with optional (Nesterov) momentum; Keras's formulas.

    - momentum == 0: ``w = w - lr * g``
    - momentum > 0: ``m = momentum * m - lr * g``; ``w = w + m``
    - nesterov: ``m = momentum * m - lr * g``; ``w = w + momentum * m - lr * g``

    Defaults as Keras: learning_rate=0.01, momentum=0.0, nesterov=False; momentum in [0, 1].
    """

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.0,
                 nesterov: bool = False, *, params: Iterable[Any] | None = None,
                 name: str | None = None) -> None:
        self.momentum = number("momentum", momentum, lo=0.0, hi=1.0)
        self.nesterov = bool(nesterov)
        self.slot_names = ("momentum",) if self.momentum > 0 else ()
        super().__init__(learning_rate, params=params, name=name)

    def _update(self, g, w, slots, t):
        c = w.dtype.type
        lr_g = c(self.learning_rate) * g
        if not self.slot_names:
            return lr_g
        m = slots["momentum"]
        m *= c(self.momentum)
        m -= lr_g
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
    - momentum > 0: ``m = momentum * m + increment``; ``w = w - m``; else ``w = w - increment``

    Defaults as Keras: learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7, centered=False.
    """

    def __init__(self, learning_rate: float = 0.001, rho: float = 0.9, momentum: float = 0.0,
                 epsilon: float = 1e-7, centered: bool = False, *,
                 params: Iterable[Any] | None = None, name: str | None = None) -> None:
        self.rho = number("rho", rho, lo=0.0, hi=1.0, hi_open=True)
        self.momentum = number("momentum", momentum, lo=0.0, hi=1.0)
        self.epsilon = number("epsilon", epsilon, lo=0.0, hi=math.inf)
        self.centered = bool(centered)
        self.slot_names = (("velocity",) + (("momentum",) if self.momentum > 0 else ())
                           + (("average_gradient",) if self.centered else ()))
        super().__init__(learning_rate, params=params, name=name)

    def _update(self, g, w, slots, t):
        c = w.dtype.type
        rho, one_minus_rho = c(self.rho), c(1 - self.rho)
        v = slots["velocity"]
        v[...] = rho * v + one_minus_rho * np.square(g)
        if self.centered:
            a = slots["average_gradient"]
            a[...] = rho * a + one_minus_rho * g
            denominator = v - np.square(a) + c(self.epsilon)
        else:
            denominator = v + c(self.epsilon)
        increment = c(self.learning_rate) * g / np.sqrt(denominator)
        if self.momentum > 0:
            m = slots["momentum"]
            m[...] = c(self.momentum) * m + increment
            return m
        return increment

    def get_config(self) -> dict[str, Any]:
        return super().get_config() | {"rho": self.rho, "momentum": self.momentum,
                                       "epsilon": self.epsilon, "centered": self.centered}


@OPTIMIZERS.register(aliases=("adam",))
class Adam(Optimizer):
    """Adam; Keras's formulas (epsilon is "epsilon hat", added outside the square root).

    With ``t = iterations + 1``:

    - ``alpha = lr * sqrt(1 - beta_2**t) / (1 - beta_1**t)``
    - ``m = m + (g - m) * (1 - beta_1)``; ``v = v + (g**2 - v) * (1 - beta_2)``
    - ``w = w - m * alpha / (sqrt(v) + epsilon)``

    Defaults as Keras: learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7.
    """

    slot_names = ("momentum", "velocity")

    def __init__(self, learning_rate: float = 0.001, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-7, *,
                 params: Iterable[Any] | None = None, name: str | None = None) -> None:
        self.beta_1 = number("beta_1", beta_1, lo=0.0, hi=1.0, hi_open=True)
        self.beta_2 = number("beta_2", beta_2, lo=0.0, hi=1.0, hi_open=True)
        self.epsilon = number("epsilon", epsilon, lo=0.0, hi=math.inf)
        super().__init__(learning_rate, params=params, name=name)

    def _update(self, g, w, slots, t):
        c = w.dtype.type
        one = c(1)
        beta_1_power = np.power(c(self.beta_1), c(t))
        beta_2_power = np.power(c(self.beta_2), c(t))
        alpha = c(self.learning_rate) * np.sqrt(one - beta_2_power) / (one - beta_1_power)
        m, v = slots["momentum"], slots["velocity"]
        m += (g - m) * c(1 - self.beta_1)
        v += (np.square(g) - v) * c(1 - self.beta_2)
        return m * alpha / (np.sqrt(v) + c(self.epsilon))

    def get_config(self) -> dict[str, Any]:
        return super().get_config() | {"beta_1": self.beta_1, "beta_2": self.beta_2,
                                       "epsilon": self.epsilon}


def get(identifier: str | Optimizer) -> Optimizer:
    """An optimizer from a registered name ("sgd", "rmsprop", "adam", or a class name; Keras
    defaults) or an instance (returned as it is)."""
    if isinstance(identifier, Optimizer):
        return identifier
    opt: Optimizer = OPTIMIZERS.get(identifier)
    return opt


def names() -> list[str]:
    """The short names ``get`` accepts ("adam", ...; class names work too), sorted."""
    return OPTIMIZERS.aliases()
