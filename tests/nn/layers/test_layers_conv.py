"""Conv2D, Conv2d and the pooling layers: shapes against TF's formulas, gradients against
float64 central differences, mixed_float16 outputs against from-the-spec references."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from layer_gradcheck import check_layer_gradients

import nn
from fpsim.accumulate import gamma
from nn import layers

FEW = settings(max_examples=8, deadline=None)


def direct_conv(x: np.ndarray, k: np.ndarray, b: np.ndarray, strides: tuple[int, int],
                pads: tuple[int, int, int, int]) -> np.ndarray:
    """Convolution by its definition, one output pixel at a time, in float64."""
    top, bottom, left, right = pads
    xp = np.pad(np.asarray(x, np.float64), ((0, 0), (top, bottom), (left, right), (0, 0)))
    kh, kw = k.shape[:2]
    oh = (xp.shape[1] - kh) // strides[0] + 1
    ow = (xp.shape[2] - kw) // strides[1] + 1
    out = np.zeros((x.shape[0], oh, ow, k.shape[3]))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, i * strides[0]:i * strides[0] + kh, j * strides[1]:j * strides[1] + kw]
            out[:, i, j] = np.einsum("nabc,abcd->nd", win, np.asarray(k, np.float64)) + b
    return out


def tf_same_pads(size: int, k: int, s: int) -> tuple[int, int]:
    """TensorFlow's SAME padding, from its documentation: out = ceil(in / s), the odd cell
    at the end."""
    out = math.ceil(size / s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2


@st.composite
def conv_cases(draw: st.DrawFn) -> dict:
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    sh, sw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    h, w = draw(st.integers(kh, 6)), draw(st.integers(kw, 6))
    return {"n": draw(st.integers(1, 2)), "h": h, "w": w, "cin": draw(st.integers(1, 3)),
            "filters": draw(st.integers(1, 3)), "kernel": (kh, kw), "strides": (sh, sw),
            "padding": draw(st.sampled_from(["valid", "same"])),
            "seed": draw(st.integers(0, 2**16))}


@FEW
@given(conv_cases())
def test_conv2d_equals_the_direct_definition_with_tf_padding(case):
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal((case["n"], case["h"], case["w"], case["cin"]))
    layer = layers.Conv2D(case["filters"], case["kernel"], strides=case["strides"],
                          padding=case["padding"], bias_initializer="ones", dtype="float64")
    y = layer(nn.Tensor(x, fmt="float64"))
    kh, kw = case["kernel"]
    if case["padding"] == "same":
        pads = (*tf_same_pads(case["h"], kh, case["strides"][0]),
                *tf_same_pads(case["w"], kw, case["strides"][1]))
    else:
        pads = (0, 0, 0, 0)
    k, b = layer.get_weights()
    np.testing.assert_allclose(y.data, direct_conv(x, k, b, case["strides"], pads), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("size,k,s", [(5, 3, 1), (5, 2, 2), (6, 3, 2), (7, 4, 3), (4, 1, 3)])
def test_same_padding_gives_ceil_in_over_stride_with_the_odd_pixel_at_the_end(size, k, s):
    y = layers.Conv2D(1, (k, 1), strides=(s, 1), padding="same")(np.ones((1, size, 1, 1),
                                                                          np.float32))
    assert y.shape[1] == math.ceil(size / s)
    assert layers.Conv2D(1, (k, 1), strides=(s, 1))(np.ones((1, size, 1, 1), np.float32)
                                                   ).shape[1] == math.ceil((size - k + 1) / s)


def test_same_padding_puts_the_odd_pixel_at_the_bottom_right():
    # a 2x2 kernel of ones, stride 1, on a 3x3 image: out 3x3, one padded row/col at the end
    x = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
    layer = layers.Conv2D(1, 2, padding="same", kernel_initializer="ones")
    y = layer(x).data[0, :, :, 0]
    assert y[0, 0] == 0 + 1 + 3 + 4  # the first window starts at the top-left pixel
    assert y[2, 2] == 8  # the last window sees only the bottom-right pixel


@FEW
@given(conv_cases())
def test_conv2d_gradients_match_central_differences(case):
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal((case["n"], case["h"], case["w"], case["cin"]))
    layer = layers.Conv2D(case["filters"], case["kernel"], strides=case["strides"],
                          padding=case["padding"], activation="tanh", dtype="float64",
                          bias_initializer="he_uniform")
    layer(x)
    check_layer_gradients(layer, [x], layer.trainable_variables, seed=case["seed"])


def test_conv2d_relu_gradient_matches_central_differences():
    x = np.random.default_rng(3).standard_normal((2, 5, 5, 2))
    layer = layers.Conv2D(3, 3, padding="same", activation="relu", dtype="float64")
    layer(x)
    check_layer_gradients(layer, [x], layer.trainable_variables)


def _grid_values(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Multiples of 1/16 in [-8, 8]: fp16 values whose products are multiples of 2^-8."""
    return rng.integers(-128, 129, shape) / 16.0


