"""Optimizers: Keras's formulas against closed forms in float64, state, both faces, swamping."""

from __future__ import annotations

import numpy as np
import pytest

import fpsim
from nn.engine.tensor import Tensor, Variable
from nn.optimizers import SGD, Adam, Optimizer, RMSprop, get


def make_var(values, fmt=fpsim.FP32, name="w"):
    return Variable(np.array(values, np.float64 if fmt is None else np.float32), fmt=fmt,
                    name=name)


def make_grad(values, fmt=fpsim.FP32):
    return Tensor(np.asarray(values, np.float32), fmt=fmt)


RNG = np.random.default_rng(1234)
W0 = RNG.normal(size=(3, 4)).astype(np.float32)
G1 = RNG.normal(size=(3, 4)).astype(np.float32)
G2 = RNG.normal(size=(3, 4)).astype(np.float32)


def run(opt, grads, w0=W0):
    """Apply ``grads`` one step each to a fresh fp32 variable; return the final weights."""
    w = make_var(w0)
    for g in grads:
        opt.apply_gradients([(g, w)])
    return w.data


def f64(*arrays):
    return [a.astype(np.float64) for a in arrays]


def close(actual, expected):
    """Equal up to a few float32 roundings of numbers of the weights' size (|w| < 4)."""
    np.testing.assert_allclose(actual, expected, rtol=2e-6, atol=4 * np.spacing(np.float32(4)))


# ---- closed forms, float64 oracles ----------------------------------------------------------

def test_sgd_step_is_w_minus_lr_g():
    w0, g1, g2 = f64(W0, G1, G2)
    close(run(SGD(0.1), [G1]), w0 - 0.1 * g1)
    close(run(SGD(0.1), [G1, G2]), w0 - 0.1 * g1 - 0.1 * g2)


def test_sgd_momentum_accumulates_velocity_over_two_steps():
    w0, g1, g2 = f64(W0, G1, G2)
    m1 = -0.1 * g1
    m2 = 0.9 * m1 - 0.1 * g2
    close(run(SGD(0.1, momentum=0.9), [G1]), w0 + m1)
    close(run(SGD(0.1, momentum=0.9), [G1, G2]), w0 + m1 + m2)


def test_sgd_nesterov_looks_ahead_over_two_steps():
    w0, g1, g2 = f64(W0, G1, G2)
    m1 = -0.1 * g1
    w1 = w0 + 0.9 * m1 - 0.1 * g1
    m2 = 0.9 * m1 - 0.1 * g2
    w2 = w1 + 0.9 * m2 - 0.1 * g2
    close(run(SGD(0.1, momentum=0.9, nesterov=True), [G1]), w1)
    close(run(SGD(0.1, momentum=0.9, nesterov=True), [G1, G2]), w2)


def test_rmsprop_divides_by_root_mean_square_over_two_steps():
    w0, g1, g2 = f64(W0, G1, G2)
    lr, rho, eps = 0.01, 0.8, 1e-7
    v1 = (1 - rho) * g1**2
    w1 = w0 - lr * g1 / np.sqrt(v1 + eps)
    v2 = rho * v1 + (1 - rho) * g2**2
    w2 = w1 - lr * g2 / np.sqrt(v2 + eps)
    close(run(RMSprop(lr, rho=rho), [G1]), w1)
    close(run(RMSprop(lr, rho=rho), [G1, G2]), w2)


def test_rmsprop_momentum_and_centered_over_two_steps():
    w0, g1, g2 = f64(W0, G1, G2)
    lr, rho, mom, eps = 0.01, 0.9, 0.5, 1e-7
    v1, a1 = (1 - rho) * g1**2, (1 - rho) * g1
    m1 = lr * g1 / np.sqrt(v1 - a1**2 + eps)
    v2, a2 = rho * v1 + (1 - rho) * g2**2, rho * a1 + (1 - rho) * g2
    m2 = mom * m1 + lr * g2 / np.sqrt(v2 - a2**2 + eps)
    opt = RMSprop(lr, rho=rho, momentum=mom, centered=True)
    np.testing.assert_allclose(run(opt, [G1, G2]), w0 - m1 - m2, rtol=1e-5, atol=1e-6)


def test_adam_matches_bias_corrected_closed_form_over_two_steps():
    w0, g1, g2 = f64(W0, G1, G2)
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-7
    m1, v1 = (1 - b1) * g1, (1 - b2) * g1**2
    w1 = w0 - lr * (m1 / (1 - b1)) / (np.sqrt(v1 / (1 - b2)) + eps)
    m2, v2 = b1 * m1 + (1 - b1) * g2, b2 * v1 + (1 - b2) * g2**2
    w2 = w1 - lr * (m2 / (1 - b1**2)) / (np.sqrt(v2 / (1 - b2**2)) + eps)
    close(run(Adam(lr), [G1]), w1)
    close(run(Adam(lr), [G1, G2]), w2)


