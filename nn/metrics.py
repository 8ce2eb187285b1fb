"""Accuracy: the share of samples whose predicted class (argmax) equals the label.

Labels may be integers (sparse, shape (N,) or (N, 1)) or one-hot rows (shape (N, C)); a
prediction with one column is read as a probability and thresholded at 0.5.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nn.registry import METRICS
from nn.tensor import Tensor


def _array(x: Any) -> np.ndarray:
    return np.asarray(x.data if isinstance(x, Tensor) else x)


def correct(y_true: Any, y_pred: Any) -> np.ndarray:
    """A boolean per sample: was the prediction right?"""
    t, p = _array(y_true), _array(y_pred)
    if p.ndim == 0:
        raise ValueError(f"accuracy needs batched predictions, got shape {p.shape}")
    if p.shape[-1] == 1 and p.ndim >= 1 and t.shape in (p.shape, p.shape[:-1]):
        return (p.reshape(t.shape) > 0.5) == (t > 0.5)
    if t.shape == p.shape:
        return np.argmax(t, axis=-1) == np.argmax(p, axis=-1)
    if t.ndim == p.ndim and t.shape[-1] == 1:
        t = t[..., 0]
    if t.shape != p.shape[:-1]:
        raise ValueError(f"accuracy: labels of shape {t.shape} do not match predictions of "
                         f"shape {p.shape}")
    return np.argmax(p, axis=-1) == t


def accuracy(y_true: Any, y_pred: Any) -> float:
    """The fraction of correct predictions in this batch."""
    hits = correct(y_true, y_pred)
    return float(hits.mean()) if hits.size else 0.0


_ACCURACY_NAMES = ("accuracy", "acc", "sparse_categorical_accuracy", "categorical_accuracy")


@METRICS.register(aliases=_ACCURACY_NAMES,
                  alias_config={a: {"name": a} for a in _ACCURACY_NAMES})
class Accuracy:
    """A running accuracy over batches: ``update_state``, ``result``, ``reset_state``."""

    def __init__(self, name: str = "accuracy") -> None:
        if not (isinstance(name, str) and name):
            raise ValueError(f"Accuracy: name must be a non-empty string, got {name!r}")
        self.name = name
        self.reset_state()

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Accuracy:
        return cls(**config)

    def reset_state(self) -> None:
        self.total = 0
        self.count = 0

    def update_state(self, y_true: Any, y_pred: Any) -> None:
        hits = correct(y_true, y_pred)
        self.total += int(hits.sum())
        self.count += int(hits.size)

    def result(self) -> float:
        return self.total / self.count if self.count else 0.0


def get(identifier: str | Accuracy) -> Accuracy:
    """A metric from a registered name ("accuracy", "acc", "sparse_categorical_accuracy", ...)
    or an instance (returned as it is)."""
    if isinstance(identifier, Accuracy):
        return identifier
    metric: Accuracy = METRICS.get(identifier)
    return metric


def names() -> list[str]:
    """The short names ``get`` accepts ("adam", ...; class names work too), sorted."""
    return METRICS.aliases()
