"""Accumulation models: fpsim.sum / dot / matmul and the array methods.

Oracles: exact rationals (fractions) rounded by the specification's own steps (fpsim.rounding),
integer arithmetic, numpy float64 matmul, numpy / ml_dtypes casts.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import partial

import ml_dtypes
import numpy as np
import pytest
from helpers import all_same
from hypothesis import given
from hypothesis import strategies as st
from strategies import representable_arrays

import fpsim
from fpsim.accumulate import gamma

same = partial(all_same, signed_zeros=False)  # (these sums compare as values: 0.0 == -0.0)


def round_exact(v: Fraction, fmt: fpsim.Format) -> Fraction | float:
    """The rational v rounded to nearest-even in an IEEE-style fmt with subnormals.

    The grid spacing at |v| is 2^q, q = max(floor(log2|v|), emin) - M; |v| / 2^q = k + f picks
    k + 1 when f > 1/2 or f == 1/2 and k is odd.
    """
    if v == 0:
        return Fraction(0)
    negative = v < 0
    a = abs(v)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    e = e if Fraction(2) ** e <= a else e - 1
    q = max(e, fmt.emin) - fmt.mantissa_bits
    scaled = a / Fraction(2) ** q
    k = math.floor(scaled)
    f = scaled - k
    if f > Fraction(1, 2) or (f == Fraction(1, 2) and k % 2 == 1):
        k += 1
    mag = k * Fraction(2) ** q
    if mag > fmt.max_exact:
        return -math.inf if negative else math.inf  # formats with inf only, in these tests
    return -mag if negative else mag


def add_round(x: Fraction | float, y: Fraction | float, acc: fpsim.Format) -> Fraction | float:
    """round(x + y) exactly; once a partial sum is inf or NaN, IEEE float arithmetic takes over."""
    if isinstance(x, float) or isinstance(y, float):
        return float(x) + float(y)
    return round_exact(x + y, acc)


def sequential_oracle(terms: list[Fraction], acc: fpsim.Format) -> Fraction | float:
    s = round_exact(terms[0], acc)
    for t in terms[1:]:
        s = add_round(s, t, acc)
    return s


def pairwise_oracle(terms: list[Fraction], acc: fpsim.Format) -> Fraction | float:
    level = [round_exact(t, acc) for t in terms]
    while len(level) > 1:
        nxt = [add_round(level[i], level[i + 1], acc) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


@pytest.mark.parametrize("n", [1, 100, 2047, 2048, 2049, 2050, 5000])
def test_summing_ones_with_fp16_accumulation_stops_at_2048(n: int):
    ones = fpsim.array(np.ones(n), "fp16")
    assert float(fpsim.sum(ones, accumulate="fp16")) == min(n, 2048)
    assert float(ones.sum(accumulate=None)) == min(n, 2048)  # None: the array's own format


@pytest.mark.parametrize("n", [3000, 100_000])
def test_summing_ones_with_fp32_accumulation_gives_n(n: int):
    ones = fpsim.array(np.ones(n), "fp16")
    assert float(fpsim.sum(ones, fmt="fp32")) == n
    # one final rounding to fp16: 3000 is a value of fp16 (spacing 2 there); 100000 overflows
    assert float(ones.sum()) == (n if n < 65504 else math.inf)


def test_pairwise_order_is_more_accurate_than_sequential_on_ones():
    n = 5000  # sequential fp16 accumulation stagnates at 2048; every pairwise node sum is exact
    ones = fpsim.array(np.ones(n), "fp16")
    seq = float(fpsim.sum(ones, accumulate="fp16", order="sequential"))
    pw = float(fpsim.sum(ones, accumulate="fp16", order="pairwise"))
    assert abs(pw - n) < abs(seq - n)
    assert pw == n


def test_stochastic_accumulation_does_not_stagnate():
    n = 10_000
    x = fpsim.array(np.full(n, 0.1), "fp16")
    exact = n * float(x[0])
    nearest = float(fpsim.sum(x, accumulate="fp16"))
    sr = float(fpsim.sum(x, accumulate="fp16", mode="stochastic", rng=1))
    assert nearest == 256.0  # from 256 on, half an ulp (0.125) exceeds 0.1: every add is lost
    assert abs(sr - exact) < 150  # ~6 standard deviations of the random walk (<= 25)


@pytest.mark.parametrize("acc", [fpsim.FP16, fpsim.BF16, fpsim.E5M2], ids=lambda f: f.name)
@pytest.mark.parametrize("order", ["sequential", "pairwise"])
@given(data=st.data())
def test_sum_equals_the_exact_rational_oracle(acc: fpsim.Format, order: str, data):
    x = data.draw(representable_arrays(fpsim.FP16, max_size=30))
    got = fpsim.sum(fpsim.array(x, "fp16"), accumulate=acc, order=order, fmt="fp32")
    terms = [Fraction(float(v)) for v in x]
    oracle = sequential_oracle if order == "sequential" else pairwise_oracle
    assert same(float(got), float(oracle(terms, acc)))


@pytest.mark.parametrize("acc", [fpsim.FP32, fpsim.FP16, fpsim.BF16], ids=lambda f: f.name)
@pytest.mark.parametrize("order", ["sequential", "pairwise"])
@given(data=st.data())
def test_dot_has_exact_products_and_a_rounded_accumulator(acc, order: str, data):
    x = data.draw(representable_arrays(fpsim.BF16, max_size=12))
    y = data.draw(representable_arrays(fpsim.BF16, max_size=12))
    n = min(x.size, y.size)
    x, y = x[:n], y[:n]
    got = fpsim.dot(fpsim.array(x, "bf16"), fpsim.array(y, "bf16"), accumulate=acc,
                    order=order, fmt="fp32")
    terms = [Fraction(float(a)) * Fraction(float(b)) for a, b in zip(x, y, strict=True)]
    oracle = sequential_oracle if order == "sequential" else pairwise_oracle
    expected = oracle(terms, acc)
    assert same(float(got), float(expected))  # every acc value is a value of fp32


def test_sequential_matmul_equals_the_oracle_element_by_element():
    rng = np.random.default_rng(3)
    a = fpsim.array(rng.standard_normal((4, 9)) * 8, "fp16")
    b = fpsim.array(rng.standard_normal((9, 5)) * 8, "fp16")
    got = fpsim.matmul(a, b, accumulate="fp16", order="sequential")
    A = [[Fraction(float(v)) for v in row] for row in a.numpy()]
    B = [[Fraction(float(v)) for v in row] for row in b.numpy()]
    for i in range(4):
        for j in range(5):
            s = sequential_oracle([A[i][k] * B[k][j] for k in range(9)], fpsim.FP16)
            assert float(got[i, j]) == float(s)


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "e4m3fn"])
def test_fp32_accumulation_matmul_is_within_the_bound_of_the_exact_product(fmt: str):
    """|C32 - R| <= gamma(k) |A||B| (+ R's own float64 error); C = rnd(C32) brackets rnd(R)."""
    rng = np.random.default_rng(11)
    m, k, n = 48, 300, 40
    a = fpsim.array(rng.standard_normal((m, k)), fmt)
    b = fpsim.array(rng.standard_normal((k, n)), fmt)
    A, B = a.numpy().astype(np.float64), b.numpy().astype(np.float64)
    R = A @ B
    bound = (gamma(k) + gamma(k, 2.0**-53)) * (np.abs(A) @ np.abs(B))
    c32 = fpsim.matmul(a, b, fmt="fp32").numpy().astype(np.float64)
    assert np.all(np.abs(c32 - R) <= bound)
    c = fpsim.matmul(a, b).numpy()
    ref = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "e4m3fn": ml_dtypes.float8_e4m3fn}
    cast = ref[fmt]
    assert np.array_equal(c, c32.astype(np.float32).astype(cast).astype(np.float32))
    lo = (R - bound).astype(cast).astype(np.float64)  # float64 -> format casts round once
    hi = (R + bound).astype(cast).astype(np.float64)
    assert np.all((lo <= c) & (c <= hi))
    assert np.array_equal((a @ b).numpy(), c)


