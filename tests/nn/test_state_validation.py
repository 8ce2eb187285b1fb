"""Every setter and state loader refuses invalid state with an error naming the argument the
user wrote, the value and what is allowed; fit refuses non-finite data unless told otherwise."""

from __future__ import annotations

import math

import numpy as np
import pytest

import nn

CE = nn.losses.SparseCategoricalCrossentropy


# --- loss scales --------------------------------------------------------------------------
@pytest.mark.parametrize("value,allowed", [
    (0.5, r"\[min_scale, max_scale\] = \[1.0, None\]"), (0.0, "positive"), (-2.0, "positive"),
    (math.inf, "finite"), (math.nan, "finite"), (1e39, "finite"),
])
def test_dynamic_loss_scale_set_scale_refuses_values_outside_its_range(value, allowed):
    state = nn.DynamicLossScale(8.0, 10, 2.0, 0.5, min_scale=1.0)
    with pytest.raises(ValueError, match=f"scale.*{allowed}|scale.*{value}"):
        state.set_scale(value)
    assert state.scale == 8.0


def test_dynamic_loss_scale_set_scale_above_max_scale_is_refused():
    state = nn.DynamicLossScale(8.0, 10, 2.0, 0.5, max_scale=64.0)
    with pytest.raises(ValueError, match=r"\[None, 64.0\], got 128"):
        state.set_scale(128)


def test_loss_scale_optimizer_load_state_dict_refuses_negative_skipped_steps():
    opt = nn.LossScaleOptimizer(nn.SGD(0.1))
    state = opt.state_dict() | {"skipped_steps": -7}
    with pytest.raises(ValueError, match="skipped_steps must be an integer >= 0, got -7"):
        opt.load_state_dict(state)
    assert opt.skipped_steps == 0


def test_loss_scale_optimizer_load_state_dict_refuses_a_scale_below_its_floor_of_one():
    opt = nn.LossScaleOptimizer(nn.SGD(0.1))
    with pytest.raises(ValueError, match="min_scale"):
        opt.load_state_dict(opt.state_dict() | {"loss_scale": 0.25})
    assert opt.loss_scale == 2.0**15


@pytest.mark.parametrize("key,value", [
    ("_growth_tracker", -1), ("_growth_tracker", 2.5), ("scale", -1.0), ("scale", math.inf),
    ("growth_interval", 0), ("growth_factor", 0.5), ("backoff_factor", 1.5),
])
def test_grad_scaler_load_state_dict_refuses_a_bad_field_naming_it(key, value):
    scaler = nn.GradScaler()
    before = scaler.state_dict()
    with pytest.raises(ValueError, match=f"{key}.*{value}"):
        scaler.load_state_dict(before | {key: value})
    assert scaler.state_dict() == before


@pytest.mark.parametrize("value", [0, -1.0, math.nan, math.inf, "big"])
def test_grad_scaler_errors_name_init_scale_as_the_user_wrote_it(value):
    with pytest.raises(ValueError, match=r"^init_scale must be"):
        nn.GradScaler(init_scale=value)


def test_grad_scaler_update_with_a_non_positive_new_scale_names_new_scale():
    scaler = nn.GradScaler()
    scaler.scale(nn.Tensor([1.0]))
    with pytest.raises(ValueError, match="^new_scale must be"):
        scaler.update(new_scale=0.0)


# --- optimizers ---------------------------------------------------------------------------
def _var(shape=(3,)):
    return nn.Variable(np.ones(shape, np.float32), name="w")


@pytest.mark.parametrize("iterations", [-1, 1.5, True, "3"])
def test_optimizer_load_state_dict_refuses_iterations_that_are_not_a_count(iterations):
    w = _var()
    opt = nn.Adam(params=[w])
    state = opt.state_dict() | {"iterations": iterations}
    with pytest.raises(ValueError, match=f"iterations must be an integer >= 0, got {iterations!r}"):
        opt.load_state_dict(state)
    assert opt.iterations == 0


def test_optimizer_load_state_dict_refuses_slots_of_the_wrong_shape():
    w = _var()
    opt = nn.Adam(params=[w])
    state = opt.state_dict()
    state["slots"][0]["momentum"] = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match=r"slot 'momentum' of w is float32\(4,\), expected "
                                         r"float32\(3,\)"):
        opt.load_state_dict(state)


# --- layers -------------------------------------------------------------------------------
@pytest.mark.parametrize("slope", [math.nan, math.inf, -0.1, "0.2", None])
def test_relu_refuses_a_negative_slope_that_is_not_a_finite_number_at_least_zero(slope):
    with pytest.raises(ValueError, match=r"ReLU: negative_slope must be a finite number in "
                                         r"\[0, inf\]"):
        nn.ReLU(negative_slope=slope)


