"""The quantized matmul of nn.fp8: forward and backward against independent oracles."""

from __future__ import annotations

import numpy as np
import pytest

import fpsim
import nn
from fpsim import E4M3FN, E5M2
from nn.fp8 import BlockScaling, DelayedScaling

RNG = np.random.default_rng(7)


def small_integers(shape, top):
    """Integers in [-top, top]: every quantized value below is a short binary fraction, so the
    fp32 sums of their products are exact and equal the float64 oracle."""
    return RNG.integers(-top, top + 1, size=shape).astype(np.float32)


@pytest.mark.parametrize("fmt,recipe", [("mxfp8_e4m3", "mxfp8"), ("mxfp4_e2m1", "mxfp4"),
                                        ("mxint8", "mxint8"), ("nvfp4", "nvfp4")])
def test_block_scaled_matmul_equals_mx_quantized_operands_multiplied_in_float64(fmt, recipe):
    a, b = small_integers((5, 40), 15), small_integers((40, 3), 15)  # 40: a partial block
    a[0, 0] = b[1, 0] = 2688.0  # nvfp4: tensor scale amax / (6 * 448) = 1 exactly
    with nn.fp8_autocast(recipe):
        out = nn.Tensor(a) @ nn.Tensor(b)
    qa = fpsim.mx.quantize(a, fmt, axis=-1).astype(np.float64)
    qb = fpsim.mx.quantize(b, fmt, axis=-2).astype(np.float64)
    assert out.fmt == fpsim.FP32
    np.testing.assert_array_equal(out.data, (qa @ qb).astype(np.float32))


def test_block_scaled_linear_rounds_bias_and_relu_once_to_the_compute_format():
    x, w = small_integers((4, 64), 9), small_integers((64, 6), 9)
    bias = np.float32([0.5, -300.0, 1.25, 3.0, -0.75, 1e-3])
    with nn.autocast("cpu", dtype="bfloat16"), nn.fp8_autocast("mxfp8"):
        out = nn.functions.linear(nn.Tensor(x), nn.Tensor(w), nn.Tensor(bias), "relu")
    q = (fpsim.mx.quantize(x, "mxfp8_e4m3", axis=-1).astype(np.float64)
         @ fpsim.mx.quantize(w, "mxfp8_e4m3", axis=-2))
    bias_bf16 = fpsim.round(bias, "bf16").astype(np.float64)
    expected = np.maximum(fpsim.round(q + bias_bf16, "bf16"), 0)
    assert out.fmt == fpsim.BF16
    np.testing.assert_array_equal(out.data, expected)


def test_delayed_scaling_matmul_undoes_both_scales_on_the_fp32_product():
    recipe = DelayedScaling("hybrid", amax_history_len=4)
    a, b = small_integers((3, 8), 7) * 0.25, small_integers((8, 2), 7) * 64
    a[0, 0], b[0, 0] = 3.0, 448.0
    ta, tb = nn.Tensor(a), nn.Tensor(b)
    with nn.fp8_autocast(recipe):
        first = ta @ tb  # scales 1: a plain saturating e4m3fn cast of each operand
    with nn.fp8_autocast(recipe):  # the next step of the same tensors
        second = ta @ tb  # scales 448 / amax from the first step
    def e4(v, s=1.0):
        return fpsim.round(v.astype(np.float64) * s, E4M3FN, overflow="saturate")
    np.testing.assert_array_equal(first.data, (e4(a) @ e4(b)).astype(np.float32))
    sa, sb = np.float32(448) / np.float32(3.0), np.float32(448) / np.float32(448.0)
    alpha = (np.float32(1) / sa) * (np.float32(1) / sb)
    product = (e4(a, float(sa)) @ e4(b, float(sb))).astype(np.float32)  # exact: short values
    np.testing.assert_array_equal(second.data, product * alpha)
    assert sorted(recipe.states) == ["MatMul/a", "MatMul/b"]


def test_each_use_of_an_op_in_one_pass_is_its_own_tensor():
    recipe = DelayedScaling()
    t = nn.Tensor(np.ones((2, 2), np.float32))
    with nn.fp8_autocast(recipe):
        with nn.engine.autograd.name_scope("block"):
            (t @ t) @ t
        t @ t
    assert sorted(recipe.states) == ["MatMul/a", "MatMul/b", "block/MatMul/a", "block/MatMul/b",
                                     "block/MatMul_1/a", "block/MatMul_1/b"]
    with nn.fp8_autocast(recipe):  # a new pass: the same names again, one step further
        with nn.engine.autograd.name_scope("block"):
            (t @ t) @ t
    assert recipe.states["block/MatMul_1/a"].steps == 2 and recipe.states["MatMul/a"].steps == 1


