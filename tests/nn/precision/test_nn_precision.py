"""The precision semantics of docs/semantics.md, each law checked against fpsim.round applied
independently to numpy float32/float64 arithmetic (never against nn itself)."""

from __future__ import annotations

import numpy as np
import pytest

import fpsim
import nn
from fpsim import BF16, FP16, FP32
from nn import functions as F

SMALLEST_FP16_NORMAL = 2.0**-14


def _two_dense(policy: str, w2_value: float, units: int = 3):
    """x -> Dense(units) -> h -> Dense(units, kernel = w2_value * I) -> out, under ``policy``."""
    with nn.policy_scope(policy):
        d1 = nn.Dense(units, seed=0)
        d2 = nn.Dense(units, use_bias=False, kernel_initializer=lambda s, r: np.eye(*s) * w2_value)
        x = np.full((2, units), 0.5, np.float32)
        h = d1(x)
        out = d2(h)
    return d1, d2, h, out


def _activation_gradient(policy: str, upstream: float, w2_value: float):
    """h.grad after out.backward(upstream everywhere), plus the independent fp32 product."""
    _, d2, h, out = _two_dense(policy, w2_value)
    upstream_arr = np.full(out.shape, upstream, np.float32)
    out.backward(upstream_arr)
    fmt = out.fmt
    g = fpsim.round(upstream_arr, fmt)  # the output gradient, in the output's format
    w = fpsim.round(d2.kernel.data, fmt)  # the kernel as read in the compute format
    exact = g.astype(np.float64) @ w.T.astype(np.float64)
    return h.grad, exact


def test_mixed_float16_activation_gradient_below_2_pow_minus_25_underflows_to_zero():
    grad, exact = _activation_gradient("mixed_float16", SMALLEST_FP16_NORMAL, 2.0**-13)
    assert np.all(exact == 2.0**-27)  # the true gradient is non-zero...
    assert grad.fmt == FP16
    assert np.array_equal(grad.data, fpsim.round(exact, FP16).astype(np.float32))
    assert np.all(grad.data == 0)  # ...and fp16 loses it


def test_mixed_float16_activation_gradient_between_2_pow_minus_25_and_2_pow_minus_14_is_subnormal():
    grad, exact = _activation_gradient("mixed_float16", SMALLEST_FP16_NORMAL, 0.3)
    assert np.all((2.0**-25 < exact) & (exact < 2.0**-14))
    assert np.array_equal(grad.data, fpsim.round(exact, FP16).astype(np.float32))
    assert np.all((grad.data > 0) & (grad.data < SMALLEST_FP16_NORMAL))
    assert np.all(grad.data != exact)  # rounded onto the subnormal grid of 2^-24
    assert np.all(grad.data / 2.0**-24 == np.round(grad.data / 2.0**-24))


def test_mixed_float16_activation_gradient_above_65504_overflows_to_inf():
    grad, exact = _activation_gradient("mixed_float16", 60000.0, 2.0)
    assert np.all(exact > FP16.max)
    assert np.all(np.isposinf(grad.data))


def test_mixed_bfloat16_keeps_the_tiny_activation_gradient_that_fp16_loses():
    grad, exact = _activation_gradient("mixed_bfloat16", SMALLEST_FP16_NORMAL, 2.0**-13)
    assert grad.fmt == BF16
    assert np.all(grad.data == 2.0**-27)
    assert np.array_equal(grad.data, fpsim.round(exact, BF16).astype(np.float32))


def test_mixed_bfloat16_does_not_overflow_where_fp16_does():
    grad, exact = _activation_gradient("mixed_bfloat16", 60000.0, 2.0)
    assert np.all(np.isfinite(grad.data))
    assert np.array_equal(grad.data, fpsim.round(exact, BF16).astype(np.float32))


