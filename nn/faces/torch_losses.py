"""PyTorch's losses, in PyTorch's argument order: ``loss_fn(input, target)``.

``nn.CrossEntropyLoss()(logits, target)`` and ``nn.MSELoss()(input, target)``; Keras's losses
(``nn.losses``) keep Keras's order ``(y_true, y_pred)``. Both families compute in fp32 (the
prediction is widened exactly to FP32 first, as PyTorch's autocast and Keras do) and return an
FP32 tensor; the gradient flowing back to an fp16 prediction is rounded to fp16 there.

``reduction``: "mean" (default), "sum" or "none" (one loss per sample for cross-entropy, per
element for MSE), as in PyTorch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nn import functions as F
from nn.engine.formats import at_least_fp32
from nn.engine.tensor import Tensor

REDUCTIONS = ("mean", "sum", "none")


def _reduction(cls: str, reduction: object) -> str:
    if isinstance(reduction, str) and reduction in REDUCTIONS:
        return reduction
    raise ValueError(f"{cls}: reduction={reduction!r} is not one of {REDUCTIONS}")


def _as_fp32_input(x: Any, cls: str) -> Tensor:
    if not isinstance(x, Tensor):
        arr = np.asarray(x)
        if arr.dtype.kind != "f":
            raise TypeError(f"{cls}: input must be floating-point (the model's output), got "
                            f"dtype {arr.dtype}")
        x = Tensor(arr)
    return F.cast(x, at_least_fp32(x.fmt))


class _TorchLoss:
    """Base: ``reduction`` checked, ``__call__(input, target)`` (PyTorch's order)."""

    def __init__(self, reduction: str = "mean") -> None:
        self.reduction = _reduction(type(self).__name__, reduction)

    def forward(self, input: Any, target: Any) -> Tensor:  # noqa: A002 (PyTorch's name)
        raise NotImplementedError

    def __call__(self, input: Any, target: Any) -> Tensor:  # noqa: A002
        return self.forward(input, target)

    def _reduce(self, per_item: Tensor, count: int | None = None) -> Tensor:
        if self.reduction == "none":
            return per_item
        total = per_item.sum()
        if self.reduction == "sum":
            return total
        n = per_item.size if count is None else count
        return total / float(n) if n else total * np.nan

    def __repr__(self) -> str:
        return f"{type(self).__name__}(reduction={self.reduction!r})"


class CrossEntropyLoss(_TorchLoss):
    """Cross-entropy of logits ``input`` (N, C) against ``target``, PyTorch's ``CrossEntropyLoss``.

    - ``target`` of shape (N,): class indices in [0, C) (any integer dtype, or floats holding
      integers); ``ignore_index`` (default -100) marks samples to skip: they add 0 and do not
      count in the mean.
    - ``target`` of shape (N, C), floating-point: class probabilities (soft targets).
    - ``label_smoothing`` e in [0, 1]: the target becomes (1 - e) * one_hot + e / C, i.e.
      loss = (1 - e) * nll + e * mean_c(-log_softmax).
    - ``reduction``: "mean" (over the non-ignored samples), "sum", "none" (shape (N,)).

    Computed in fp32: log_softmax of the widened logits (max-shifted), FP32 result. Class
    weights (``weight=``) and inputs with extra dimensions (N, C, d1, ...) are not supported
    (a ValueError says so): flatten to (N * d1 * ..., C) with the class axis last.
    """

    def __init__(self, weight: Any = None, ignore_index: int = -100, reduction: str = "mean",
                 label_smoothing: float = 0.0) -> None:
        super().__init__(reduction)
        if weight is not None:
            raise ValueError("CrossEntropyLoss: weight= (class weights) is not supported in nn; "
                             "weight the per-sample losses of reduction='none' yourself")
        if isinstance(ignore_index, bool) or not isinstance(ignore_index, (int, np.integer)):
            raise TypeError(f"CrossEntropyLoss: ignore_index must be an integer, got "
                            f"{ignore_index!r}")
        if (isinstance(label_smoothing, bool)
                or not isinstance(label_smoothing, (int, float, np.floating, np.integer))
                or not 0.0 <= float(label_smoothing) <= 1.0):
            raise ValueError(f"CrossEntropyLoss: label_smoothing must be a number in [0, 1], "
                             f"got {label_smoothing!r}")
        self.ignore_index = int(ignore_index)
        self.label_smoothing = float(label_smoothing)

    def forward(self, input: Any, target: Any) -> Tensor:  # noqa: A002
        z = _as_fp32_input(input, "CrossEntropyLoss")
        if z.ndim != 2:
            raise ValueError(f"CrossEntropyLoss: input must be logits of shape (N, C), got shape "
                             f"{z.shape}; for (N, C, d1, ...) move the class axis last and "
                             "flatten to (N * d1 * ..., C)")
        t = np.asarray(target.data if isinstance(target, Tensor) else target)
        if t.shape == z.shape and t.dtype.kind == "f":
            return self._soft(z, t)
        return self._hard(z, self._class_indices(t, z.shape))

    def _class_indices(self, t: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        n, c = shape
        if t.shape != (n,):
            raise ValueError(f"CrossEntropyLoss: target must be class indices of shape ({n},) "
                             f"or probabilities of shape {shape}, got shape {t.shape}")
        if t.dtype.kind == "f":
            if not (np.all(np.isfinite(t)) and np.all(t == np.round(t))):
                raise ValueError("CrossEntropyLoss: class-index targets must be integers, got "
                                 "non-integer values")
            t = t.astype(np.int64)
        elif t.dtype.kind not in "iu":
            raise TypeError(f"CrossEntropyLoss: target must be integer class indices, got dtype "
                            f"{t.dtype}")
        bad = (t != self.ignore_index) & ((t < 0) | (t >= c))
        if bad.any():
            raise ValueError(f"CrossEntropyLoss: target {int(t[np.argmax(bad)])} is out of "
                             f"bounds for {c} classes (allowed: 0..{c - 1} or ignore_index="
                             f"{self.ignore_index})")
        return t.astype(np.int64)

    def _hard(self, z: Tensor, t: np.ndarray) -> Tensor:
        keep = t != self.ignore_index
        safe = np.where(keep, t, 0)
        if self.label_smoothing == 0:
            per = F.sparse_softmax_cross_entropy(z, safe)  # fused: logsumexp(z) - z[label]
        else:
            logp = F.log_softmax(z)
            nll = -logp[np.arange(z.shape[0]), safe]
            e = self.label_smoothing
            per = nll * (1.0 - e) + (-logp).mean(axis=-1) * e
        if not keep.all():
            per = per * Tensor(keep.astype(np.float32), fmt=per.fmt)
        return self._reduce(per, int(keep.sum()))

    def _soft(self, z: Tensor, t: np.ndarray) -> Tensor:
        e, c = self.label_smoothing, z.shape[1]
        target = Tensor(t * (1.0 - e) + e / c, fmt=z.fmt)
        per = -(F.log_softmax(z) * target).sum(axis=-1)
        return self._reduce(per)

    def __repr__(self) -> str:
        return (f"CrossEntropyLoss(ignore_index={self.ignore_index}, reduction="
                f"{self.reduction!r}, label_smoothing={self.label_smoothing})")


class MSELoss(_TorchLoss):
    """Mean squared error over *every element* (PyTorch's ``MSELoss``): (input - target)^2
    averaged ("mean"), summed ("sum") or elementwise ("none"), in fp32. ``input`` and
    ``target`` must have the same shape (PyTorch broadcasts with a warning; nn refuses)."""

    def forward(self, input: Any, target: Any) -> Tensor:  # noqa: A002
        p = _as_fp32_input(input, "MSELoss")
        t = np.asarray(target.data if isinstance(target, Tensor) else target)
        if t.dtype.kind not in "biuf":
            raise TypeError(f"MSELoss: target must be numbers, got dtype {t.dtype}")
        if t.shape != p.shape:
            raise ValueError(f"MSELoss: target of shape {t.shape} does not match input of shape "
                             f"{p.shape}")
        diff = p - Tensor(t, fmt=p.fmt)
        return self._reduce(diff * diff)