def test_hybrid_backward_quantizes_the_incoming_gradient_to_e5m2():
    a, b = small_integers((4, 6), 7), small_integers((6, 3), 7)
    g = np.float32(RNG.normal(size=(4, 3)) * 1e3)  # needs E5M2's range at scale 1
    ta, tb = nn.Tensor(a, requires_grad=True), nn.Tensor(b, requires_grad=True)
    recipe = DelayedScaling("hybrid")
    with nn.fp8_autocast(recipe):
        out = ta @ tb
    out.backward(g)
    g5 = fpsim.round(g, E5M2).astype(np.float64)  # first step: scale 1
    np.testing.assert_array_equal(ta.grad.data, (g5 @ b.T).astype(np.float32))
    np.testing.assert_array_equal(tb.grad.data, (a.T @ g5).astype(np.float32))
    (rec,) = [r for r in recipe.log.records if r.name == "MatMul/grad_output"]
    assert (rec.role, rec.fmt) == ("backward", "float8_e5m2")


def test_block_backward_requantizes_each_operand_along_the_products_inner_dimension():
    a, b, g = small_integers((5, 40), 15), small_integers((40, 36), 15), small_integers((5, 36), 3)
    ta, tb = nn.Tensor(a, requires_grad=True), nn.Tensor(b, requires_grad=True)
    with nn.fp8_autocast(BlockScaling("mxfp8_e4m3", backward="mxfp8_e5m2")):
        out = ta @ tb
    out.backward(g)
    def q(v, axis, f="mxfp8_e4m3"):
        return fpsim.mx.quantize(v, f, axis=axis).astype(np.float64)
    da = q(g, -1, "mxfp8_e5m2") @ q(b, -1).T
    db = q(a, -2).T @ q(g, -2, "mxfp8_e5m2")
    np.testing.assert_array_equal(ta.grad.data, da.astype(np.float32))
    np.testing.assert_array_equal(tb.grad.data, db.astype(np.float32))


def test_straight_through_gradient_equals_central_differences_for_exact_operands():
    # operands exactly representable in e4m3fn and the gradient in e5m2: the first step
    # (scales 1) quantizes nothing, and the straight-through rule's gradient is the matmul's
    a64, b64 = small_integers((3, 5), 6).astype(np.float64), small_integers((5, 4), 6)
    w = small_integers((3, 4), 4).astype(np.float64)
    x, bias = nn.Tensor(a64.astype(np.float32), requires_grad=True), nn.Tensor(
        np.float32([0.5, 1.0, -2.0, 0.0]), requires_grad=True)
    with nn.fp8_autocast("fp8_hybrid_delayed"):
        out = nn.functions.linear(x, nn.Tensor(b64), bias)
    out.backward(w.astype(np.float32))

    def f(a: np.ndarray) -> float:  # the loss sum(w * (a @ b + bias)) in float64
        return float(np.sum(w * (a @ b64.astype(np.float64) + [0.5, 1.0, -2.0, 0.0])))

    h, numeric = 1e-3, np.zeros_like(a64)
    for i in np.ndindex(a64.shape):
        e = np.zeros_like(a64)
        e[i] = h
        numeric[i] = (f(a64 + e) - f(a64 - e)) / (2 * h)
    np.testing.assert_allclose(x.grad.data, numeric, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(bias.grad.data, w.sum(axis=0))


def test_saturated_inputs_pass_their_gradient_straight_through():
    x = nn.Tensor(np.float32([[1000.0, 1.0]]), requires_grad=True)  # 1000 saturates to 448
    with nn.fp8_autocast(DelayedScaling()):
        out = x @ nn.Tensor(np.float32([[1.0], [2.0]]))
    assert out.item() == 448.0 + 2.0
    out.backward()
    np.testing.assert_array_equal(x.grad.data, [[1.0, 2.0]])


def tf32_round(x: np.ndarray) -> np.ndarray:
    """Round float32 to 10 mantissa bits, nearest even, on the bits (from the TF32 layout:
    S|EEEEEEEE|MMMMMMMMMM|(13 dropped bits))."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    half = np.uint64((1 << 12) - 1) + ((u >> np.uint64(13)) & np.uint64(1))
    return ((u + half) & ~np.uint64((1 << 13) - 1)).astype(np.uint32).view(np.float32)


def test_mixed_tf32_matmul_equals_tf32_rounded_inputs_multiplied_in_fp32():
    x = RNG.integers(2**11, 2**12, size=(4, 16)).astype(np.float32)  # 12 bits: tf32 rounds
    w = small_integers((16, 3), 3)
    layer = nn.Dense(3, use_bias=False, dtype="mixed_tf32")
    layer(x[:1])  # builds the kernel
    layer.set_weights([w])
    out = layer(x)
    assert layer.compute_format == fpsim.FP32 and out.fmt == fpsim.FP32
    expected = tf32_round(x).astype(np.float64) @ tf32_round(w)  # sums < 2^17, grid 2: exact
    assert not np.array_equal(tf32_round(x), x)
    np.testing.assert_array_equal(out.data, expected.astype(np.float32))
