"""fpsim.hadamard: the random Hadamard transform against float64 definitions."""

from __future__ import annotations

import numpy as np
import pytest

from fpsim.hadamard import (
    TE_WGRAD_SIGNS,
    hadamard_matrix,
    random_hadamard_transform,
    random_signs,
    rht_matrix,
)


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 32])
def test_hadamard_entries_are_minus_one_to_the_popcount_of_i_and_j(n):
    expected = np.array([[(-1) ** bin(i & j).count("1") for j in range(n)] for i in range(n)])
    np.testing.assert_array_equal(hadamard_matrix(n), expected)


@pytest.mark.parametrize("signs", [TE_WGRAD_SIGNS, None, 7])
def test_rht_matrix_is_orthogonal(signs):
    m = rht_matrix(16, signs)
    np.testing.assert_allclose(m @ m.T, np.eye(16), atol=1e-15)
    np.testing.assert_allclose(m.T @ m, np.eye(16), atol=1e-15)


def test_rht_matrix_is_the_sign_diagonal_times_hadamard_over_four():
    h = np.array([[(-1) ** bin(i & j).count("1") for j in range(16)] for i in range(16)])
    expected = np.diag(np.array(TE_WGRAD_SIGNS, float)) @ h / 4.0
    np.testing.assert_array_equal(rht_matrix(), expected)


def test_te_sign_vector_is_sixteen_signs_six_of_them_plus():
    assert len(TE_WGRAD_SIGNS) == 16 and set(TE_WGRAD_SIGNS) == {-1, 1}
    assert TE_WGRAD_SIGNS.count(1) == 6


def test_a_sign_seed_gives_the_same_signs_and_another_seed_others():
    assert random_signs(3) == random_signs(3)
    assert {random_signs(s) for s in range(8)} != {random_signs(3)}
    np.testing.assert_array_equal(rht_matrix(16, 3), rht_matrix(16, random_signs(3)))


def test_transform_multiplies_each_whole_block_by_the_matrix_and_keeps_the_tail():
    x = np.random.default_rng(0).standard_normal((3, 37))
    y = random_hadamard_transform(x, axis=-1)
    m = rht_matrix()
    for r in range(3):
        for b in range(2):
            np.testing.assert_allclose(y[r, 16 * b:16 * b + 16], x[r, 16 * b:16 * b + 16] @ m,
                                       rtol=1e-14, atol=1e-14)
    np.testing.assert_array_equal(y[:, 32:], x[:, 32:])


def test_inverse_undoes_the_transform_along_any_axis():
    x = np.random.default_rng(1).standard_normal((32, 5, 48))
    for axis in (0, 2, -1):
        y = random_hadamard_transform(x, axis=axis, signs=11)
        back = random_hadamard_transform(y, axis=axis, signs=11, inverse=True)
        np.testing.assert_allclose(back, x, rtol=1e-13, atol=1e-13)


def test_transformed_operands_keep_their_product_over_the_transformed_axis():
    rng = np.random.default_rng(2)
    a, g = rng.standard_normal((64, 7)), rng.standard_normal((64, 5))
    ta, tg = (random_hadamard_transform(v, axis=0) for v in (a, g))
    np.testing.assert_allclose(ta.T @ tg, a.T @ g, rtol=1e-12, atol=1e-12)


def test_transform_spreads_a_block_outlier_evenly():
    x = np.zeros(16)
    x[5] = 8.0
    np.testing.assert_allclose(np.abs(random_hadamard_transform(x)), np.full(16, 2.0))


def test_float32_input_stays_float32():
    assert random_hadamard_transform(np.ones(16, np.float32)).dtype == np.float32


@pytest.mark.parametrize("bad, match", [
    (dict(block=12), "power of two"),
    (dict(signs=(1, 2) * 8), "signs must be 16"),
    (dict(axis=3), "axis must be"),
])
def test_bad_arguments_are_refused_by_name(bad, match):
    with pytest.raises(ValueError, match=match):
        random_hadamard_transform(np.ones((2, 16)), **bad)
