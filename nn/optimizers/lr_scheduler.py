"""PyTorch's LR schedulers over ``optimizer.param_groups``: ``StepLR``, ``LambdaLR``,
``CosineAnnealingLR`` (``torch.optim.lr_scheduler``'s names, arguments and sequences).

Each scheduler sets ``param_groups[i]["lr"]`` (which *is* the nn optimizer's ``lr``) on
construction (epoch 0) and at every ``step()``, with PyTorch's own recurrences in Python floats,
so the sequence of learning rates equals torch's bit for bit:

- ``StepLR``: ``lr *= gamma`` at every epoch that is a non-zero multiple of ``step_size``;
- ``LambdaLR``: ``lr = initial_lr * lr_lambda(epoch)``;
- ``CosineAnnealingLR``: PyTorch's recursive form of
  ``eta_min + (initial_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2``.

Call ``scheduler.step()`` after ``optimizer.step()``, as in PyTorch. ``last_epoch=k`` resumes a
schedule as PyTorch's does: every group must already hold its ``initial_lr`` (a loaded optimizer
state dict has it; a KeyError otherwise, PyTorch's), and the constructor's step computes the lr of
epoch ``k + 1`` from the groups' current ``lr``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from nn.engine.checks import count, number
from nn.optimizers.base import Optimizer


class LRScheduler:
    """Base: ``base_lrs`` (each group's ``initial_lr``), ``last_epoch``, ``step()``,
    ``get_last_lr()``, ``state_dict()`` / ``load_state_dict()``."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__}: {type(optimizer).__name__} is not an nn "
                            "optimizer (SGD(model.parameters(), lr=...), Adam(...))")
        if isinstance(last_epoch, bool) or not isinstance(last_epoch, int) or last_epoch < -1:
            raise ValueError(f"{type(self).__name__}: last_epoch must be an integer >= -1 (-1: "
                             f"a new schedule), got {last_epoch!r}")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   "when resuming scheduler with last_epoch >= 0: load the "
                                   "optimizer's state_dict (saved while a scheduler ran) "
                                   "before making the scheduler")
        self.base_lrs: list[float] = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial = True
        self._step_count = 0
        self.step()
        self._initial = False

    def get_lr(self) -> list[float]:
        raise NotImplementedError

    def step(self) -> None:
        """Advance one epoch and set every group's ``lr``."""
        self._step_count += 1
        self.last_epoch += 1
        values = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def get_last_lr(self) -> list[float]:
        """The learning rates the last ``step()`` (or the constructor) set."""
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer (and functions, as PyTorch's LambdaLR leaves out)."""
        return {k: v for k, v in self.__dict__.items()
                if k != "optimizer" and not callable(v) and k != "lr_lambdas"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)

    def _groups_lr(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]


class StepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.step_size = count("StepLR: step_size", step_size, minimum=1)
        self.gamma = number("StepLR: gamma", gamma, lo=0.0, hi=math.inf)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._groups_lr()
        return [lr * self.gamma for lr in self._groups_lr()]


class LambdaLR(LRScheduler):
    """``lr = initial_lr * lr_lambda(epoch)`` (one function, or one per group)."""

    def __init__(self, optimizer: Optimizer,
                 lr_lambda: Callable[[int], float] | list[Callable[[int], float]],
                 last_epoch: int = -1) -> None:
        groups = len(optimizer.param_groups) if isinstance(optimizer, Optimizer) else 1
        lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else (
            [lr_lambda] * groups)
        if len(lambdas) != groups or not all(callable(f) for f in lambdas):
            raise ValueError(f"LambdaLR: lr_lambda must be a function (or {groups} of them, "
                             f"one per param group), got {lr_lambda!r}")
        self.lr_lambdas = lambdas
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [base * f(self.last_epoch)
                for f, base in zip(self.lr_lambdas, self.base_lrs, strict=True)]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from ``initial_lr`` to ``eta_min`` over ``T_max`` epochs (and back up,
    periodically, as PyTorch's recursion does after ``T_max``)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,  # noqa: N803
                 last_epoch: int = -1) -> None:
        self.T_max = count("CosineAnnealingLR: T_max", T_max, minimum=1)
        self.eta_min = number("CosineAnnealingLR: eta_min", eta_min, lo=0.0, hi=math.inf)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        e, t_max, eta = self.last_epoch, self.T_max, self.eta_min
        if self._initial:
            return self._groups_lr()
        if (e - 1 - t_max) % (2 * t_max) == 0:
            return [lr + (base - eta) * (1 - math.cos(math.pi / t_max)) / 2
                    for base, lr in zip(self.base_lrs, self._groups_lr(), strict=True)]
        return [(1 + math.cos(math.pi * e / t_max)) / (1 + math.cos(math.pi * (e - 1) / t_max))
                * (lr - eta) + eta for lr in self._groups_lr()]


__all__ = ["CosineAnnealingLR", "LRScheduler", "LambdaLR", "StepLR"]
