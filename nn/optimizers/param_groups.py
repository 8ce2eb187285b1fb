"""``optimizer.param_groups``' entries: ``ParamGroup``, a mapping of ``"params"`` and a
group's hyperparameters (PyTorch's names), whose first group's ``"lr"`` is the optimizer's
learning rate, live."""

from __future__ import annotations

import math
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

from nn.engine.checks import number

if TYPE_CHECKING:
    from nn.optimizers.base import Optimizer


class ParamGroup(MutableMapping[str, Any]):
    """One entry of ``Optimizer.param_groups``: ``"params"`` (the group's params), ``"lr"``
    and the group's other hyperparameters (PyTorch's names), plus entries of one's own
    (``"initial_lr"``). The first group's ``"lr"`` is the optimizer's learning rate, live
    (``live_lr``); another group's is its own, checked as the optimizer's is when set."""

    def __init__(self, optimizer: Optimizer, params: list[Any] | None,
                 options: dict[str, Any], live_lr: bool) -> None:
        self._optimizer = optimizer
        self._params = params
        self._live_lr = live_lr
        self._entries: dict[str, Any] = {}
        for k, v in options.items():
            self[k] = v

    @property
    def holds_params(self) -> bool:
        """False for the one group of an optimizer built without params (Keras's way: its
        params are the variables ``apply_gradients`` has seen)."""
        return self._params is not None

    def __getitem__(self, key: str) -> Any:
        if key == "lr" and self._live_lr:
            return self._optimizer.lr
        if key == "params":
            if self._params is None:
                return self._optimizer._require_params("param_groups")
            return self._params
        return self._entries[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if key == "lr" and self._live_lr:
            self._optimizer.lr = value
        elif key == "lr":
            self._entries[key] = number("lr", value, lo=0.0, hi=math.inf)
        elif key == "params":
            raise KeyError("param_groups[i]['params'] is fixed when the group is made (add "
                           "params in a new group: optimizer.add_param_group)")
        else:
            self._entries[key] = value

    def __delitem__(self, key: str) -> None:
        if key in ("lr", "params"):
            raise KeyError(f"param_groups[i][{key!r}] cannot be deleted")
        del self._entries[key]

    def __iter__(self) -> Iterator[str]:
        yield from ("params", "lr", *(k for k in self._entries if k != "lr"))

    def __len__(self) -> int:
        return 2 + sum(k != "lr" for k in self._entries)

    def __repr__(self) -> str:
        return f"ParamGroup(lr={self['lr']!r}, {self._entries!r})"


__all__ = ["ParamGroup"]
