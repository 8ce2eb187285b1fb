"""Every op in ``nn.functions`` has a float64 gradient check: backward against central
differences (tests/nn/nn_gradcheck.py), enumerated from the package, as the rounding modes are.

A new op without an entry in ``CHECKS`` fails ``test_every_op_has_a_float64_gradient_check``.
Inputs keep away from kinks and ties (relu at 0, max ties, clip bounds) so that the central
difference is the derivative.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from nn_gradcheck import check_op_gradients

import nn
import nn.functions as F

RNG = np.random.default_rng(23)


def _away_from_zero(shape: tuple[int, ...], lo: float = 0.2) -> np.ndarray:
    x = RNG.uniform(lo, 1.5, size=shape)
    return x * RNG.choice([-1.0, 1.0], size=shape)


def _distinct(shape: tuple[int, ...]) -> np.ndarray:
    """Values 0.1 apart (shuffled): no ties for max and max-pooling."""
    n = int(np.prod(shape))
    return RNG.permutation(np.arange(n) * 0.1 - n * 0.05).reshape(shape)


def _const(a: np.ndarray) -> nn.Tensor:
    return nn.Tensor(a, fmt="float64")


A, B = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
W, BIAS = RNG.standard_normal((4, 5)), RNG.standard_normal(5)
IMG, KERNEL = RNG.standard_normal((2, 5, 5, 2)), RNG.standard_normal((3, 3, 2, 3))
Y_RELU = _away_from_zero((3, 4))
LABELS = np.array([0, 3, 1])
MASK = np.tril(np.ones((4, 4), bool))

# op name -> (f over tensors, the input arrays)
CHECKS: dict[str, tuple[Callable[..., Any], list[np.ndarray]]] = {
    "accumulated_linear": (lambda x, w, b: F.accumulated_linear(x, w, b, None), [A, W, BIAS]),
    "accumulated_matmul": (lambda a, b: F.accumulated_matmul(a, b, None), [A, W]),
    "add": (F.add, [A, B]),
    "attention": (lambda q, k, v: F.attention(q, k, v, MASK, None)[0],
                  [RNG.standard_normal((2, 2, 4, 3)), RNG.standard_normal((2, 2, 4, 3)),
                   RNG.standard_normal((2, 2, 4, 3))]),  # (batch, heads, length, depth)
    "broadcast_to": (lambda a: F.broadcast_to(a, (2, 3, 4)), [A]),
    "cast": (lambda a: F.cast(a, "float64"), [A]),
    "clip": (lambda a: F.clip(a, -0.5, 0.5), [np.array([-1.0, -0.3, 0.1, 0.4, 0.9])]),
    "conv2d": (lambda x, k, b: F.conv2d(x, k, b, padding="same"),
               [IMG, KERNEL, RNG.standard_normal(3)]),
    "div": (F.div, [A, _away_from_zero((3, 4))]),
    "dropout": (lambda a: F.dropout(a, 0.5, rng=np.random.default_rng(0)), [A]),
    "embedding": (lambda t: F.embedding(t, np.array([[0, 2], [1, 1]])),
                  [RNG.standard_normal((3, 4))]),
    "erf": (F.erf, [A]),
    "exp": (F.exp, [A]),
    "gelu": (F.gelu, [A]),
    "getitem": (lambda a: F.getitem(a, (slice(0, 2), [0, 3])), [A]),
    "layer_norm": (lambda x, g, b: F.layer_norm(x, g, b, (-1,), 1e-3, None),
                   [A, RNG.standard_normal(4), RNG.standard_normal(4)]),
    "leaky_relu": (lambda a: F.leaky_relu(a, 0.1), [_away_from_zero((3, 4))]),
    "linear": (F.linear, [A, W, BIAS]),
    "log": (F.log, [np.abs(_away_from_zero((3, 4)))]),
    "log_softmax": (F.log_softmax, [A]),
    "matmul": (F.matmul, [A, W]),
    "max": (lambda a: F.max(a, axis=1), [_distinct((3, 4))]),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2), [_distinct((1, 4, 4, 2))]),
    "mean": (lambda a: F.mean(a, axis=0), [A]),
    "moments": (lambda x: (lambda m, v: m * 2.0 + v)(*F.moments(x, (0,), None)), [A]),
    "mul": (F.mul, [A, B]),
    "neg": (F.neg, [A]),
    "normalize": (lambda x, m, v, g, b: F.normalize(x, m, v, g, b, 1e-3, None),
                  [A, RNG.standard_normal(4), RNG.uniform(0.5, 2.0, 4), RNG.standard_normal(4),
                   RNG.standard_normal(4)]),
    "patches": (lambda x: F.patches(x, 2), [RNG.standard_normal((1, 3, 3, 2))]),
    "pow": (lambda a: F.pow(a, 3.0), [A]),
    "relu": (F.relu, [_away_from_zero((3, 4))]),
    "relu_grad": (lambda g: F.relu_grad(g, _const(Y_RELU)), [B]),
    "reshape": (lambda a: F.reshape(a, (4, 3)), [A]),
    "sigmoid": (F.sigmoid, [A]),
    "softmax": (F.softmax, [A]),
    "sparse_softmax_cross_entropy": (lambda z: F.sparse_softmax_cross_entropy(z, LABELS), [A]),
    "sqrt": (F.sqrt, [np.abs(_away_from_zero((3, 4)))]),
    "sub": (F.sub, [A, B]),
    "sum": (lambda a: F.sum(a, axis=1), [A]),
    "tanh": (F.tanh, [A]),
    "transpose": (F.transpose, [A]),
}


def _ops() -> list[str]:
    """Every op wrapper ``nn.functions`` exports (its lower-case functions)."""
    return sorted(name for name in F.__all__ if name[0].islower()
                  and inspect.isfunction(getattr(F, name)) and not name.startswith("autocast_"))


def test_every_op_has_a_float64_gradient_check():
    ops = _ops()
    assert len(ops) >= 38
    assert sorted(CHECKS) == ops, {"missing": sorted(set(ops) - set(CHECKS)),
                                   "stale": sorted(set(CHECKS) - set(ops))}


@pytest.mark.parametrize("op", sorted(CHECKS))
def test_the_backward_of_each_op_matches_float64_central_differences(op):
    f, arrays = CHECKS[op]
    check_op_gradients(f, *[a.copy() for a in arrays])