def test_weight_gradient_reaching_fp32_master_variable_is_fp32_and_equals_the_widened_fp16_value():
    rng = np.random.default_rng(0)
    # small integers and multiples of 2^-10: every fp32 product and sum below is exact,
    # so the fp32-accumulated value is the float64 value; fp16 keeps only 11 bits of it
    x = rng.integers(1, 64, (8, 4)).astype(np.float32)
    upstream = (rng.integers(1, 1000, (8, 3)) / 1024).astype(np.float32)
    with nn.policy_scope("mixed_float16"):
        dense = nn.Dense(3, seed=1)
        out = dense(x)
    out.backward(upstream)
    grad = dense.kernel.grad
    assert dense.kernel.fmt == FP32 and grad.fmt == FP32 and grad.data.dtype == np.float32
    exact = x.astype(np.float64).T @ fpsim.round(upstream, FP16).astype(np.float64)
    expected = fpsim.round(exact, FP16)
    assert np.array_equal(grad.data, expected.astype(np.float32))
    assert not np.array_equal(grad.data, exact)  # the fp16 rounding really happened
    bias_expected = fpsim.round(fpsim.round(upstream, FP16).astype(np.float64).sum(0), FP16)
    assert np.array_equal(dense.bias.grad.data, bias_expected.astype(np.float32))


def test_float32_policy_rounds_nothing_beyond_float32():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    upstream = (rng.standard_normal((5, 3)) * 1e-30).astype(np.float32)  # far below fp16 range
    dense = nn.Dense(3, seed=2)
    out = dense(nn.Tensor(x, requires_grad=True))
    out.backward(upstream)
    w, b = dense.kernel.data, dense.bias.data
    assert out.fmt == FP32
    assert np.array_equal(out.data, np.matmul(x, w) + b)  # numpy float32, bit for bit
    assert np.array_equal(dense.kernel.grad.data, np.matmul(x.T, upstream))
    assert np.array_equal(dense.bias.grad.data, upstream.sum(axis=0))
    assert np.all(dense.kernel.grad.data != 0)


def test_dense_forward_under_mixed_float16_equals_independently_rounded_reference():
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((16, 12)) * 3).astype(np.float32)
    with nn.policy_scope("mixed_float16"):
        dense = nn.Dense(7, seed=3, bias_initializer=lambda s, r: r.standard_normal(s))
        relu_dense = nn.Dense(7, activation="relu", seed=4)
        out, relu_out = dense(x), relu_dense(x)
    x16 = fpsim.round(x, FP16)

    def reference(layer):
        w16, b16 = fpsim.round(layer.kernel.data, FP16), fpsim.round(layer.bias.data, FP16)
        return fpsim.round(np.matmul(x16, w16) + b16, FP16)  # fp32 accumulate, one rounding

    assert out.fmt == FP16
    assert np.array_equal(out.data, reference(dense))
    assert np.array_equal(relu_out.data, np.maximum(reference(relu_dense), 0))


def test_every_op_output_lies_in_its_format():
    rng = np.random.default_rng(3)
    a = nn.Tensor(rng.standard_normal((4, 5)) * 10, fmt="fp16")
    b = nn.Tensor(rng.uniform(0.5, 2, (4, 5)), fmt="fp16")
    outputs = [a + b, a - b, a * b, a / b, a ** 2, b.sqrt(), b.log(), a.exp(), F.sigmoid(a),
               F.tanh(a), F.gelu(a), F.leaky_relu(a, 0.1), F.softmax(a), F.log_softmax(a),
               F.erf(a), a @ b.T]
    for out in outputs:
        assert out.fmt == FP16
        assert np.array_equal(out.data, fpsim.round(out.data, FP16), equal_nan=True)


def test_elementwise_op_is_the_fp16_rounding_of_the_exact_result():
    rng = np.random.default_rng(4)
    a64 = fpsim.round(rng.standard_normal(1000) * 100, FP16)
    b64 = fpsim.round(rng.uniform(0.01, 3, 1000), FP16)
    a, b = nn.Tensor(a64, fmt="fp16"), nn.Tensor(b64, fmt="fp16")
    for got, exact in [(a + b, a64 + b64), (a * b, a64 * b64), (a / b, a64 / b64),
                       (b.sqrt(), np.sqrt(b64))]:
        assert np.array_equal(got.data, fpsim.round(exact, FP16).astype(np.float32))


