"""fpsim.matmul's rounded accumulation forms its products in blocks of rows; the blocks change
nothing, and each entry is the sum fpsim.sum's kernel gives its exact products."""

from __future__ import annotations

import numpy as np
import pytest

import fpsim
from fpsim import accumulate


@pytest.mark.parametrize("order", ["sequential", "pairwise"])
@pytest.mark.parametrize("mode", ["nearest_even", "toward_zero", "stochastic"])
def test_matmul_accumulation_does_not_depend_on_the_product_block_size(monkeypatch, order, mode):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((37, 19)).astype(np.float32)
    b = rng.standard_normal((19, 23)).astype(np.float32)
    whole = accumulate.matmul_2d(a, b, fpsim.FP32, fpsim.FP32, fpsim.FP16, order, mode, rng=5)
    monkeypatch.setattr(accumulate, "_PRODUCTS_BLOCK", 19 * 23 * 2 + 5)  # blocks of 2 rows
    blocks = accumulate.matmul_2d(a, b, fpsim.FP32, fpsim.FP32, fpsim.FP16, order, mode, rng=5)
    np.testing.assert_array_equal(blocks, whole)


@pytest.mark.parametrize("order", ["sequential", "pairwise"])
def test_a_matmul_entry_is_the_rounded_sum_of_its_exact_products(order):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((5, 33)).astype(np.float32)
    b = rng.standard_normal((33, 4)).astype(np.float32)
    got = accumulate.matmul_2d(a, b, fpsim.FP32, fpsim.FP32, fpsim.BF16, order, "nearest_even")
    for i in range(5):
        for j in range(4):
            prods = a[i].astype(np.float64) * b[:, j].astype(np.float64)  # exact
            want = accumulate.sum_rows(prods[None, :], fpsim.BF16, order, "nearest_even")[0]
            assert got[i, j] == want
