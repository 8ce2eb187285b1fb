"""Fused loss ops. ``SparseSoftmaxCrossEntropy``: -log softmax(z)[label] per row, in fp32.

Fusing log_softmax with the pick of the label's entry is what every framework does for
cross-entropy from logits: one pass forward, and the backward is (softmax(z) - onehot) * g.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fpsim import Format
from nn.engine.autograd import Context, Function, is_grad_enabled
from nn.engine.formats import at_least_fp32
from nn.engine.tensor import Tensor
from nn.functions._common import autocast_inputs, constant, widen
from nn.functions.activations import LogSoftmax, _logsumexp
from nn.functions.elementwise import Exp
from nn.functions.shape import reshape


class SparseSoftmaxCrossEntropy(Function):
    """loss[i] = logsumexp(z[i]) - z[i, labels[i]] for z (N, C), computed in fp32 (FP32 out)."""

    differentiable_backward = True

    @staticmethod
    def output_format(*fmts: Format | None, **params: Any) -> Format | None:
        return at_least_fp32(fmts[0])

    @staticmethod
    def forward(ctx: Context, z: np.ndarray, labels: Any = None) -> np.ndarray:
        rows = np.arange(z.shape[0])
        logp = z - _logsumexp(z, axis=1)
        ctx.saved.update(labels=labels, logp=logp)
        return np.negative(logp[rows, labels])

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        labels = ctx.saved["labels"]
        rows = np.arange(len(labels))
        if is_grad_enabled():  # recorded (create_graph): the same fp32 steps as tensor ops
            onehot = np.zeros(ctx.saved["logp"].shape, np.float32)
            onehot[rows, labels] = 1
            z = widen(ctx.inputs[0])
            soft = Exp.apply(LogSoftmax.apply(z, axis=1))
            return (soft - constant(onehot, soft)) * reshape(grad, (-1, 1))
        delta = np.exp(ctx.saved["logp"])
        delta[rows, labels] -= 1  # softmax - onehot, in fp32
        return constant(delta, grad) * reshape(grad, (-1, 1))


def sparse_softmax_cross_entropy(z: Tensor, labels: np.ndarray) -> Tensor:
    """Per-row cross-entropy of logits ``z`` (N, C) against integer ``labels`` (N,)."""
    return SparseSoftmaxCrossEntropy.apply(*autocast_inputs("sparse_softmax_cross_entropy", z),
                                           labels=labels)