def test_sum_of_fp16_values_accumulates_in_fp32_and_returns_fp32():
    ones = nn.Tensor(np.ones(4096), fmt="fp16")
    total = ones.sum()
    assert total.fmt == FP32 and total.item() == 4096.0  # an fp16 accumulator stalls at 2048
    assert ones.mean().fmt == FP32 and ones.max().fmt == FP32


def test_softmax_of_fp16_runs_in_fp32_and_rounds_once_to_fp16():
    x = fpsim.round(np.random.default_rng(5).standard_normal((6, 10)) * 4, FP16)
    out = F.softmax(nn.Tensor(x, fmt="fp16"))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    assert out.fmt == FP16
    assert np.allclose(out.data, fpsim.round(e / e.sum(axis=1, keepdims=True), FP16), rtol=0,
                       atol=2.0**-11)


def test_loss_of_fp16_logits_is_fp32_and_its_gradient_is_cast_back_to_fp16():
    logits = nn.Tensor(np.float32([[2.0, -1.0, 0.5], [0.0, 3.0, -2.0]]), fmt="fp16",
                       requires_grad=True)
    loss = nn.losses.SparseCategoricalCrossentropy(from_logits=True)([0, 1], logits)
    assert loss.fmt == FP32
    loss.backward()
    x = logits.data.astype(np.float64)
    p = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    exact = (p - np.eye(3)[[0, 1]]) / 2
    assert logits.grad.fmt == FP16
    assert np.allclose(logits.grad.data, fpsim.round(exact, FP16), rtol=0, atol=2.0**-12)
    assert np.array_equal(logits.grad.data, fpsim.round(logits.grad.data, FP16))


def test_cast_backward_casts_the_gradient_back_and_widening_is_exact():
    x = nn.Tensor(np.float32([1.0, 2.0]), requires_grad=True)
    y = F.cast(x, "fp16")
    assert y.fmt == FP16
    y.backward(np.float32([1.0001, 2.0**-26]))  # rounded to fp16 at y, then widened to x
    assert x.grad.fmt == FP32
    assert np.array_equal(x.grad.data, fpsim.round(np.float32([1.0001, 2.0**-26]), FP16))
    assert np.array_equal(x.grad.data, np.float32([1.0, 0.0]))


def test_pure_float16_policy_keeps_variables_and_their_gradients_in_fp16():
    with nn.policy_scope("float16"):
        dense = nn.Dense(3, seed=0)
        out = dense(np.ones((2, 4), np.float32))
    out.backward(np.ones(out.shape, np.float32))
    for v in dense.trainable_variables:
        assert v.fmt == FP16 and v.grad.fmt == FP16
        assert np.array_equal(v.data, fpsim.round(v.data, FP16))


def test_monitor_counts_the_activation_gradient_underflow_at_the_layer_site():
    d1, d2, h, out = _two_dense("mixed_float16", 2.0**-13)
    with fpsim.monitor() as m:
        out.backward(np.full(out.shape, SMALLEST_FP16_NORMAL, np.float32))
    row = m.counts[f"{d1.name}/grad_activation"]
    assert row["elements"] == h.size and row["underflow"] == h.size


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16", "mixed_e4m3fn", "float16"])
def test_fused_kernels_equal_the_numpy_and_fpsim_round_path(policy):
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((9, 6)) * 2).astype(np.float32)
    upstream = rng.standard_normal((9, 5)).astype(np.float32)
    results = []
    for kernels in (True, False):
        nn.engine.rounding.KERNELS_ENABLED = kernels
        with nn.policy_scope(policy):
            model = nn.Sequential([nn.Dense(8, activation="relu", seed=1), nn.Dense(5, seed=2)])
            out = model(x)
        out.backward(upstream)
        results.append([out.data] + [v.grad.data for v in model.trainable_variables])
    for fused, plain in zip(*results, strict=True):
        assert np.array_equal(fused, plain, equal_nan=True)