def test_adam_first_step_moves_every_weight_by_about_lr():
    step = W0 - run(Adam(0.01), [G1])
    np.testing.assert_allclose(np.abs(step), 0.01, rtol=1e-4)
    assert np.all(np.sign(step) == np.sign(G1))


def test_float64_variables_are_updated_in_float64():
    w = make_var(W0, fmt=None)
    SGD(0.1).apply_gradients([(G1.astype(np.float64), w)])
    assert w.data.dtype == np.float64
    np.testing.assert_array_equal(w.data, W0.astype(np.float64) - 0.1 * G1.astype(np.float64))


# ---- the Keras face -------------------------------------------------------------------------

@pytest.mark.parametrize("opt, expected", [
    (SGD(), {"learning_rate": 0.01, "momentum": 0.0, "nesterov": False}),
    (RMSprop(), {"learning_rate": 0.001, "rho": 0.9, "momentum": 0.0, "epsilon": 1e-7,
                 "centered": False}),
    (Adam(), {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7}),
])
def test_defaults_are_keras_defaults_and_config_round_trips(opt, expected):
    config = opt.get_config()
    assert {k: config[k] for k in expected} == expected
    assert type(opt).from_config(config).get_config() == config


def test_iterations_count_apply_gradients_calls():
    opt, w = Adam(), make_var(W0)
    assert opt.iterations == 0
    for i in range(3):
        assert opt.apply_gradients([(G1, w)]) == i + 1
    assert opt.iterations == 3


def test_gradients_may_be_tensors_or_arrays_and_none_skips_its_variable():
    a, b, c = make_var(W0, name="a"), make_var(W0, name="b"), make_var(W0, name="c")
    SGD(0.5).apply_gradients([(make_grad(G1), a), (G1, b), (None, c)])
    np.testing.assert_array_equal(a.data, b.data)
    np.testing.assert_array_equal(c.data, W0)
    assert not np.array_equal(a.data, W0)


def test_all_gradients_none_raises_naming_the_variables():
    with pytest.raises(ValueError, match="no gradients.*kernel"):
        SGD().apply_gradients([(None, make_var(W0, name="kernel"))])


def test_shape_mismatch_raises_naming_variable_and_both_shapes_and_changes_nothing():
    a, b = make_var(W0, name="a"), make_var(W0, name="bias")
    with pytest.raises(ValueError, match=r"bias.*\(4,\).*\(3, 4\)"):
        SGD().apply_gradients([(G1, a), (np.ones(4, np.float32), b)])
    np.testing.assert_array_equal(a.data, W0)


def test_apply_gradients_rejects_non_pairs():
    with pytest.raises(TypeError, match="pairs"):
        SGD().apply_gradients([G1])


@pytest.mark.parametrize("make", [
    lambda: SGD(-1.0), lambda: SGD(momentum=1.5), lambda: SGD(float("nan")),
    lambda: RMSprop(rho=1.0), lambda: RMSprop(epsilon=-1), lambda: Adam(beta_1=1.0),
    lambda: Adam(beta_2=-0.1), lambda: SGD("0.1"),
])
def test_invalid_hyperparameters_raise_naming_the_allowed_range(make):
    with pytest.raises(ValueError, match="must be a finite number in"):
        make()


def test_get_by_name_and_unknown_name_lists_known_ones():
    assert isinstance(get("Adam"), Adam) and isinstance(get("sgd"), SGD)
    opt = RMSprop()
    assert get(opt) is opt
    with pytest.raises(ValueError, match="known: .*adam.*rmsprop.*sgd"):
        get("adagrad")


# ---- slots and state ------------------------------------------------------------------------

def test_slots_are_fp32_even_for_fp16_variables():
    w = make_var(np.float16(W0), fmt=fpsim.FP16)
    opt = Adam()
    opt.apply_gradients([(G1, w)])
    for slot in ("momentum", "velocity"):
        s = opt.get_slot(w, slot)
        assert s.dtype == np.float32
        assert not np.array_equal(s, s.astype(np.float16).astype(np.float32))


def test_state_dict_round_trip_continues_bit_identically():
    original, w = Adam(0.01), make_var(W0)
    original.apply_gradients([(G1, w)])
    state = original.state_dict()
    w_copy = make_var(w.data.copy())
    restored = Adam(0.01)
    restored.load_state_dict(state, variables=[w_copy])
    assert restored.iterations == 1
    original.apply_gradients([(G2, w)])
    restored.apply_gradients([(G2, w_copy)])
    assert w.data.tobytes() == w_copy.data.tobytes()
    assert original.get_slot(w, "velocity").tobytes() == \
        restored.get_slot(w_copy, "velocity").tobytes()


