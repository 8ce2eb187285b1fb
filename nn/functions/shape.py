"""Shape ops: reshape, transpose, broadcast_to, indexing. Exact: they move values, never round."""

from __future__ import annotations

from typing import Any

import numpy as np

from fpsim import FP32, Format
from nn.engine.autograd import Context, Function, is_grad_enabled
from nn.engine.rounding import sum_to_shape
from nn.engine.tensor import Tensor


class Reshape(Function):
    """The same values in a new shape."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, shape: tuple[int, ...] = ()) -> np.ndarray:
        try:
            return a.reshape(shape)
        except ValueError:
            raise ValueError(f"cannot reshape a tensor of shape {a.shape} into {shape}") from None

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return reshape(grad, ctx.inputs[0].shape)


class Transpose(Function):
    """Axes permuted (reversed when ``axes`` is None); backward applies the inverse permutation."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, axes: Any = None) -> np.ndarray:
        perm = tuple(range(a.ndim))[::-1] if axes is None else tuple(axes)
        ctx.saved["axes"] = perm
        if sorted(a_ % max(a.ndim, 1) for a_ in perm) != list(range(a.ndim)):
            raise ValueError(f"axes {axes} are not a permutation of a {a.ndim}-d tensor's axes")
        return np.transpose(a, perm)

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return transpose(grad, tuple(np.argsort(ctx.saved["axes"])))


class BroadcastTo(Function):
    """A read-only broadcast view (of ``a`` reshaped to ``kept`` first, if given: the backward
    of a reduction); the engine sums the gradient back to the input's shape."""

    differentiable_backward = True

    @staticmethod
    def forward(
        ctx: Context, a: np.ndarray, shape: tuple[int, ...] = (), kept: Any = None
    ) -> np.ndarray:
        ctx.saved["kept"] = kept
        try:
            return np.broadcast_to(a if kept is None else a.reshape(kept), shape)
        except ValueError:
            raise ValueError(f"cannot broadcast a tensor of shape {a.shape} to {shape}") from None

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        kept = ctx.saved["kept"]
        if kept is not None and kept != ctx.inputs[0].shape:
            return SumTo.apply(grad, kept=kept, shape=ctx.inputs[0].shape)
        return grad


class SumTo(Function):
    """``grad`` summed (fp32 sums) to the shape ``kept`` and reshaped to ``shape``: the backward
    of ``BroadcastTo`` with ``kept``; its own backward is that broadcast."""

    differentiable_backward = True

    @staticmethod
    def output_format(*fmts: Format | None, **params: Any) -> Format | None:
        return fmts[0]

    @staticmethod
    def forward(ctx: Context, g: np.ndarray, kept: Any = None, shape: Any = None) -> np.ndarray:
        ctx.saved["kept"] = kept
        return sum_to_shape(g, kept).reshape(shape)

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return BroadcastTo.apply(grad, shape=ctx.inputs[0].shape, kept=ctx.saved["kept"])


class GetItem(Function):
    """a[index] (basic or integer-array indexing); backward scatter-adds into zeros (fp32 sums).

    The scatter-sum is labelled FP32 (its values are fp32 sums, not values of the gradient's
    format) so that the engine rounds it once to ``a``'s format: with repeated indices under
    fp16, the sum of several fp16 gradients is rounded, not passed on unrounded."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, index: Any = None) -> np.ndarray:
        ctx.saved["index"] = index
        return np.asarray(a[index])

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return ScatterAdd.apply(grad, shape=ctx.inputs[0].shape, index=ctx.saved["index"])


class ScatterAdd(Function):
    """zeros(shape) with ``g`` added at ``index`` (fp32 sums, labelled FP32): ``GetItem``'s
    backward; its own backward is ``g[index]``."""

    differentiable_backward = True

    @staticmethod
    def output_format(*fmts: Format | None, **params: Any) -> Format | None:
        return None if fmts[0] is None else FP32

    @staticmethod
    def forward(ctx: Context, g: np.ndarray, shape: Any = None, index: Any = None) -> np.ndarray:
        ctx.saved["index"] = index
        full = np.zeros(shape, dtype=g.dtype)
        np.add.at(full, index, g)
        return full

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return GetItem.apply(grad, index=ctx.saved["index"])


def _untracked(a: Tensor) -> bool:
    """True when no graph is recorded: a shape op may then skip the Function machinery
    (it is exact either way)."""
    return not (a.requires_grad and is_grad_enabled())


def reshape(a: Tensor, shape: Any) -> Tensor:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(n) for n in shape)
    if shape == a.shape:
        return a
    if _untracked(a) and -1 not in shape:
        if int(np.prod(shape)) != a.size:
            raise ValueError(f"cannot reshape a tensor of shape {a.shape} into {shape}")
        return Tensor._make(a.data.reshape(shape), a.fmt)
    return Reshape.apply(a, shape=shape)


def transpose(a: Tensor, axes: Any = None) -> Tensor:
    if _untracked(a) and (axes is None or len(axes) == a.ndim):
        return Tensor._make(np.transpose(a.data, axes), a.fmt)
    return Transpose.apply(a, axes=axes)


def broadcast_to(a: Tensor, shape: Any) -> Tensor:
    shape = tuple(int(n) for n in shape)
    if shape == a.shape:
        return a
    return BroadcastTo.apply(a, shape=shape)


def getitem(a: Tensor, index: Any) -> Tensor:
    if isinstance(index, Tensor):
        index = index.data
    return GetItem.apply(a, index=index)
