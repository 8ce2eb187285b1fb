"""nn.functions.embedding: the gradient of repeated ids is one rounding of their float64 sum;
ids that are not whole numbers in [0, rows) are refused naming the value as given."""

from __future__ import annotations

import re

import numpy as np
import pytest

import nn
from nn.engine.tensor import Tensor
from nn.functions.embedding import embedding, integer_indices


def _table_grad(table: np.ndarray, ids: np.ndarray, upstream: np.ndarray) -> np.ndarray:
    t = nn.Tensor(table, requires_grad=True)
    embedding(t, ids).backward(upstream)
    assert t.grad is not None
    return np.asarray(t.grad.data if isinstance(t.grad, Tensor) else t.grad)


def _oracle(shape: tuple[int, int], ids: np.ndarray, upstream: np.ndarray) -> np.ndarray:
    """The documented rule, independently: a float64 np.add.at, then one nearest-even rounding
    to fp32 (numpy's float64 -> float32 cast)."""
    full = np.zeros(shape, np.float64)
    np.add.at(full, ids.reshape(-1), upstream.reshape(-1, shape[1]).astype(np.float64))
    return full.astype(np.float32)


def test_a_row_hit_by_2_24_then_1000_ones_gets_the_exact_sum():
    ids = np.zeros(1001, dtype=np.int64)
    upstream = np.ones((1001, 1), np.float32)
    upstream[0, 0] = 2.0**24
    got = _table_grad(np.zeros((3, 1), np.float32), ids, upstream)
    assert got.dtype == np.float32
    assert got[0, 0] == 2.0**24 + 1000  # an fp32 running sum would give 2^24
    assert got[1, 0] == 0.0 and got[2, 0] == 0.0


def test_repeated_ids_gradient_is_one_rounding_of_the_float64_sum():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 5, size=(40, 30))
    upstream = (rng.standard_normal((40, 30, 3)) * 2.0 ** rng.integers(-20, 20, (40, 30, 1))
                ).astype(np.float32)
    got = _table_grad(np.zeros((5, 3), np.float32), ids, upstream)
    np.testing.assert_array_equal(got, _oracle((5, 3), ids, upstream))


@pytest.mark.parametrize("bad, shown", [
    (np.array([2**63], dtype=np.uint64), "9223372036854775808"),
    (np.array([1e20]), "1e+20"),
    (np.array([3, -1]), "-1"),
    (np.array([10]), "10"),
    (np.array([np.uint8(200)]), "200"),
])
def test_ids_out_of_range_are_refused_naming_the_value_as_given(bad, shown):
    with pytest.raises(ValueError,
                       match=rf"ids must be whole numbers in \[0, 10\), got {re.escape(shown)}$"):
        integer_indices(bad, 10, "ids")


def test_fractional_and_non_numeric_ids_are_refused_naming_what_is_allowed():
    with pytest.raises(ValueError, match=r"ids must be whole numbers in \[0, 10\), got 1.5"):
        integer_indices(np.array([1.5]), 10, "ids")
    with pytest.raises(TypeError, match=r"ids must be integers .*\[0, 10\).*dtype bool"):
        integer_indices(np.array([True]), 10, "ids")


def test_the_embedding_layer_names_its_indices_and_a_huge_uint64_id_as_given():
    layer = nn.layers.Embedding(10, 4)
    with pytest.raises(ValueError, match=r"layer 'embedding.*': indices must be whole numbers "
                                         r"in \[0, 10\), got 9223372036854775808"):
        layer(np.array([[2**63]], dtype=np.uint64))
    with pytest.raises(ValueError, match=r"got 1e\+20"):
        layer(np.array([[1e20]]))
    out = layer(np.array([[9]], dtype=np.uint64))  # a valid uint64 id still works
    assert out.shape == (1, 1, 4)
