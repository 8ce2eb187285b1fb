"""Dense's ``accumulator=``: products added in a chosen format, checked against a reference
written from the rule (exact products, one rounding per addition, left to right)."""

from __future__ import annotations

import numpy as np
import pytest

import nn


def _dense(accumulator: str | None, kernel: np.ndarray, bias: np.ndarray) -> nn.Dense:
    with nn.policy_scope("mixed_float16"):
        layer = nn.Dense(kernel.shape[1], accumulator=accumulator)
    layer(np.zeros((1, kernel.shape[0]), np.float32))  # builds it
    layer.set_weights([kernel, bias])
    return layer


def _sequential_fp16_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    xh = x.astype(np.float16).astype(np.float64)
    wh = w.astype(np.float16).astype(np.float64)
    out = np.zeros((x.shape[0], w.shape[1]))
    for i in range(x.shape[0]):
        for j in range(w.shape[1]):
            acc = 0.0
            for k in range(x.shape[1]):  # exact product, then the sum rounded to fp16
                acc = float(np.float16(acc + xh[i, k] * wh[k, j]))
            out[i, j] = acc + float(np.float16(b[j]))
    return out.astype(np.float16).astype(np.float32)


def test_dense_with_a_float16_accumulator_equals_the_sequential_fp16_sum_bit_for_bit():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 40)).astype(np.float32)
    w = rng.standard_normal((40, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    y = _dense("float16", w, b)(x)
    np.testing.assert_array_equal(y.data, _sequential_fp16_reference(x, w, b))


def test_a_float16_accumulator_stalls_at_2048_when_summing_ones():
    # 2048 + 1 is a tie between 2048 and 2050 in fp16: nearest-even keeps 2048 for ever
    x, w = np.ones((1, 4096), np.float32), np.ones((4096, 1), np.float32)
    b = np.zeros(1, np.float32)
    assert float(_dense("float16", w, b)(x).data[0, 0]) == 2048.0
    assert float(_dense(None, w, b)(x).data[0, 0]) == 4096.0


@pytest.mark.parametrize("acc", [None, "float32"])
def test_the_default_and_a_float32_accumulator_are_dense_as_before(acc):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 7)).astype(np.float32)
    w, b = rng.standard_normal((7, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    plain = _dense(None, w, b)
    np.testing.assert_array_equal(_dense(acc, w, b)(x).data, plain(x).data)
    assert "accumulator" not in plain.get_config()


def test_dense_accumulator_survives_get_config_and_a_bad_name_names_the_argument():
    layer = nn.Dense(3, accumulator="fp16")
    assert layer.get_config()["accumulator"] == "float16"
    assert nn.Dense.from_config(layer.get_config()).accumulator == layer.accumulator
    with pytest.raises(ValueError, match="Dense: accumulator"):
        nn.Dense(3, accumulator="float17")