def test_state_dict_holds_copies():
    opt, w = SGD(0.1, momentum=0.9), make_var(W0)
    opt.apply_gradients([(G1, w)])
    state = opt.state_dict()
    state["slots"][0]["momentum"][...] = 7
    assert not np.any(opt.get_slot(w, "momentum") == 7)


def test_load_state_dict_rejects_a_mismatch_and_changes_nothing():
    opt, w = Adam(), make_var(W0)
    opt.apply_gradients([(G1, w)])
    before = opt.state_dict()
    bad = opt.state_dict()
    bad["iterations"] = 99
    bad["slots"][0]["velocity"] = np.zeros((2, 2), np.float32)
    with pytest.raises(ValueError, match=r"velocity.*\(2, 2\).*\(3, 4\)"):
        opt.load_state_dict(bad)
    assert opt.iterations == before["iterations"]
    with pytest.raises(ValueError, match="2 variables"):
        opt.load_state_dict({"iterations": 0, "slots": [{}, {}]})
    with pytest.raises(ValueError, match="not an optimizer state"):
        opt.load_state_dict({"slots": []})


# ---- the PyTorch face ---------------------------------------------------------------------

def test_step_applies_each_params_grad_and_zero_grad_clears_them():
    a, b = make_var(W0, name="a"), make_var(W0, name="b")
    opt = SGD(0.1, params=[a, b])
    a.grad, b.grad = make_grad(G1), None
    opt.step()
    close(a.data, W0.astype(np.float64) - 0.1 * G1.astype(np.float64))
    np.testing.assert_array_equal(b.data, W0)
    assert opt.iterations == 1
    opt.zero_grad()
    assert a.grad is None or not np.any(a.grad.data)


def test_step_with_no_grads_is_a_no_op():
    a = make_var(W0)
    a.grad = None
    opt = Adam(params=[a])
    opt.step()
    assert opt.iterations == 0
    np.testing.assert_array_equal(a.data, W0)


def test_step_without_params_raises_pointing_to_apply_gradients():
    with pytest.raises(RuntimeError, match="params=.*apply_gradients"):
        SGD().step()
    with pytest.raises(ValueError, match="empty"):
        SGD(params=[])


# ---- formats: rounding and swamping ---------------------------------------------------------

def test_fp16_variable_update_is_computed_in_fp32_and_rounded_once_to_fp16():
    w0 = W0.astype(np.float16).astype(np.float32)
    w = make_var(w0, fmt=fpsim.FP16)
    SGD(0.01).apply_gradients([(G1, w)])
    expected = (w0 - np.float32(0.01) * G1).astype(np.float16)  # numpy's nearest-even
    np.testing.assert_array_equal(w.data, expected.astype(np.float32))


def test_fp16_update_below_half_an_ulp_is_swamped_and_counted():
    w = make_var(np.full(5, 2048.0), fmt=fpsim.FP16, name="kernel")  # fp16 ulp at 2048 is 2
    opt = SGD(0.5)
    opt.apply_gradients([(np.ones(5, np.float32), w)])  # 2048 - 0.5 rounds back to 2048
    np.testing.assert_array_equal(w.data, 2048.0)
    assert opt.swamped_updates == 5 and opt.swamped_counts == {"kernel": 5}


def test_the_same_update_on_an_fp32_master_weight_is_not_lost():
    w = make_var(np.full(5, 2048.0))
    opt = SGD(0.5)
    opt.apply_gradients([(np.ones(5, np.float32), w)])
    np.testing.assert_array_equal(w.data, 2047.5)
    assert opt.swamped_updates == 0


def test_bf16_keeps_8_bits_so_a_relative_update_of_1e_3_is_lost():
    w = make_var(np.ones(4), fmt=fpsim.BF16)  # bf16 ulp at 1 is 2**-7
    opt = SGD(1e-3)
    opt.apply_gradients([(np.array([1, 1, 0, 8], np.float32), w)])
    np.testing.assert_array_equal(w.data, [1, 1, 1, 1 - 2**-7])
    assert opt.swamped_updates == 2  # the zero gradient is no lost update


def test_optimizer_base_class_has_no_update_rule():
    with pytest.raises(NotImplementedError):
        Optimizer(0.1).apply_gradients([(G1, make_var(W0))])


def test_state_saved_before_the_first_step_loads_into_a_built_optimizer():
    w = Variable(np.ones(3, np.float32), name="w")
    fresh_state = Adam(0.1).state_dict()
    opt = Adam(0.1)
    opt.apply_gradients([(np.full(3, 0.5, np.float32), w)])
    opt.load_state_dict(fresh_state, variables=[w])
    assert opt.iterations == 0
    assert all(np.all(arr == 0) for arr in opt.state_dict()["slots"][0].values())
