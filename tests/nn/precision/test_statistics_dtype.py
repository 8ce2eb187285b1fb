"""``statistics_dtype`` (LayerNormalization, MultiHeadAttention): only the statistics' format
changes, the variables keep the policy's; and the fast fp16 accumulation kernel equals
fpsim.accumulate's sequential model bit for bit.

Oracles: the same layer under a per-layer ``dtype="float16"`` given the same (fp16-exact)
weights; fpsim.accumulate.matmul_nd (the general correctly rounded kernel)."""

from __future__ import annotations

import numpy as np
import pytest

import fpsim
import nn
from fpsim import FP16
from fpsim.accumulate import matmul_nd
from nn import layers
from nn.functions.fp16_accumulate import fp16_sequential_matmul


def _fp16_exact(shape: tuple[int, ...], seed: int, scale: float = 1.0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(shape) * scale
    return fpsim.round(x, "fp16").astype(np.float32)


def test_layer_norm_statistics_dtype_keeps_fp32_weights_and_overflows_like_a_fp16_layer():
    x = _fp16_exact((4, 16), 1, scale=1000.0)  # deviations ~1000: squares pass fp16's max
    with nn.policy_scope("mixed_float16"):
        stats16 = layers.LayerNormalization(statistics_dtype="float16")
        y = stats16(x)
        fp32 = layers.LayerNormalization()(x)
    assert stats16.gamma is not None and stats16.gamma.fmt.name == "float32"
    assert np.all(np.isfinite(fp32.data)) and np.max(np.abs(fp32.data)) > 1
    per_layer = layers.LayerNormalization(dtype="float16")(x)
    np.testing.assert_array_equal(y.data, per_layer.data)
    assert np.all(y.data == 0)  # var overflowed to inf: every output collapsed to beta


def test_layer_norm_statistics_dtype_is_in_its_config_and_round_trips():
    layer = layers.LayerNormalization(statistics_dtype="float16")
    config = layer.get_config()
    assert config["statistics_dtype"] == "float16"
    assert layers.LayerNormalization.from_config(config).statistics_dtype == "float16"
    assert "statistics_dtype" not in layers.LayerNormalization().get_config()


def test_attention_statistics_dtype_puts_only_the_softmax_in_fp16():
    x = _fp16_exact((2, 5, 8), 2, scale=3.0)
    with nn.policy_scope("mixed_float16"):
        mha = layers.MultiHeadAttention(2, 4, statistics_dtype="float16")
        y, probs = mha(x, x, use_causal_mask=True, return_attention_scores=True)
        assert all(w.fmt.name == "float32" for w in mha.weights)
    assert probs.fmt.name == "float16"
    pure = layers.MultiHeadAttention(2, 4, dtype="float16")
    pure(x, x)  # build, then give it the same weights (fp16-exact after one rounding)
    pure.set_weights([fpsim.round(w, "fp16") for w in mha.get_weights()])
    mha.set_weights([fpsim.round(w, "fp16") for w in mha.get_weights()])
    with nn.policy_scope("mixed_float16"):
        y, probs = mha(x, x, use_causal_mask=True, return_attention_scores=True)
    y16, probs16 = pure(x, x, use_causal_mask=True, return_attention_scores=True)
    np.testing.assert_array_equal(probs.data, probs16.data)
    np.testing.assert_array_equal(y.data, y16.data)
    assert mha.get_config()["statistics_dtype"] == "float16"


@pytest.mark.parametrize("make", [
    lambda: layers.LayerNormalization(statistics_dtype="float17"),
    lambda: layers.MultiHeadAttention(2, 4, statistics_dtype="float17"),
])
def test_bad_statistics_dtype_raises_naming_the_argument_and_value(make):
    with pytest.raises(ValueError, match="statistics_dtype.*float17"):
        make()


@pytest.mark.parametrize("a_shape,b_shape,a_scale,b_scale", [
    ((64, 32), (32, 16), 1.0, 1.0),
    ((8, 600), (600, 5), 1.0, 1.0),          # long sums: swamping
    ((16, 40), (40, 12), 600.0, 10.0),       # overflow to inf
    ((16, 40), (40, 12), 2.0**-10, 2.0**-9),  # subnormal sums
    ((3, 2, 5, 7), (2, 7, 4), 1.0, 1.0),      # batched, broadcast
])
def test_fp16_accumulation_kernel_equals_fpsim_sequential_model_bit_for_bit(
        a_shape, b_shape, a_scale, b_scale):
    a = _fp16_exact(a_shape, 3, a_scale)
    b = _fp16_exact(b_shape, 4, b_scale)
    expected = matmul_nd(a, b, FP16, FP16, FP16, order="sequential")
    got = fp16_sequential_matmul(a, b)
    np.testing.assert_array_equal(got, expected)


def test_fp16_accumulation_kernel_ties_round_to_even():
    # 2048 + 1 is a tie in fp16 (ulp 2 there): nearest-even keeps 2048; 2050 + 1 goes to 2052
    a = np.array([[2048.0, 1.0], [2050.0, 1.0]], dtype=np.float32)
    b = np.ones((2, 1), dtype=np.float32)
    np.testing.assert_array_equal(fp16_sequential_matmul(a, b)[:, 0], [2048.0, 2052.0])


def test_fp16_accumulation_kernel_rejects_misaligned_shapes():
    with pytest.raises(ValueError, match="not aligned"):
        fp16_sequential_matmul(np.ones((2, 3)), np.ones((2, 3)))
