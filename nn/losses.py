"""Losses, computed in fp32 as Keras does: the prediction is cast (exactly) to FP32 first.

Functions return one loss per sample; the ``Loss`` classes average them over the batch
(Keras' "sum_over_batch_size") into a one-element FP32 tensor. The gradient that flows back to
an fp16 prediction is rounded to fp16 at the prediction's monitor site (that is where loss
scaling matters).

>>> loss = SparseCategoricalCrossentropy(from_logits=True)
>>> float(loss([0], nn.Tensor([[0.0, 0.0]])).item())   # log 2
0.6931471...
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nn import functions as F
from nn.engine.formats import at_least_fp32
from nn.engine.registry import LOSSES
from nn.engine.tensor import Tensor

EPSILON = 1e-7  # probabilities are clipped to [EPSILON, 1 - EPSILON] before the log (Keras)


def _as_prediction(y_pred: Any) -> Tensor:
    t = y_pred if isinstance(y_pred, Tensor) else Tensor(y_pred)
    return F.cast(t, at_least_fp32(t.fmt))


def _labels(y_true: Any, y_pred: Tensor, loss: str) -> np.ndarray:
    y = np.asarray(y_true.data if isinstance(y_true, Tensor) else y_true)
    if y.dtype.kind == "f":
        if not np.all(np.isfinite(y)) or not np.all(y == np.round(y)):
            raise ValueError(f"{loss}: labels must be integers, got non-integer values")
        y = y.astype(np.int64)
    elif y.dtype.kind not in "iu":
        raise TypeError(f"{loss}: labels must be integers, got dtype {y.dtype}")
    if y.ndim == y_pred.ndim and y.shape[-1] == 1:
        y = y[..., 0]
    if y.shape != y_pred.shape[:-1]:
        raise ValueError(f"{loss}: labels of shape {y.shape} do not match predictions of shape "
                         f"{y_pred.shape} (expected labels of shape {y_pred.shape[:-1]})")
    classes = y_pred.shape[-1]
    if y.size and (y.min() < 0 or y.max() >= classes):
        raise ValueError(f"{loss}: labels must lie in 0..{classes - 1}, got values from "
                         f"{y.min()} to {y.max()}")
    return y


def _log_probs(y_pred: Tensor, from_logits: bool) -> Tensor:
    if from_logits:
        return F.log_softmax(y_pred, axis=-1)
    return F.clip(y_pred, EPSILON, 1 - EPSILON).log()


def sparse_categorical_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False) -> Tensor:
    """-log p[label] per sample (fp32); ``y_pred``: probabilities, or logits with from_logits."""
    p = _as_prediction(y_pred)
    if p.ndim < 1:
        raise ValueError(f"sparse_categorical_crossentropy: predictions of shape {p.shape} have "
                         "no class axis")
    labels = _labels(y_true, p, "sparse_categorical_crossentropy")
    if from_logits:  # the fused op: log_softmax and the label's entry in one pass
        flat = F.reshape(p, (-1, p.shape[-1]))
        return F.reshape(F.sparse_softmax_cross_entropy(flat, labels.reshape(-1)), labels.shape)
    logp = _log_probs(p, from_logits)
    flat = F.reshape(logp, (-1, p.shape[-1]))
    picked = flat[np.arange(flat.shape[0]), labels.reshape(-1)]
    return -F.reshape(picked, labels.shape)


def categorical_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False) -> Tensor:
    """-sum(y_true * log p) per sample (fp32), for one-hot or soft targets."""
    p = _as_prediction(y_pred)
    target = _as_target(y_true, p, "categorical_crossentropy")
    return -(target * _log_probs(p, from_logits)).sum(axis=-1)


def mean_squared_error(y_true: Any, y_pred: Any) -> Tensor:
    """mean((y_pred - y_true)^2) over the last axis per sample (fp32)."""
    p = _as_prediction(y_pred)
    diff = p - _as_target(y_true, p, "mean_squared_error")
    return (diff * diff).mean(axis=-1)


def _as_target(y_true: Any, p: Tensor, loss: str) -> Tensor:
    arr = np.asarray(y_true.data if isinstance(y_true, Tensor) else y_true)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{loss}: targets must be numbers, got dtype {arr.dtype}")
    if arr.shape != p.shape:
        raise ValueError(f"{loss}: targets of shape {arr.shape} do not match predictions of "
                         f"shape {p.shape}")
    return Tensor(arr, fmt=p.fmt)


class Loss:
    """A loss averaged over the batch: ``loss(y_true, y_pred) -> one-element FP32 Tensor``."""

    name = "loss"

    def __init__(self, name: str | None = None) -> None:
        if name is not None:
            if not (isinstance(name, str) and name):
                raise ValueError(f"{type(self).__name__}: name must be a non-empty string or "
                                 f"None, got {name!r}")
            self.name = name

    def call(self, y_true: Any, y_pred: Any) -> Tensor:
        raise NotImplementedError

    def __call__(self, y_true: Any, y_pred: Any) -> Tensor:
        return self.call(y_true, y_pred).mean()

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Loss:
        return cls(**config)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.get_config()})"


@LOSSES.register(aliases=("sparse_categorical_crossentropy",))
class SparseCategoricalCrossentropy(Loss):
    """Cross-entropy with integer labels; ``from_logits=True`` applies log_softmax (fp32)."""

    name = "sparse_categorical_crossentropy"

    def __init__(self, from_logits: bool = False, name: str | None = None) -> None:
        super().__init__(name)
        if not isinstance(from_logits, (bool, np.bool_)):
            raise TypeError(f"{type(self).__name__}: from_logits must be True or False, got "
                            f"{from_logits!r}")
        self.from_logits = bool(from_logits)

    def call(self, y_true: Any, y_pred: Any) -> Tensor:
        return sparse_categorical_crossentropy(y_true, y_pred, self.from_logits)

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "from_logits": self.from_logits}


@LOSSES.register(aliases=("categorical_crossentropy",))
class CategoricalCrossentropy(Loss):
    """Cross-entropy with one-hot targets; ``from_logits=True`` applies log_softmax (fp32)."""

    name = "categorical_crossentropy"

    def __init__(self, from_logits: bool = False, name: str | None = None) -> None:
        super().__init__(name)
        if not isinstance(from_logits, (bool, np.bool_)):
            raise TypeError(f"{type(self).__name__}: from_logits must be True or False, got "
                            f"{from_logits!r}")
        self.from_logits = bool(from_logits)

    def call(self, y_true: Any, y_pred: Any) -> Tensor:
        return categorical_crossentropy(y_true, y_pred, self.from_logits)

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "from_logits": self.from_logits}


@LOSSES.register(aliases=("mean_squared_error", "mse"))
class MeanSquaredError(Loss):
    """Mean squared error (fp32)."""

    name = "mean_squared_error"

    def call(self, y_true: Any, y_pred: Any) -> Tensor:
        return mean_squared_error(y_true, y_pred)


def get(identifier: str | Loss | Callable) -> Loss | Callable:
    """A loss from a registered name (e.g. "sparse_categorical_crossentropy", "mse", or a class
    name), a Loss instance, or a callable ``(y_true, y_pred) -> Tensor``."""
    if isinstance(identifier, Loss) or (callable(identifier) and not isinstance(identifier, str)):
        return identifier
    loss: Loss = LOSSES.get(identifier)
    return loss


def names() -> list[str]:
    """The short names ``get`` accepts ("mse", ...; class names work too), sorted."""
    return LOSSES.aliases()
