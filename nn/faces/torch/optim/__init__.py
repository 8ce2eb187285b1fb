"""``torch.optim``: ``SGD`` and ``Adam`` with PyTorch's signatures, defaults, param groups and
update formulas, ``Optimizer``, and ``lr_scheduler``.

``params`` is PyTorch's: an iterable of tensors, or of dicts, one per param group, each with
``"params"`` and any of the optimizer's hyperparameters (the others take the optimizer's
arguments): ``SGD([{"params": body}, {"params": head, "lr": 1e-3}], lr=1e-2, momentum=0.9)``.
``add_param_group``, ``param_groups`` (every group holds PyTorch's keys), ``state_dict()`` /
``load_state_dict()`` keep the groups; each step reads each group's hyperparameters, so a
scheduler's or a hand-written change applies from the next step, as in PyTorch.

- ``SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False)``: PyTorch's
  momentum buffer ``b = momentum * b + g`` and ``w -= lr * b`` (nesterov: ``w -= lr * (g +
  momentum * b)``); nn's Keras-form SGD keeps ``-lr * b`` and would not follow a changing lr.
- ``Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0)``: PyTorch's
  single-tensor form, with a step count per param (a param added later, or skipped for want of
  a gradient, counts its own steps): ``m = m + (1 - beta1) * (g - m)``, ``v = beta2 * v +
  (1 - beta2) * g * g``, ``w -= (lr / (1 - beta1**t)) * m / (sqrt(v) / sqrt(1 - beta2**t) +
  eps)``, the bias corrections in float64 as PyTorch's Python floats.
- ``weight_decay`` adds ``weight_decay * w`` to the gradient (PyTorch's L2 form).

Arithmetic in fp32, one rounding per operation as PyTorch's CPU kernels round: the
multiply-adds they fuse (``g + weight_decay * w``, Nesterov's ``g + momentum * b``, the step
``w - lr * step``, Adam's ``lerp`` and ``addcmul``) round once (``fused.fused_multiply_add``),
the others twice; then one rounding into a variable's format. SGD's steps equal torch 2.13's
bit for bit; Adam's differ now and then by an fp32 ulp, because torch's CPU ``sqrt`` is not
correctly rounded (648 of 100003 random values differ from the IEEE square root by one ulp)
while numpy's is.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

import fpsim
from nn.engine.checks import number
from nn.faces.torch.optim.fused import fused_multiply_add
from nn.optimizers import SGD as _SGD
from nn.optimizers import Adam as _Adam
from nn.optimizers import Optimizer, lr_scheduler
from nn.optimizers.remedies import needs_rounding


def _decayed(g: np.ndarray, w: np.ndarray, weight_decay: float) -> np.ndarray:
    """PyTorch's ``grad.add(param, alpha=weight_decay)``: one rounding."""
    return g if weight_decay == 0 else fused_multiply_add(weight_decay, w, g)


def _refuse(cls_name: str, options: dict[str, Any], names: tuple[str, ...]) -> None:
    """Refuse a group option PyTorch has and the face does not support (left at its default)."""
    for name in names:
        if options.get(name):
            raise NotImplementedError(f"{cls_name}: {name}={options[name]!r} is not supported "
                                      f"by nn's face (leave {', '.join(names)} at their "
                                      "defaults)")


