"""The rng-bits experiment's weight update: the new bf16 weight is ``round(w - delta)``,
checked against ml_dtypes' bf16 (nearest) and the r-bit law P(up) = floor(f 2^r) / 2^r."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from nn.experiments.rng_bits import BITS, FULL, NEAREST, _RoundedUpdates


class _Fixed:
    """An optimizer stand-in whose update is a fixed delta."""

    def __init__(self, delta: np.ndarray) -> None:
        self.delta = delta

    def _update(self, g, w, slots, t):
        return self.delta


def _step(w, delta, rng_bits=None, stochastic=False, seed=0):
    opt = _Fixed(delta)
    hook = _RoundedUpdates(opt, rng_bits, stochastic, seed)
    step = opt._update(None, w, None, 1)
    return (w - step).astype(np.float64), hook


def test_nearest_lands_on_the_bf16_nearest_of_the_exact_difference():
    rng = np.random.default_rng(0)
    w = rng.standard_normal(1000).astype(ml_dtypes.bfloat16).astype(np.float32)
    delta = (rng.standard_normal(1000) * 1e-3).astype(np.float32)
    new, hook = _step(w, delta)
    exact = w.astype(np.float64) - delta.astype(np.float64)
    np.testing.assert_array_equal(new, exact.astype(ml_dtypes.bfloat16).astype(np.float64))
    assert hook.inexact == 0
    assert hook.lost == int(np.count_nonzero(new == w))


def test_three_random_bits_always_lose_an_update_of_a_sixteenth_ulp_full_bits_do_not():
    w = np.ones(4000, np.float32)  # bf16's ulp above 1 is 2^-7
    delta = np.full(4000, -(2.0**-7) / 16, np.float32)  # up 1/16 ulp: floor(8 / 16) = 0
    new3, hook3 = _step(w, delta, rng_bits=3, stochastic=True)
    assert np.all(new3 == 1.0) and hook3.lost == 4000
    new_full, _ = _step(w, delta, rng_bits=None, stochastic=True)
    share = np.mean(new_full > 1.0)
    assert abs(share - 1 / 16) < 4 * np.sqrt(1 / 16 * 15 / 16 / 4000)


def test_eight_random_bits_take_an_update_with_probability_floor_f_times_256_over_256():
    w = np.ones(20000, np.float32)
    f = 0.3  # of the ulp above 1: P(up) = floor(0.3 * 256) / 256 = 76 / 256
    delta = np.full(20000, -(2.0**-7) * f, np.float32)
    new, _ = _step(w, delta, rng_bits=8, stochastic=True, seed=3)
    p = 76 / 256
    assert abs(np.mean(new > 1.0) - p) < 4 * np.sqrt(p * (1 - p) / 20000)


def test_the_runs_are_nearest_and_three_eight_and_full_bits():
    assert [NEAREST, *BITS] == ["bf16 weights, nearest", "bf16 weights, SR 3 bits",
                                "bf16 weights, SR 8 bits", FULL]
    assert BITS == {"bf16 weights, SR 3 bits": 3, "bf16 weights, SR 8 bits": 8, FULL: None}
