"""``torch.nn.functional``: ``relu``, ``gelu``, ``sigmoid``, ``tanh``, ``softmax``,
``log_softmax``, ``linear``, ``cross_entropy``, ``mse_loss`` with PyTorch's arguments
(``dim``, ``weight`` of shape (out, in), ``reduction``), over nn's ops."""

from __future__ import annotations

from typing import Any

from nn import functions as F
from nn.engine.tensor import Tensor
from nn.faces.torch_losses import CrossEntropyLoss, MSELoss


def _dim(op: str, dim: int | None) -> int:
    if dim is None:
        raise TypeError(f"{op}: pass dim= (PyTorch's implicit dim is deprecated; nn's face "
                        "requires it)")
    return dim


def relu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002 (PyTorch's name)
    if inplace:
        raise NotImplementedError("relu(inplace=True): nn's tensors are not modified in place")
    return F.relu(input)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:  # noqa: A002
    if approximate != "none":
        raise NotImplementedError(f"gelu(approximate={approximate!r}): nn has the exact GELU "
                                  "only (approximate='none')")
    return F.gelu(input)


def sigmoid(input: Tensor) -> Tensor:  # noqa: A002
    return F.sigmoid(input)


def tanh(input: Tensor) -> Tensor:  # noqa: A002
    return F.tanh(input)


def softmax(input: Tensor, dim: int | None = None) -> Tensor:  # noqa: A002
    return F.softmax(input, axis=_dim("softmax", dim))


def log_softmax(input: Tensor, dim: int | None = None) -> Tensor:  # noqa: A002
    return F.log_softmax(input, axis=_dim("log_softmax", dim))


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:  # noqa: A002
    """``input @ weight.T + bias`` (``weight`` of shape (out, in), PyTorch's layout)."""
    return F.linear(input, weight.T, bias)


def cross_entropy(input: Tensor, target: Any, weight: Any = None,  # noqa: A002
                  ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    return CrossEntropyLoss(weight=weight, ignore_index=ignore_index, reduction=reduction,
                            label_smoothing=label_smoothing)(input, target)


def mse_loss(input: Tensor, target: Any, reduction: str = "mean") -> Tensor:  # noqa: A002
    return MSELoss(reduction=reduction)(input, target)


__all__ = ["cross_entropy", "gelu", "linear", "log_softmax", "mse_loss", "relu", "sigmoid",
           "softmax", "tanh"]