def test_blas_order_equals_sequential_where_every_partial_sum_is_exact():
    rng = np.random.default_rng(5)
    a = fpsim.array(rng.integers(-8, 9, (20, 30)), "fp16")
    b = fpsim.array(rng.integers(-8, 9, (30, 10)), "fp16")
    exact = a.numpy().astype(np.int64) @ b.numpy().astype(np.int64)
    for order in ["auto", "blas", "sequential", "pairwise"]:
        assert np.array_equal(fpsim.matmul(a, b, order=order).numpy(), exact)


def test_blas_order_is_refused_where_products_are_not_exact_in_float32():
    a = fpsim.array(np.full((2, 3), 2.0**-70), "bf16")  # products 2^-140: below float32 normals
    with pytest.raises(ValueError, match="sequential"):
        fpsim.matmul(a, a.T, order="blas")
    auto = fpsim.matmul(a, a.T, order="auto", fmt="fp32")
    seq = fpsim.matmul(a, a.T, order="sequential", fmt="fp32")
    assert np.array_equal(auto.numpy(), seq.numpy())
    assert float(auto[0, 0]) == float(round_exact(3 * Fraction(2) ** -140, fpsim.FP32))


def test_matmul_follows_numpy_shapes():
    rng = np.random.default_rng(0)
    a = fpsim.array(rng.integers(-4, 5, (2, 3, 4)), "bf16")
    b = fpsim.array(rng.integers(-4, 5, (4, 5)), "bf16")
    v = fpsim.array(rng.integers(-4, 5, 4), "bf16")
    A, B, V = a.numpy(), b.numpy(), v.numpy()
    assert np.array_equal(fpsim.matmul(a, b).numpy(), A @ B)
    assert np.array_equal((a @ v).numpy(), A @ V)
    assert np.array_equal((v @ b).numpy(), V @ B)
    assert (v @ v).shape == () and float(v @ v) == float(V @ V)
    assert np.array_equal(fpsim.dot(b.T, v).numpy(), B.T @ V)
    with pytest.raises(ValueError, match="not aligned"):
        fpsim.matmul(a, a)
    with pytest.raises(ValueError, match="1-D or 2-D"):
        fpsim.dot(a, b)


def test_sum_over_axes_follows_numpy():
    rng = np.random.default_rng(1)
    x = rng.integers(-100, 100, (3, 4, 5)).astype(np.float64)
    a = fpsim.array(x, "fp16")
    for axis in [None, 0, 1, -1, (0, 2)]:
        for keepdims in [False, True]:
            got = fpsim.sum(a, axis, keepdims=keepdims)
            expected = x.sum(axis=axis, keepdims=keepdims)  # small integers: exact everywhere
            assert got.shape == np.shape(expected)
            assert np.array_equal(got.numpy(), expected)
    assert float(np.sum(a)) == x.sum()
    assert float(a.mean()) == float(np.float16(x.mean()))


def test_plain_data_is_rounded_to_the_accumulate_format():
    got = fpsim.sum([0.1] * 10, accumulate="fp16")
    assert got.format is fpsim.FP16
    assert float(got) == float(sequential_oracle([Fraction(float(np.float16(0.1)))] * 10,
                                                 fpsim.FP16))
    with pytest.raises(ValueError, match="order"):
        fpsim.sum([1.0], order="random")