class SGD(_SGD):
    """PyTorch's SGD (see the module docstring)."""

    supports_param_groups = True

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                 *, maximize: bool = False, foreach: Any = None,
                 differentiable: bool = False, fused: Any = None) -> None:
        self._defaults = {"momentum": momentum, "dampening": dampening,
                          "weight_decay": weight_decay, "nesterov": nesterov,
                          "maximize": maximize, "foreach": foreach,
                          "differentiable": differentiable, "fused": fused}
        if nesterov and momentum <= 0:
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        self.weight_decay = number("weight_decay", weight_decay, lo=0.0)
        super().__init__(params=list(params), lr=lr, momentum=momentum, nesterov=nesterov)

    def _group_defaults(self) -> dict[str, Any]:
        return dict(self._defaults)

    def _checked_group(self, options: dict[str, Any]) -> dict[str, Any]:
        _refuse("SGD", options, ("dampening", "maximize", "differentiable", "fused"))
        number("lr", options["lr"], lo=0.0, hi=math.inf)
        momentum = number("momentum", options["momentum"], lo=0.0, hi=1.0)
        number("weight_decay", options["weight_decay"], lo=0.0)
        if options["nesterov"] and momentum <= 0:
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        if momentum > 0 and "momentum" not in self.slot_names:  # a buffer from now on
            self.slot_names = ("momentum", *self.slot_names)
            for var, slots in zip(self._variables, self._slots, strict=True):
                slots["momentum"] = np.zeros_like(var.data)
        return options

    def _update_in_group(self, g, w, slots, t, group):
        g = _decayed(g, w, group["weight_decay"])
        momentum = group["momentum"]
        if momentum != 0:
            b = slots["momentum"]
            b *= w.dtype.type(momentum)
            b += g  # PyTorch's first step sets b = g: the same, from b = 0
            self._store(b)
        return w.dtype.type(group["lr"]) * self._direction(g, slots, group)

    @staticmethod
    def _direction(g: np.ndarray, slots: dict[str, np.ndarray], group: Any) -> np.ndarray:
        """The step ``w -= lr * step`` takes: ``g`` (decayed), the momentum buffer, or
        Nesterov's ``g + momentum * b`` (PyTorch's ``grad.add(buf, alpha=momentum)``)."""
        momentum = group["momentum"]
        if momentum == 0:
            return g
        b = slots["momentum"]
        return fused_multiply_add(momentum, b, g) if group["nesterov"] else b

    def _new_weight(self, g, w, delta, var, slots, t, group):
        # PyTorch's param.add_(step, alpha=-lr): one rounding of w - lr * step
        step = self._direction(_decayed(g, w, group["weight_decay"]), slots, group)
        new = fused_multiply_add(-group["lr"], step, w)
        fmt = getattr(var, "fmt", None)
        return np.asarray(fpsim.round(new, fmt)) if needs_rounding(fmt) else new


class Adam(_Adam):
    """PyTorch's Adam (see the module docstring)."""

    supports_param_groups = True
    slot_names = ("momentum", "velocity", "step")  # type: ignore[assignment]

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, *, foreach: Any = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False,
                 fused: Any = None, decoupled_weight_decay: bool = False) -> None:
        self._defaults = {"betas": betas, "eps": eps, "weight_decay": weight_decay,
                          "amsgrad": amsgrad, "maximize": maximize, "foreach": foreach,
                          "capturable": capturable, "differentiable": differentiable,
                          "fused": fused, "decoupled_weight_decay": decoupled_weight_decay}
        self.weight_decay = number("weight_decay", weight_decay, lo=0.0)
        super().__init__(params=list(params), lr=lr, betas=betas, eps=eps,
                         pytorch_epsilon=True)

    def _group_defaults(self) -> dict[str, Any]:
        return dict(self._defaults)

    def _checked_group(self, options: dict[str, Any]) -> dict[str, Any]:
        _refuse("Adam", options, ("amsgrad", "maximize", "capturable", "differentiable",
                                  "fused", "decoupled_weight_decay"))
        number("lr", options["lr"], lo=0.0, hi=math.inf)
        betas = options["betas"]
        if not (isinstance(betas, (tuple, list)) and len(betas) == 2):
            raise ValueError(f"Adam: betas must be a pair (beta1, beta2), got {betas!r}")
        number("betas[0]", betas[0], lo=0.0, hi=1.0, hi_open=True)
        number("betas[1]", betas[1], lo=0.0, hi=1.0, hi_open=True)
        number("eps", options["eps"], lo=0.0, hi=math.inf)
        number("weight_decay", options["weight_decay"], lo=0.0)
        return options

    def _zero_slot(self, slot_name: str, like: np.ndarray) -> np.ndarray:
        # PyTorch's state["step"]: one float32 count per param
        return np.zeros((), like.dtype) if slot_name == "step" else np.zeros_like(like)

    def _update_in_group(self, g, w, slots, t, group):
        c = w.dtype.type
        beta1, beta2 = group["betas"]
        g = _decayed(g, w, group["weight_decay"])
        m, v, step = slots["momentum"], slots["velocity"], slots["step"]
        step += 1
        weight = c(1 - beta1)  # lerp(m, g, weight), PyTorch's two fused forms
        if abs(weight) < 0.5:
            m[...] = fused_multiply_add(weight, g - m, m)
        else:
            m[...] = fused_multiply_add(weight - c(1), g - m, g)
        v *= c(beta2)
        v[...] = fused_multiply_add(c(1 - beta2) * g, g, v)  # addcmul(v, g, g, value=1 - beta2)
        self._store(m)
        self._store(v)
        n = float(step)
        step_size = group["lr"] / (1 - beta1 ** n)  # Python floats, as PyTorch's
        eps = self._state_constant(group["eps"], w.dtype)
        denom = np.sqrt(v) / c(math.sqrt(1 - beta2 ** n)) + eps
        return c(step_size) * m / denom  # addcdiv(w, m, denom, value=-step_size)


__all__ = ["SGD", "Adam", "Optimizer", "lr_scheduler"]
