"""Laws of precision in training: bf16's range, fp32 master weights, stochastic rounding."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import fpsim
from fpsim import BF16, FP16, FP32
from fpsim.testing import gradient_arrays, values_of
from nn.engine.tensor import Variable
from nn.optimizers import SGD

from ._law import broke

FP16_UNDERFLOW = 2.0**-25  # half of fp16's smallest subnormal: |g| <= this rounds to 0
BF16_SMALLEST_SUBNORMAL_EXP = -133  # bf16's smallest subnormal, 2**-133


# --- bf16 needs no scaling where fp16 does -------------------------------------------------------
@given(gradient_arrays(-149, 127, max_size=64))
def test_bf16_underflows_no_more_gradients_than_fp16(g):
    """Every non-zero float32 gradient that bf16 flushes to 0, fp16 flushes too; so the share
    underflowed in bf16 is never larger than in fp16."""
    b, h = fpsim.round(g, BF16), fpsim.round(g, FP16)
    lost_b, lost_h = (g != 0) & (b == 0), (g != 0) & (h == 0)
    only_bf16 = lost_b & ~lost_h
    assert not only_bf16.any() and lost_b.mean() <= lost_h.mean(), broke(
        "bf16 underflows no more gradients than fp16", gradients=g,
        lost_in_bf16_only=g[only_bf16], share_bf16=lost_b.mean(), share_fp16=lost_h.mean())


@given(gradient_arrays(BF16_SMALLEST_SUBNORMAL_EXP, 127, max_size=64))
def test_bf16_underflows_nothing_above_its_smallest_subnormal_while_fp16_loses_all_below_2_to_minus_25(g):  # noqa: E501
    """Gradients of magnitude >= 2**-133 never become 0 in bf16 (fp32's exponent range), while
    fp16 flushes exactly those with |g| <= 2**-25 (half its smallest subnormal)."""
    b, h = fpsim.round(g, BF16), fpsim.round(g, FP16)
    lost_b = (g != 0) & (b == 0)
    lost_h = (g != 0) & (h == 0)
    predicted_h = (g != 0) & (np.abs(g.astype(np.float64)) <= FP16_UNDERFLOW)
    assert not lost_b.any(), broke("bf16 underflows nothing above its smallest subnormal",
                                   gradients=g, lost=g[lost_b])
    assert np.array_equal(lost_h, predicted_h), broke(
        "fp16 underflows exactly the gradients with |g| <= 2**-25", gradients=g,
        lost=g[lost_h], predicted=g[predicted_h])


# --- master weights matter -----------------------------------------------------------------------
@st.composite
def _weight_and_small_update(draw: st.DrawFn) -> tuple[float, float, int]:
    """(w, u, n): an fp16 normal w = ±M * 2**(e-10), an update u = j * 2**(e-23) with
    0 < |j| < 2**10 (so |u| < half the fp16 gap on either side of w, and w + k*u is exact in
    float32 for |k*j| < 2**13), and a number of steps n."""
    e = draw(st.integers(-14, 15), label="exponent")
    m = draw(st.integers(1024, 2047), label="significand")
    w = draw(st.sampled_from([1.0, -1.0])) * m * 2.0 ** (e - 10)
    j = draw(st.integers(-(2**10) + 1, 2**10 - 1).filter(bool), label="j")
    n = draw(st.integers(1, 60), label="steps")
    assume(abs(n * j) < 2**13)
    return w, j * 2.0 ** (e - 23), n


@given(_weight_and_small_update())
def test_fp16_weights_lose_updates_below_half_an_ulp_that_fp32_master_weights_keep(wun):
    """SGD with w -= lr * g and lr * g = -u: a float16 weight never moves (each update is
    below half its spacing, so it rounds back to w: n updates lost, counted as swamped), while
    the fp32 master weight after n steps is w + n*u exactly, and the fp16 copy a
    mixed-precision forward pass reads is round_fp16(w + n*u)."""
    w, u, n = wun
    pure, master = (Variable(np.float32([w]), fmt=f, name="w") for f in (FP16, FP32))
    opt16, opt32 = SGD(1.0), SGD(1.0)
    grad = np.float32([-u])
    for _ in range(n):
        opt16.apply_gradients([(grad, pure)])
        opt32.apply_gradients([(grad, master)])
    got16, got32 = float(pure.data[0]), float(master.data[0])
    exact = Fraction(w) + n * Fraction(u)
    assert got16 == w and opt16.swamped_updates == n, broke(
        "a pure float16 weight loses every update below half an ulp", w=w, u=u, steps=n,
        fp16_weight=got16, swamped=opt16.swamped_updates)
    assert Fraction(got32) == exact, broke(
        "the fp32 master weight keeps every update: drift n*u", w=w, u=u, steps=n,
        master=got32, predicted=float(exact))
    view = float(fpsim.round(np.float64(float(exact)), FP16))
    assert float(fpsim.round(master.data, FP16)[0]) == view


# --- stochastic rounding is unbiased --------------------------------------------------------------
SR_FORMATS = st.sampled_from([FP16, BF16, fpsim.E4M3FN, fpsim.E5M2])


def _bernstein(p: float, n: int, delta: float = 1e-9) -> float:
    """Bernstein's bound on |k/n - p| for k ~ Binomial(n, p), violated with probability
    below ``delta``."""
    ell = math.log(2 / delta)
    return math.sqrt(2 * p * (1 - p) * ell / n) + 2 * ell / (3 * n)


@given(SR_FORMATS.flatmap(lambda f: st.tuples(st.just(f), values_of(f))),
       st.floats(0.0, 1.0, exclude_min=True, exclude_max=True), st.integers(0, 2**32 - 1))
def test_mean_of_stochastic_roundings_converges_to_x_within_the_binomial_bound(fv, frac, seed):
    """For x between neighbours lo < hi of the format, n stochastic roundings average to x
    within (hi - lo) times Bernstein's bound on a Binomial(n, p) share, p = (x - lo)/(hi - lo)."""
    fmt, lo = fv
    assume(abs(lo) < fmt.max)
    hi = float(fpsim.next_up(np.float64(lo), fmt))
    x = lo + frac * (hi - lo)
    assume(lo < x < hi)
    p = float((Fraction(x) - Fraction(lo)) / (Fraction(hi) - Fraction(lo)))
    n = 4000
    got = fpsim.round(np.full(n, x), fmt, "stochastic", rng=seed)
    mean = float(np.mean(got, dtype=np.float64))
    bound = (hi - lo) * _bernstein(p, n)
    assert set(np.unique(got).tolist()) <= {lo, hi} and abs(mean - x) <= bound, broke(
        "the mean of stochastic roundings converges to x", format=fmt, x=x, lo=lo, hi=hi,
        samples=n, seed=seed, mean=mean, error=mean - x, bound=bound)


@pytest.mark.parametrize(("fmt", "k"), [(FP16, 27), (FP16, 30), (fpsim.E5M2, 20),
                                        (fpsim.E4M3FN, 13)])
def test_stochastic_rounding_below_a_quarter_of_the_smallest_subnormal_is_unbiased(fmt, k):
    """x = 2**-k between 0 and the smallest subnormal q rounds up to q with probability x / q
    (e.g. fp16: 2**-27 -> 1/8). Found by this law: the kernel once gave 1/4 for every x below
    q / 4, having capped the denominator 2^s of P(up)."""
    x, q, n = 2.0**-k, fmt.smallest_subnormal, 100_000
    p = x / q
    got = fpsim.round(np.full(n, x, np.float32), fmt, "stochastic", rng=3)
    share = float(np.mean(got == q))
    assert abs(share - p) <= _bernstein(p, n), broke(
        "stochastic rounding below the smallest subnormal is unbiased", format=fmt, x=x,
        smallest_subnormal=q, p_expected=p, p_observed=share)


@given(st.integers(-6, 5), st.integers(1024, 2047), st.floats(0.1, 0.45), st.integers(300, 1000),
       st.integers(0, 2**32 - 1))
def test_stochastic_rounding_sum_tracks_the_exact_sum_where_nearest_stagnates(e, m, f, n, seed):
    """Adding n increments d < ulp(a)/2 to a in fp16: nearest-even never moves (error n*d),
    while with stochastic rounding the mean over independent runs stays within six standard
    deviations (each step adds noise of variance <= gap**2/4) of the exact sum a + n*d."""
    a = m * 2.0 ** (e - 10)
    gap = float(fpsim.ulp(np.float64(a), FP16))
    d = f * gap
    runs = 256
    rng = np.random.default_rng(seed)
    nearest = np.float32(a)
    stochastic = np.full(runs, a)
    for _ in range(n):
        nearest = fpsim.round(np.float64(nearest) + d, FP16)
        stochastic = fpsim.round(stochastic + d, FP16, "stochastic", rng=rng)
    exact = a + n * d
    gap_max = float(fpsim.ulp(np.float64(2 * exact), FP16)) / 2  # spacing at exact, or above
    bound = 6 * math.sqrt(n / (4 * runs)) * gap_max
    err_sr = float(np.mean(stochastic)) - exact
    assert float(nearest) == a, broke("nearest rounding stagnates", a=a, increment=d, steps=n,
                                      result=float(nearest))
    assert abs(err_sr) <= bound < n * d, broke(
        "a stochastic-rounding sum tracks the exact sum", a=a, increment=d, steps=n, seed=seed,
        exact=exact, stochastic_mean=float(np.mean(stochastic)), error=err_sr, bound=bound,
        nearest_error=n * d)