def test_mixed_float16_conv_is_one_rounding_of_the_exact_sum_bit_for_bit():
    """Honest bit-for-bit oracle: with these inputs every product and partial sum is a multiple
    of 2^-8 below 2^15, so fp32 accumulation is exact in any order (BLAS's included) and the
    result must be the exact sum (float64 here) rounded once to fp16 (numpy's direct,
    correctly rounded float64 -> float16)."""
    rng = np.random.default_rng(0)
    x = _grid_values(rng, (2, 6, 6, 3)).astype(np.float32)
    with nn.policy_scope("mixed_float16"):
        layer = layers.Conv2D(4, 3, strides=(1, 2), padding="same")
        layer(x)
        k, b = _grid_values(rng, (3, 3, 3, 4)), _grid_values(rng, (4,))
        layer.set_weights([k, b])
        y = layer(x)
    assert y.fmt.name == "float16"
    pads = (*tf_same_pads(6, 3, 1), *tf_same_pads(6, 3, 2))
    exact = direct_conv(x, k, b, (1, 2), pads)
    assert np.max(np.abs(exact)) < 2**15
    np.testing.assert_array_equal(y.data, exact.astype(np.float16).astype(np.float32))


def test_mixed_float16_conv_lies_within_the_fp32_accumulation_bound_of_the_exact_sum():
    """General inputs: BLAS's fp32 sum order is unknown, so the exact result is only known to
    lie within gamma(K) * sum|products| of the exact sum; one rounding to fp16 must then land
    between the fp16 roundings of the interval's ends."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 7, 7, 5)).astype(np.float32)
    with nn.policy_scope("mixed_float16"):
        layer = layers.Conv2D(6, 3)
        y = layer(x)
    k, b = layer.get_weights()
    xr = x.astype(np.float16).astype(np.float64)
    kr = np.asarray(k.astype(np.float16), np.float64)
    exact = direct_conv(xr, kr, b, (1, 1), (0, 0, 0, 0))
    bound = gamma(3 * 3 * 5 + 1) * (direct_conv(np.abs(xr), np.abs(kr), np.abs(b), (1, 1),
                                                  (0, 0, 0, 0)))
    lo = (exact - bound).astype(np.float16).astype(np.float64)
    hi = (exact + bound).astype(np.float16).astype(np.float64)
    assert np.all((lo <= y.data) & (y.data <= hi))
    assert np.mean(y.data == exact.astype(np.float16)) > 0.99


def test_float16_accumulator_adds_left_to_right_rounding_each_sum_to_fp16():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 3, 3, 2)).astype(np.float32)
    with nn.policy_scope("mixed_float16"):
        layer = layers.Conv2D(2, 2, accumulator="float16")
        y = layer(x)
    k, b = layer.get_weights()
    x16 = x.astype(np.float16).astype(np.float64)
    k16 = k.astype(np.float16).astype(np.float64)
    ref = np.zeros((1, 2, 2, 2))
    for i in range(2):
        for j in range(2):
            for f in range(2):
                terms = (x16[0, i:i + 2, j:j + 2, :] * k16[:, :, :, f]).reshape(-1)
                acc = np.float16(terms[0])
                for t in terms[1:]:  # (kh, kw, in) order, as the im2col rows
                    acc = np.float16(np.float64(acc) + t)  # exact sum, one rounding
                ref[0, i, j, f] = np.float16(np.float64(acc) + b[f])
    np.testing.assert_array_equal(y.data, ref)


def test_conv2d_pytorch_face_takes_nchw_and_equals_conv2d_on_nhwc():
    x = np.random.default_rng(4).standard_normal((2, 3, 6, 5)).astype(np.float32)
    torch_face = layers.Conv2d(3, 4, 3, stride=2, padding=1)
    y = torch_face(x)
    keras_face = layers.Conv2D(4, 3, strides=2, padding="valid")
    keras_face(np.zeros((1, 8, 7, 3), np.float32))
    weight, bias = torch_face.get_weights()  # PyTorch's (out, in, kh, kw)
    keras_face.set_weights([weight.transpose(2, 3, 1, 0), bias])
    ref = keras_face(np.pad(x.transpose(0, 2, 3, 1), ((0, 0), (1, 1), (1, 1), (0, 0))))
    assert y.shape == (2, 4, 3, 3)
    np.testing.assert_array_equal(y.data, ref.data.transpose(0, 3, 1, 2))


@pytest.mark.parametrize("layer_cls", [layers.MaxPooling2D, layers.AveragePooling2D])
@pytest.mark.parametrize("padding", ["valid", "same"])
@pytest.mark.parametrize("pool,strides", [((2, 2), None), ((3, 2), (2, 1))])
def test_pooling_equals_the_window_definition_and_its_gradients_match(layer_cls, padding,
                                                                     pool, strides):
    rng = np.random.default_rng(5)
    x = rng.permutation(2 * 5 * 5 * 2).reshape(2, 5, 5, 2) / 7.0  # distinct: no tied maxima
    layer = layer_cls(pool, strides=strides, padding=padding, dtype="float64")
    y = layer(nn.Tensor(x, fmt="float64")).data
    s = pool if strides is None else strides
    pads = ((0, 0), (0, 0))
    if padding == "same":
        pads = (tf_same_pads(5, pool[0], s[0]), tf_same_pads(5, pool[1], s[1]))
    xp = np.pad(x, ((0, 0), *pads, (0, 0)), constant_values=np.nan)
    for i in range(y.shape[1]):
        for j in range(y.shape[2]):
            win = xp[:, i * s[0]:i * s[0] + pool[0], j * s[1]:j * s[1] + pool[1]]
            ref = (np.nanmax if layer_cls is layers.MaxPooling2D else np.nanmean)(win, (1, 2))
            np.testing.assert_allclose(y[:, i, j], ref, rtol=1e-14)
    check_layer_gradients(layer, [x])


def test_global_average_pooling_is_the_mean_over_pixels_and_its_gradient_matches():
    x = np.random.default_rng(6).standard_normal((2, 3, 4, 5))
    layer = layers.GlobalAveragePooling2D(dtype="float64")
    np.testing.assert_allclose(layer(nn.Tensor(x, fmt="float64")).data, x.mean(axis=(1, 2)),
                               rtol=1e-14)
    assert layers.GlobalAveragePooling2D(keepdims=True)(x.astype(np.float32)).shape == (2, 1, 1, 5)
    check_layer_gradients(layer, [x])


def test_average_pooling_under_mixed_float16_rounds_the_fp32_mean_once():
    x = np.random.default_rng(7).standard_normal((1, 4, 4, 3)).astype(np.float32)
    with nn.policy_scope("mixed_float16"):
        y = layers.AveragePooling2D()(x)
    x16 = x.astype(np.float16).astype(np.float64)
    ref = x16.reshape(1, 2, 2, 2, 2, 3).mean(axis=(2, 4))
    np.testing.assert_array_equal(y.data, ref.astype(np.float16).astype(np.float32))


@pytest.mark.parametrize("make,needle", [
    (lambda: layers.Conv2D(0, 3), "filters"),
    (lambda: layers.Conv2D(4, (3, 0)), "kernel_size"),
    (lambda: layers.Conv2D(4, 3, strides=-1), "strides"),
    (lambda: layers.Conv2D(4, 3, padding="full"), "padding"),
    (lambda: layers.Conv2D(4, 3, data_format="channels_first"), "Conv2d"),
    (lambda: layers.Conv2D(4, 3, dilation_rate=2), "dilation_rate"),
    (lambda: layers.Conv2D(4, 3, accumulator="fp17"), "accumulator"),
    (lambda: layers.Conv2d(3, 4, 3, padding=-1), "padding"),
    (lambda: layers.MaxPooling2D(pool_size=0), "pool_size"),
    (lambda: layers.AveragePooling2D(padding="causal"), "padding"),
])
def test_bad_arguments_raise_naming_the_argument(make, needle):
    with pytest.raises(ValueError, match=needle):
        make()


def test_wrong_input_shapes_raise_naming_the_layer_and_the_shapes():
    layer = layers.Conv2D(2, 3, name="c")
    layer(np.zeros((1, 5, 5, 3), np.float32))
    with pytest.raises(ValueError, match=r"'c'.*\(batch, height, width, 3\).*\(1, 5, 5, 4\)"):
        layer(np.zeros((1, 5, 5, 4), np.float32))
    with pytest.raises(ValueError, match="does not fit"):
        layers.Conv2D(2, 3)(np.zeros((1, 2, 2, 1), np.float32))
    with pytest.raises(ValueError, match=r"NCHW.*\(1, 5, 5, 3\)"):
        layers.Conv2d(1, 2, 3)(np.zeros((1, 5, 5, 3), np.float32))


def test_float16_accumulator_stalls_at_2048_when_summing_ones_and_fp32_does_not():
    ones = np.ones((1, 1, 1, 4096), np.float32)
    kernel = np.ones((1, 1, 4096, 1), np.float32)
    with nn.policy_scope("mixed_float16"):
        narrow, wide = (layers.Conv2D(1, 1, use_bias=False, accumulator=acc)
                        for acc in ("float16", None))
        for layer in (narrow, wide):
            layer(ones)
            layer.set_weights([kernel])
        assert narrow(ones).item() == 2048  # 2048 + 1 rounds back to 2048 in fp16
        assert wide(ones).item() == 4096


def test_conv2d_with_an_accumulator_option_has_the_same_gradients():
    x = np.random.default_rng(8).standard_normal((1, 4, 4, 2))
    layer = layers.Conv2D(2, 2, strides=2, activation="relu", accumulator="float16",
                          dtype="float64")
    layer(nn.Tensor(x, fmt="float64"))
    check_layer_gradients(layer, [x], layer.trainable_variables)


def test_conv2d_pytorch_face_starts_uniform_within_one_over_sqrt_fan_in():
    layer = layers.Conv2d(4, 8, 3)
    layer(np.zeros((1, 4, 5, 5), np.float32))
    bound = 1 / math.sqrt(4 * 3 * 3)
    for w in layer.get_weights():
        assert np.all(np.abs(w) <= bound) and np.max(np.abs(w)) > bound / 2


def test_conv2d_pytorch_face_gradients_match_central_differences():
    x = np.random.default_rng(9).standard_normal((2, 2, 5, 4))
    layer = layers.Conv2d(2, 3, (3, 2), stride=(2, 1), padding=1, dtype="float64")
    layer(nn.Tensor(x, fmt="float64"))
    check_layer_gradients(layer, [x], layer.trainable_variables)
