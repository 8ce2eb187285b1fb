"""Metrics with Keras's stateful API: ``Accuracy``, ``SparseCategoricalAccuracy``, ``Mean``.

Accuracy is the share of samples whose predicted class (argmax) equals the label. ``Accuracy``
takes integer labels (sparse, shape (N,) or (N, 1)) or one-hot rows (shape (N, C)), and reads a
prediction with one column as a probability thresholded at 0.5; ``SparseCategoricalAccuracy``
takes integer labels only, as Keras's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nn.engine.registry import METRICS
from nn.engine.tensor import Tensor


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


class Metric:
    """Keras's stateful metric API: ``update_state``, ``result``, ``reset_state``, and calling
    the metric (``m(values)``: update, then return the result).

    ``result()`` is a Python float (Keras returns a 0-d tensor; ``float()``, ``print`` and
    format specs read the same), accumulated in float64 sums.
    """

    def __init__(self, name: str) -> None:
        if not (isinstance(name, str) and name):
            raise ValueError(f"{type(self).__name__}: name must be a non-empty string, got "
                             f"{name!r}")
        self.name = name
        self.reset_state()

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Metric:
        return cls(**config)

    def reset_state(self) -> None:
        """Forget everything seen: ``total = count = 0``."""
        self.total: float = 0
        self.count: float = 0

    def update_state(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError

    def result(self) -> float:
        """``total / count`` (0.0 before any update, as Keras)."""
        return float(self.total / self.count) if self.count else 0.0

    def __call__(self, *args: Any, **kwargs: Any) -> float:
        self.update_state(*args, **kwargs)
        return self.result()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, result={self.result()!r})"

    def _add(self, values: np.ndarray, sample_weight: Any) -> None:
        """total += sum(values * w), count += sum(w), w broadcast to ``values`` (1 if None)."""
        v = values.astype(np.float64)
        if sample_weight is None:
            self.total += float(v.sum())
            self.count += v.size
            return
        w = _array(sample_weight).astype(np.float64)
        try:
            w = np.broadcast_to(w.reshape(w.shape + (1,) * (v.ndim - w.ndim)), v.shape)
        except ValueError:
            raise ValueError(f"{self.name}: sample_weight of shape {w.shape} does not broadcast "
                             f"to values of shape {v.shape}") from None
        self.total += float((v * w).sum())
        self.count += float(w.sum())


_ACCURACY_NAMES = ("accuracy", "acc", "categorical_accuracy")


@METRICS.register(aliases=_ACCURACY_NAMES,
                  alias_config={a: {"name": a} for a in _ACCURACY_NAMES})
class Accuracy(Metric):
    """A running accuracy over batches (integer or one-hot labels, see ``correct``)."""

    def __init__(self, name: str = "accuracy") -> None:
        super().__init__(name)

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        """Count the batch's correct predictions (each weighted by ``sample_weight``)."""
        self._add(self._hits(y_true, y_pred), sample_weight)

    def _hits(self, y_true: Any, y_pred: Any) -> np.ndarray:
        return correct(y_true, y_pred)


@METRICS.register(aliases=("sparse_categorical_accuracy",))
class SparseCategoricalAccuracy(Accuracy):
    """Keras's ``SparseCategoricalAccuracy``: integer class labels, shape (N,) or (N, 1),
    against predictions of shape (N, C); a hit when ``argmax(y_pred) == y_true``.

    One-hot labels raise (Keras would silently compare them as class ids): use ``Accuracy``.
    """

    def __init__(self, name: str = "sparse_categorical_accuracy") -> None:
        super().__init__(name)

    def _hits(self, y_true: Any, y_pred: Any) -> np.ndarray:
        t, p = _array(y_true), _array(y_pred)
        if t.ndim == p.ndim and t.shape[-1:] == (1,):
            t = t[..., 0]
        if p.ndim < 2 or t.shape != p.shape[:-1]:
            raise ValueError(f"{self.name}: needs integer labels of shape (N,) or (N, 1) and "
                             f"predictions of shape (N, C); got labels {t.shape} and predictions "
                             f"{p.shape} (one-hot labels: use nn.metrics.Accuracy)")
        if t.dtype.kind == "f" and not np.array_equal(t, np.round(t)):
            raise ValueError(f"{self.name}: labels must be integer class ids, got non-integer "
                             f"values such as {t[t != np.round(t)][0]!r}")
        return np.argmax(p, axis=-1) == t


@METRICS.register(aliases=("mean",))
class Mean(Metric):
    """Keras's ``Mean``: the (weighted) mean of every value passed to ``update_state``.

    >>> m = Mean()
    >>> m.update_state([1.0, 3.0]); m(5.0)
    3.0
    """

    def __init__(self, name: str = "mean") -> None:
        super().__init__(name)

    def update_state(self, values: Any, sample_weight: Any = None) -> None:
        """Add every element of ``values`` (a number, array or Tensor), weighted by
        ``sample_weight`` (broadcast over trailing dimensions) if given."""
        v = _array(values)
        if v.dtype.kind not in "biuf":
            raise TypeError(f"{self.name}: values must be numbers, got dtype {v.dtype}")
        self._add(v, sample_weight)


def get(identifier: str | Metric) -> Metric:
    """A metric from a registered name ("accuracy", "acc", "sparse_categorical_accuracy",
    "mean", ...) or an instance (returned as it is)."""
    if isinstance(identifier, Metric):
        return identifier
    metric: Metric = METRICS.get(identifier)
    return metric


def names() -> list[str]:
    """The short names ``get`` accepts ("accuracy", ...; class names work too), sorted."""
    return METRICS.aliases()