@pytest.mark.parametrize("rate", [1.5, 1.0, -0.1, math.nan, "0.5"])
def test_dropout_refuses_a_rate_outside_zero_to_one(rate):
    with pytest.raises(ValueError, match=r"Dropout: rate must be a finite number in \[0, 1\)"):
        nn.Dropout(rate)


@pytest.mark.parametrize("make,argument", [
    (lambda: nn.Dropout(0.1, seed=-1), "seed"), (lambda: nn.Dense(2, seed=1.5), "seed"),
    (lambda: nn.Dense(2, use_bias="yes"), "use_bias"), (lambda: nn.Dense(2, name=""), "name"),
    (lambda: nn.Dense(2, activation="swishy"), "activation"),
    (lambda: CE(from_logits="no"), "from_logits"),
    (lambda: nn.metrics.Accuracy(name=""), "name"),
])
def test_every_constructor_argument_error_names_the_argument(make, argument):
    with pytest.raises((ValueError, TypeError), match=argument):
        make()


# --- non-finite training data ---------------------------------------------------------------
def _data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(20, 3)).astype(np.float32), rng.integers(0, 2, 20)


def _compiled():
    nn.set_random_seed(0)
    return nn.Sequential([nn.Dense(2)]).compile("sgd", CE(from_logits=True))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_fit_refuses_non_finite_x_naming_the_array_and_the_first_bad_index(bad):
    x, y = _data()
    x[7, 2] = bad
    x[9, 0] = bad
    model = _compiled()
    before = model.get_weights() if model.built else None
    with pytest.raises(ValueError, match=r"fit: x holds a non-finite value .* at index \(7, 2\)"):
        model.fit(x, y, verbose=0)
    assert before is None and not model.built


def test_fit_refuses_non_finite_float_targets_naming_y():
    x, _ = _data()
    y = np.zeros((20, 2), np.float32)
    y[4, 1] = np.nan
    model = nn.Sequential([nn.Dense(2)]).compile("sgd", "mse")
    with pytest.raises(ValueError, match=r"fit: y holds a non-finite value .* at index \(4, 1\)"):
        model.fit(x, y, verbose=0)


def test_fit_refuses_non_finite_validation_data_naming_it():
    x, y = _data()
    xv = x[:5].copy()
    xv[3, 1] = np.inf
    with pytest.raises(ValueError, match=r"fit\(validation_data\): x .* index \(3, 1\)"):
        _compiled().fit(x, y, validation_data=(xv, y[:5]), verbose=0)


def test_fit_with_allow_nonfinite_trains_on_non_finite_data_and_the_weights_become_nan():
    x, y = _data()
    x[0, 0] = np.nan
    model = _compiled()
    model.fit(x, y, verbose=0, shuffle=False, allow_nonfinite=True)
    assert np.isnan(model.layers[0].kernel.data).any()
    with pytest.raises(TypeError, match="allow_nonfinite must be True or False"):
        model.fit(x, y, verbose=0, allow_nonfinite="yes")


@pytest.mark.parametrize("attribute,value", [
    ("iterations", -1), ("iterations", 2.0), ("learning_rate", -0.1),
    ("learning_rate", math.nan),
])
def test_optimizer_setters_refuse_invalid_values_naming_the_attribute(attribute, value):
    opt = nn.Adam()
    wrapped = nn.LossScaleOptimizer(nn.Adam())
    for target in (opt, wrapped):
        with pytest.raises(ValueError, match=f"{attribute} must be"):
            setattr(target, attribute, value)
    assert opt.iterations == 0 and opt.learning_rate == 0.001


FIXED_SCALES = [(2.0**-126, True), (1.0, True), (2.0**15, True), (2.0**100, True),
                (0, False), (0.0, False), (2.0**-127, False), (1e-40, False), (1e-50, False),
                (-1.0, False), (float("inf"), False), (float("nan"), False), (1e39, False)]


@pytest.mark.parametrize("value,valid", FIXED_SCALES)
def test_a_fixed_loss_scale_has_one_rule_in_fit_the_optimizer_and_the_command_line(value, valid):
    """nn.engine.checks.loss_scale: a normal float32 from 2^-126 to float32's max; each face's error
    names the argument its caller wrote."""
    from nn.cli import parse_loss_scale

    model = nn.Sequential([nn.Dense(2)]).compile(nn.SGD(0.1), "mse")
    x, y = np.ones((4, 3), np.float32), np.zeros((4, 2), np.float32)
    faces = {
        "loss_scale": lambda: model.fit(x, y, verbose=0, loss_scale=value),
        "initial_scale": lambda: nn.LossScaleOptimizer(nn.SGD(0.1), initial_scale=value,
                                                       dynamic=False),
        "--loss-scale": lambda: parse_loss_scale(repr(float(value))),
    }
    for name, call in faces.items():
        if valid:
            call()
        else:
            with pytest.raises(ValueError, match=f"{name} must be"):
                call()
    if valid:
        assert model.loss_scale_optimizer.loss_scale == np.float32(value)
