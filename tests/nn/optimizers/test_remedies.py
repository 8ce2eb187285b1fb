"""nn.optimizers.remedies: stochastic rounding and Kahan-compensated updates for pure bf16
weights (Zamirai et al. 2020), checked against float64 arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
from resume import assert_resume_is_bit_identical

import fpsim
import nn
from nn.optimizers.remedies import COMPENSATION

BF16 = "bfloat16"


def _bf16_weight(value: float, n: int = 1) -> nn.Variable:
    return nn.Variable(np.full(n, value, np.float32), fmt=BF16, name="w")


def _steps(opt: nn.optimizers.Optimizer, w: nn.Variable, grad: float, steps: int) -> None:
    g = np.full(w.shape, grad, np.float32)
    for _ in range(steps):
        opt.apply_gradients([(g, w)])


# ---- Kahan ------------------------------------------------------------------------------------
def test_kahan_keeps_updates_that_a_plain_bf16_weight_loses_exactly():
    # 2^-12 is below half an ulp of bf16 just under 1 (2^-9): plain nearest-even loses every
    # update. The compensation's values are multiples of 2^-12, so here it is exact, and
    # w - c equals the float64 sum of the updates exactly.
    exact = 1.0 - 1000 * 2.0**-12  # float64: exact
    plain, comp = _bf16_weight(1.0, 3), _bf16_weight(1.0, 3)
    _steps(nn.optimizers.SGD(1.0), plain, 2.0**-12, 1000)
    opt = nn.optimizers.SGD(1.0, kahan=True)
    _steps(opt, comp, 2.0**-12, 1000)
    assert np.all(plain.data == 1.0)  # every update swamped
    c = opt.get_slot(comp, COMPENSATION)
    np.testing.assert_array_equal(comp.data.astype(np.float64) - c, exact)
    ulp = 2.0**-8  # bf16's spacing in [0.5, 1)
    assert np.all(np.abs(comp.data - exact) < ulp)
    assert np.all(fpsim.round(comp.data, BF16) == comp.data)  # the weight stays bf16
    assert np.all(fpsim.round(c, BF16) == c)  # and so does its compensation


def test_kahan_tracks_the_float64_sum_of_random_small_updates_far_better_than_plain():
    rng = np.random.default_rng(0)
    grads = (rng.uniform(0.5, 1.5, (500, 8)) * 1e-4).astype(np.float32)
    exact = 1.0 - grads.astype(np.float64).sum(axis=0)  # the float64 oracle (lr 1)
    plain, comp = _bf16_weight(1.0, 8), _bf16_weight(1.0, 8)
    p_opt, k_opt = nn.optimizers.SGD(1.0), nn.optimizers.SGD(1.0, kahan=True)
    for g in grads:
        p_opt.apply_gradients([(g, plain)])
        k_opt.apply_gradients([(g, comp)])
    plain_error = np.abs(plain.data - exact)
    kahan_error = np.abs(comp.data - k_opt.get_slot(comp, COMPENSATION) - exact)
    assert np.all(plain_error > 0.04)  # plain: all ~0.05 of updates lost
    assert np.all(kahan_error < 2.0**-12), kahan_error  # within the compensation's rounding


# ---- stochastic rounding ----------------------------------------------------------------------
def test_stochastic_update_is_unbiased_over_seeds():
    # one step 1 - 1e-4: nearest-even gives 1 (bias -1e-4); stochastic rounding goes down to
    # 1 - 2^-8 with probability p = 1e-4 / 2^-8, so its mean is the float64 value
    delta = float(np.float32(1e-4))
    exact = 1.0 - delta
    news = []
    for seed in range(40):
        w = _bf16_weight(1.0, 500)
        nn.optimizers.SGD(1.0, update_rounding="stochastic", seed=seed).apply_gradients(
            [(np.full(500, delta, np.float32), w)])
        assert set(np.unique(w.data)) <= {np.float32(1.0), np.float32(1 - 2.0**-8)}
        news.append(w.data.astype(np.float64))
    values = np.concatenate(news)
    p = delta / 2.0**-8
    sigma = 2.0**-8 * np.sqrt(p * (1 - p) / values.size)  # std of the mean of 20000 draws
    assert abs(values.mean() - exact) < 5 * sigma, (values.mean() - exact, sigma)
    assert 5 * sigma < delta / 4  # the test tells unbiased from nearest-even's bias of 1e-4


def test_stochastic_updates_drift_as_the_float64_sum_where_nearest_even_stays():
    w_sr, w_ne = _bf16_weight(1.0, 200), _bf16_weight(1.0, 200)
    _steps(nn.optimizers.SGD(1.0, update_rounding="stochastic", seed=3), w_sr, 1e-4, 1000)
    _steps(nn.optimizers.SGD(1.0), w_ne, 1e-4, 1000)
    exact = 1.0 - 1000 * float(np.float32(1e-4))
    assert np.all(w_ne.data == 1.0)
    assert abs(w_sr.data.astype(np.float64).mean() - exact) < 2e-3


def test_stochastic_updates_are_reproducible_per_seed():
    def run(seed):
        w = _bf16_weight(1.0, 64)
        _steps(nn.optimizers.SGD(1.0, update_rounding="stochastic", seed=seed), w, 1e-3, 20)
        return w.data.copy()

    np.testing.assert_array_equal(run(5), run(5))
    assert not np.array_equal(run(5), run(6))


def test_an_unseeded_stochastic_optimizer_is_reproducible_under_set_random_seed():
    nn.set_random_seed(11)
    a = nn.optimizers.SGD(1.0, update_rounding="stochastic").get_config()["seed"]
    nn.set_random_seed(11)
    b = nn.optimizers.SGD(1.0, update_rounding="stochastic").get_config()["seed"]
    assert a == b and isinstance(a, int)


def test_remedies_leave_a_float32_weight_exactly_as_plain_sgd():
    rng = np.random.default_rng(1)
    grads = rng.standard_normal((5, 6)).astype(np.float32)
    ws = [nn.Variable(np.ones(6, np.float32), fmt="float32") for _ in range(3)]
    opts = [nn.optimizers.SGD(0.1), nn.optimizers.SGD(0.1, kahan=True),
            nn.optimizers.SGD(0.1, update_rounding="stochastic", seed=0)]
    for g in grads:
        for opt, w in zip(opts, ws, strict=True):
            opt.apply_gradients([(g, w)])
    np.testing.assert_array_equal(ws[0].data, ws[1].data)
    np.testing.assert_array_equal(ws[0].data, ws[2].data)


# ---- configuration, checkpoints, errors -------------------------------------------------------
@pytest.mark.parametrize("cls", ["SGD", "RMSprop", "Adam"])
def test_every_optimizer_takes_the_remedies_and_its_config_rebuilds_them(cls):
    opt_cls = getattr(nn.optimizers, cls)
    for kw in ({"kahan": True}, {"update_rounding": "stochastic", "seed": 9}):
        opt = opt_cls(learning_rate=0.01, **kw)
        config = opt.get_config()
        assert all(config[k] == v for k, v in kw.items())
        assert opt_cls.from_config(config).get_config() == config
    assert "kahan" not in opt_cls().get_config()  # the defaults add nothing to the config


@pytest.mark.parametrize("optimizer", [
    lambda: nn.optimizers.SGD(0.05, kahan=True),
    lambda: nn.optimizers.SGD(0.05, momentum=0.9, update_rounding="stochastic", seed=4),
    lambda: nn.optimizers.Adam(1e-3, kahan=True),
])
def test_resuming_a_bf16_model_with_a_remedy_is_bit_identical(tmp_path, optimizer):
    (x, y), _ = nn.datasets.load_digits()
    x, y = x[:96], y[:96]

    def make():
        nn.set_random_seed(2)
        with nn.policy_scope(BF16):
            model = nn.Sequential([nn.Dense(16, activation="relu"), nn.Dense(10)])
        return model.compile(optimizer(),
                             nn.losses.SparseCategoricalCrossentropy(from_logits=True))

    resumed = assert_resume_is_bit_identical(make, x, y, tmp_path / "r.npz", batch_size=32,
                                             seed=1)
    assert resumed.inner_optimizer.get_config() == make().inner_optimizer.get_config()


@pytest.mark.parametrize("kwargs, error, match", [
    ({"update_rounding": "stochastic_rounding"}, ValueError,
     r"update_rounding must be one of \['nearest_even', 'stochastic'\], got "
     r"'stochastic_rounding'"),
    ({"kahan": "True"}, TypeError, r"kahan must be True or False, got 'True'"),
    ({"kahan": True, "update_rounding": "stochastic"}, ValueError, "choose one"),
    ({"seed": 3}, ValueError, r"seed=3 drives update_rounding='stochastic' only"),
    ({"update_rounding": "stochastic", "seed": -1}, ValueError, "seed"),
])
def test_bad_remedy_arguments_are_refused_naming_them(kwargs, error, match):
    with pytest.raises(error, match=match):
        nn.optimizers.SGD(0.1, **kwargs)
