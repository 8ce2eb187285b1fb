"""Accuracy: the share of samples whose predicted class (argmax) equals the label.

Labels may be integers (sparse, shape (N,) or (N, 1)) or one-hot rows (shape (N, C)); a
prediction with one column is read as a probability and thresholded at 0.5.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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


class Accuracy:
    """A running accuracy over batches: ``update_state``, ``result``, ``reset_state``."""

    def __init__(self, name: str = "accuracy") -> None:
        self.name = name
        self.reset_state()

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
    """A metric from a name ("accuracy", "acc", "sparse_categorical_accuracy", ...) or instance."""
    if isinstance(identifier, Accuracy):
        return identifier
    names = ("accuracy", "acc", "sparse_categorical_accuracy", "categorical_accuracy")
    if isinstance(identifier, str) and identifier.lower() in names:
        return Accuracy(name=identifier.lower())
    raise ValueError(f"unknown metric {identifier!r}; known: {', '.join(names)}")
