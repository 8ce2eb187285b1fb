"""The gradient rule on broadcast inputs: the gradient is summed back to the input's shape and
that sum rounded to the input's format (a sum of bf16 values is not a bf16 value)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

import nn
from fpsim import BF16, FP16
from nn import functions as F


def test_a_broadcast_bf16_inputs_gradient_is_its_rounded_sum():
    v = nn.Variable(np.zeros(3, np.float32))
    upstream = np.float32([[1.0, 1.0, -3.0], [2.0**-9, 2.0**-8, 2.0**-9]])
    with nn.GradientTape() as tape:
        y = nn.Tensor(np.zeros((2, 3)), fmt=BF16) + F.cast(v, BF16)
        loss = (y * nn.Tensor(upstream, fmt=BF16)).sum()
    (grad,) = tape.gradient(loss, [v])
    expected = upstream.astype(np.float64).sum(axis=0).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(grad.numpy(), expected.astype(np.float32))
    assert grad.numpy()[0] == 1.0  # 1 + 2**-9 rounds to 1 in bf16


def test_a_broadcast_fp16_tensors_gradient_is_its_rounded_sum():
    b = nn.Tensor(np.zeros(2, np.float32), fmt=FP16, requires_grad=True)
    upstream = np.float32([[1.0, 2048.0], [2.0**-11, 1.0], [0.0, 0.0]])  # two ties to even
    x = nn.Tensor(np.zeros((3, 2)), fmt=FP16)
    ((x + b) * nn.Tensor(upstream, fmt=FP16)).sum().backward()
    expected = upstream.astype(np.float64).sum(axis=0).astype(np.float16)
    np.testing.assert_array_equal(b.grad.numpy(), expected.astype(np.float32))
    assert b.grad.numpy().tolist() == [1.0, 2048.0]
