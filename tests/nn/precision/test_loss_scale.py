"""Loss scaling: the shared state machine, tf.keras's LossScaleOptimizer, PyTorch's GradScaler."""

from __future__ import annotations

import numpy as np
import pytest

import fpsim
from nn.engine.tensor import Tensor, Variable
from nn.optimizers import SGD, Adam
from nn.precision.grad_scaler import GradScaler
from nn.precision.loss_scale import DynamicLossScale, LossScaleOptimizer


def make_var(values, fmt=fpsim.FP32, name="w"):
    return Variable(np.array(values, np.float32), fmt=fmt, name=name)


def make_grad(values, fmt=fpsim.FP32):
    return Tensor(np.array(values, np.float32), fmt=fmt)


INF, NAN = float("inf"), float("nan")
W0 = np.array([0.5, -1.25, 3.0], np.float32)
G = np.array([0.25, 0.5, -1.0], np.float32)


def bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def slot_bits(opt) -> list[bytes]:
    return [bits(a) for slots in opt.state_dict()["slots"] for a in slots.values()]


# ---- DynamicLossScale ---------------------------------------------------------------------

def machine(**kw) -> DynamicLossScale:
    args = {"initial_scale": 8.0, "growth_interval": 3, "growth_factor": 2.0,
            "backoff_factor": 0.5} | kw
    return DynamicLossScale(**args)


def test_state_machine_grows_after_exactly_growth_interval_finite_steps():
    s = machine()
    assert [(s.update(True), s.scale, s.counter) for _ in range(4)] == [
        (True, 8.0, 1), (True, 8.0, 2), (True, 16.0, 0), (True, 16.0, 1)]


def test_state_machine_backs_off_and_resets_counter_on_a_nonfinite_step():
    s = machine()
    s.update(True)
    s.update(True)
    assert s.update(False) is False
    assert (s.scale, s.counter) == (4.0, 0)
    s.update(True)
    s.update(True)
    assert s.scale == 4.0  # the two earlier finite steps no longer count


def test_state_machine_grows_only_to_a_finite_float32_scale():
    s = machine(initial_scale=2.0**127, growth_interval=1)
    s.update(True)  # 2**128 overflows float32
    assert (s.scale, s.counter) == (2.0**127, 0)


def test_state_machine_min_and_max_scale_bound_the_scale():
    s = machine(initial_scale=2.0, growth_interval=1, min_scale=1.0, max_scale=3.0)
    s.update(True)
    assert s.scale == 3.0
    for _ in range(4):
        s.update(False)
    assert s.scale == 1.0


def test_state_machine_without_floor_reaches_zero():
    s = machine(initial_scale=1.0)
    for _ in range(150):  # float32's smallest subnormal is 2**-149
        s.update(False)
    assert s.scale == 0.0


@pytest.mark.parametrize("kw, match", [
    ({"initial_scale": 0.0}, "initial_scale"), ({"initial_scale": INF}, "initial_scale"),
    ({"initial_scale": 1e39}, "initial_scale"), ({"growth_interval": 0}, "growth_interval"),
    ({"growth_interval": 2.5}, "growth_interval"), ({"growth_factor": 1.0}, "growth_factor"),
    ({"backoff_factor": 1.0}, "backoff_factor"), ({"backoff_factor": 0}, "backoff_factor"),
    ({"min_scale": 16.0}, r"\[min_scale, max_scale\]"),
])
def test_state_machine_rejects_invalid_configuration(kw, match):
    with pytest.raises(ValueError, match=match):
        machine(**kw)


def test_state_machine_state_dict_round_trips_and_rejects_garbage():
    s = machine()
    s.update(True)
    s.update(False)
    s.update(True)
    t = machine(initial_scale=1.0)
    t.load_state_dict(s.state_dict())
    assert t.state_dict() == s.state_dict() == {"scale": 4.0, "counter": 1}
    for bad in ({"scale": 1.0}, {"scale": NAN, "counter": 0}, {"scale": 1.0, "counter": -1}):
        with pytest.raises(ValueError):
            t.load_state_dict(bad)
    assert t.state_dict() == {"scale": 4.0, "counter": 1}


# ---- LossScaleOptimizer (tf.keras) ---------------------------------------------------------

def lso(inner=None, **kw):
    return LossScaleOptimizer(inner or SGD(0.1), **kw)


def test_lso_defaults_are_tf_keras_defaults():
    opt = lso()
    assert (opt.loss_scale, opt.dynamic_growth_steps, opt.dynamic) == (2.0**15, 2000, True)
    assert opt.dynamic_counter == 0


def test_get_scaled_loss_multiplies_numbers_arrays_tensors_and_callables():
    opt = lso(initial_scale=1024)
    assert opt.get_scaled_loss(0.5) == 512.0
    np.testing.assert_array_equal(opt.get_scaled_loss(np.float32([1, 2])), [1024, 2048])
    assert opt.get_scaled_loss(lambda: 2.0)() == 2048.0
    scaled = opt.get_scaled_loss(make_grad([0.25]))
    assert isinstance(scaled, Tensor)
    np.testing.assert_array_equal(scaled.data, [256.0])


def test_get_unscaled_gradients_divides_by_the_scale_and_keeps_none():
    opt = lso(initial_scale=3.0)  # not a power of two: the reciprocal rounds
    out = opt.get_unscaled_gradients([G * 3, None, make_grad(G * 3)])
    assert out[1] is None
    np.testing.assert_allclose(out[0], G.astype(np.float64), rtol=2**-23)
    np.testing.assert_array_equal(out[2].data, out[0])


def test_unscaled_fp16_gradient_is_rounded_to_fp16():
    opt = lso(initial_scale=3.0)
    g = np.float16([1.0, 1000.0]).astype(np.float32)
    out = opt.get_unscaled_gradients([make_grad(g, fmt=fpsim.FP16)])[0]
    assert out.fmt == fpsim.FP16
    expected = (g.astype(np.float64) / 3).astype(np.float16)  # numpy rounds float64 directly
    np.testing.assert_array_equal(out.data, expected.astype(np.float32))


def test_scaled_loss_rescues_an_fp16_gradient_that_underflows_unscaled():
    def weight_gradient(scale):
        w = Variable(np.float32([1, 2, 3]), fmt=fpsim.FP32, name="w")
        a = Tensor(np.float32(2.0**-13), fmt=fpsim.FP16)
        loss = (w.cast(fpsim.FP16) * a).sum() * 2.0**-13  # d loss / d fp16 activation: 2**-26
        opt = LossScaleOptimizer(SGD(1.0), initial_scale=scale)
        opt.get_scaled_loss(loss).backward()
        return opt.get_unscaled_gradients([w.grad])[0].data

    np.testing.assert_array_equal(weight_gradient(1.0), 0.0)  # below half of fp16's 2**-24
    np.testing.assert_array_equal(weight_gradient(2.0**10), 2.0**-26)  # 2**-16 in fp16, exact


def test_finite_gradients_are_applied_by_the_inner_optimizer():
    opt, w = lso(), make_var(W0)
    assert opt.apply_gradients([(G, w)]) is True
    np.testing.assert_allclose(w.data, W0.astype(np.float64) - 0.1 * G.astype(np.float64),
                               rtol=1e-7)
    assert opt.iterations == 1 and opt.skipped_steps == 0 and not opt.last_step_skipped


@pytest.mark.parametrize("bad", [INF, -INF, NAN])
def test_halves_scale_and_skips_step_on_inf_or_nan(bad):
    opt, w = lso(), make_var(W0)
    g = G.copy()
    g[1] = bad
    assert opt.apply_gradients([(g, w)]) is False
    np.testing.assert_array_equal(w.data, W0)
    assert opt.loss_scale == 2.0**14 and opt.skipped_steps == 1 and opt.last_step_skipped


def test_one_nonfinite_gradient_skips_the_update_of_every_variable():
    opt, a, b = lso(), make_var(W0, name="a"), make_var(W0, name="b")
    opt.apply_gradients([(G, a), (np.float32([INF, 0, 0]), b)])
    np.testing.assert_array_equal(a.data, W0)


def test_skipped_step_leaves_variables_and_slots_bit_identical():
    opt, w = lso(Adam(0.01)), make_var(W0)
    opt.apply_gradients([(G, w)])  # creates non-zero slots
    before_w, before_slots = bits(w.data), slot_bits(opt.inner_optimizer)
    opt.apply_gradients([(np.float32([NAN, 1, 1]), w)])
    assert bits(w.data) == before_w
    assert slot_bits(opt.inner_optimizer) == before_slots


def test_skipped_step_still_advances_iterations_as_tf_keras_does():
    opt, w = lso(Adam(0.01)), make_var(W0)
    opt.apply_gradients([(np.float32([INF, 1, 1]), w)])
    assert opt.iterations == opt.inner_optimizer.iterations == 1


def test_check_is_on_the_unscaled_gradients_it_is_given():
    opt, w = lso(initial_scale=2.0**15), make_var(W0)
    with np.errstate(over="ignore"):
        scaled = np.float32([1e35, 1e35, 1e35]) * np.float32(2.0**15)  # overflowed to inf
    unscaled = opt.get_unscaled_gradients([scaled])[0]
    assert np.all(np.isinf(unscaled))
    assert opt.apply_gradients([(unscaled, w)]) is False
    big_but_finite = opt.get_unscaled_gradients([np.float32([3e38, 0, 0])])[0]
    assert opt.apply_gradients([(big_but_finite, make_var(W0))]) is True


def test_doubles_scale_after_exactly_dynamic_growth_steps_finite_steps():
    opt, w = lso(initial_scale=4.0, dynamic_growth_steps=3), make_var(W0)
    scales = []
    for _ in range(4):
        opt.apply_gradients([(G * 1e-3, w)])
        scales.append(opt.loss_scale)
    assert scales == [4.0, 4.0, 8.0, 8.0]
    assert opt.dynamic_counter == 1


def test_nonfinite_step_resets_the_growth_counter():
    opt, w = lso(initial_scale=4.0, dynamic_growth_steps=3), make_var(W0)
    for g in (G, G, G * INF, G, G):
        opt.apply_gradients([(g, w)])
    assert (opt.loss_scale, opt.dynamic_counter) == (2.0, 2)


def test_scale_never_goes_below_one():
    opt, w = lso(initial_scale=4.0), make_var(W0)
    scales = []
    for _ in range(4):
        opt.apply_gradients([(np.float32([NAN, 0, 0]), w)])
        scales.append(opt.loss_scale)
    assert scales == [2.0, 1.0, 1.0, 1.0]


def test_doubles_only_if_the_doubled_scale_is_finite():
    opt = lso(initial_scale=2.0**127, dynamic_growth_steps=1)
    opt.apply_gradients([(G, make_var(W0))])
    assert (opt.loss_scale, opt.dynamic_counter) == (2.0**127, 0)


def test_fixed_scale_never_changes_and_applies_every_update():
    opt, w = lso(initial_scale=128.0, dynamic=False), make_var(W0)
    assert opt.apply_gradients([(np.float32([INF, 0, 0]), w)]) is True
    assert w.data[0] == -INF and opt.loss_scale == 128.0 and opt.dynamic_counter is None
    assert opt.skipped_steps == 0


def test_invalid_input_raises_before_the_scale_changes():
    opt, w = lso(), make_var(W0, name="kernel")
    with pytest.raises(ValueError, match="kernel"):
        opt.apply_gradients([(np.float32([INF, 0]), w)])
    assert opt.loss_scale == 2.0**15 and opt.iterations == 0


def test_lso_state_dict_round_trip_continues_bit_identically():
    def train(opt, w, grads):
        for g in grads:
            opt.apply_gradients([(g, w)])

    grads = [G, G * INF, G * 0.5, G, G * 2]
    a, wa = lso(Adam(0.01), initial_scale=64.0, dynamic_growth_steps=2), make_var(W0)
    train(a, wa, grads[:3])
    state = a.state_dict()
    b, wb = lso(Adam(0.01), initial_scale=64.0, dynamic_growth_steps=2), make_var(wa.data)
    b.load_state_dict(state, variables=[wb])
    assert (b.loss_scale, b.dynamic_counter, b.iterations, b.skipped_steps) == (32.0, 1, 3, 1)
    train(a, wa, grads[3:])
    train(b, wb, grads[3:])
    assert bits(wa.data) == bits(wb.data)
    assert slot_bits(a.inner_optimizer) == slot_bits(b.inner_optimizer)
    assert a.state_dict()["loss_scale"] == b.state_dict()["loss_scale"] == 64.0


def test_lso_load_state_dict_rejects_garbage_and_changes_nothing():
    opt, w = lso(Adam()), make_var(W0)
    opt.apply_gradients([(G, w)])
    good = opt.state_dict()
    with pytest.raises(ValueError, match="not a LossScaleOptimizer state"):
        opt.load_state_dict({"loss_scale": 1.0})
    with pytest.raises(ValueError, match=r"\[min_scale"):
        opt.load_state_dict(good | {"loss_scale": 0.5})
    with pytest.raises(ValueError, match="velocity"):
        bad_inner = opt.inner_optimizer.state_dict()
        bad_inner["slots"][0]["velocity"] = np.zeros(2, np.float32)
        opt.load_state_dict(good | {"loss_scale": 8.0, "optimizer": bad_inner})
    assert opt.state_dict()["loss_scale"] == 2.0**15


def test_lso_rejects_wrapping_itself_or_a_non_optimizer():
    with pytest.raises(TypeError, match="another LossScaleOptimizer"):
        LossScaleOptimizer(lso())
    with pytest.raises(TypeError, match="SGD, RMSprop, Adam"):
        LossScaleOptimizer("adam")
    with pytest.raises(ValueError, match="dynamic_growth_steps"):
        lso(dynamic_growth_steps=0)


# ---- GradScaler (PyTorch) ------------------------------------------------------------------

def param(values=W0, grad=None, name="w", fmt=fpsim.FP32):
    p = make_var(values, fmt=fmt, name=name)
    p.grad = None if grad is None else make_grad(grad, fmt=fmt)
    return p


def iteration(scaler, opts, grads, loss=1.0):
    """One PyTorch iteration: scale the loss, 'backward' (set grads), step each, update."""
    scaler.scale(loss)
    for opt, g in zip(opts, grads, strict=True):
        opt.params[0].grad = make_grad(g)
        scaler.step(opt)
    scaler.update()


def test_gradscaler_defaults_are_pytorch_defaults():
    assert GradScaler().state_dict() == {"scale": 2.0**16, "growth_factor": 2.0,
                                         "backoff_factor": 0.5, "growth_interval": 2000,
                                         "_growth_tracker": 0}


def test_scale_multiplies_outputs_by_the_scale():
    scaler = GradScaler(init_scale=4.0)
    assert scaler.scale(0.5) == 2.0
    out = scaler.scale([np.float32([1.0]), make_grad([2.0])])
    np.testing.assert_array_equal(out[0], [4.0])
    np.testing.assert_array_equal(out[1].data, [8.0])
    with pytest.raises(TypeError, match="cannot scale"):
        scaler.scale("loss")


def test_scaling_an_fp16_array_by_2_16_does_not_overflow_through_the_factor():
    loss = np.float16([1e-3, 0.5])  # a float16 copy of 65536 would be inf
    out = GradScaler().scale(loss)
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, (loss.astype(np.float64) * 2**16).astype(np.float16))


def test_unscale_multiplies_by_float32_of_the_float64_reciprocal():
    s = 2.0**16 + 1
    scaler, p = GradScaler(init_scale=s), param(grad=G * 1000)
    opt = SGD(params=[p])
    scaler.scale(1.0)
    scaler.unscale_(opt)
    inv = np.float32(1 / np.float64(np.float32(s)))
    np.testing.assert_array_equal(p.grad.data, (G * 1000) * inv)
    np.testing.assert_allclose(p.grad.data, (G * 1000).astype(np.float64) / s, rtol=2**-23)


def test_step_skips_on_inf_in_scaled_grads_and_update_halves_scale():
    p = param()
    opt = SGD(0.1, params=[p])
    scaler = GradScaler()
    iteration(scaler, [opt], [np.float32([INF, 1, 1])])
    np.testing.assert_array_equal(p.data, W0)
    assert scaler.get_scale() == 2.0**15 and opt.iterations == 0


def test_step_skips_on_nan_and_applies_finite_gradients():
    p = param()
    opt = SGD(0.1, params=[p])
    scaler = GradScaler(init_scale=4.0)
    iteration(scaler, [opt], [np.float32([NAN, 1, 1])])
    assert scaler.get_scale() == 2.0
    iteration(scaler, [opt], [G * 2])  # scaled by 2; unscaled: G
    np.testing.assert_allclose(p.data, W0.astype(np.float64) - 0.1 * G.astype(np.float64),
                               rtol=1e-7)
    assert opt.iterations == 1


def test_skip_is_per_optimizer_while_the_scale_backs_off_once():
    pa, pb = param(name="a"), param(name="b")
    a, b = SGD(0.1, params=[pa]), SGD(0.1, params=[pb])
    scaler = GradScaler(init_scale=8.0)
    iteration(scaler, [a, b], [G, np.float32([INF, 0, 0])])
    assert a.iterations == 1 and b.iterations == 0
    np.testing.assert_array_equal(pb.data, W0)
    assert not np.array_equal(pa.data, W0)
    assert scaler.get_scale() == 4.0


def test_gradscaler_skipped_step_leaves_variables_and_slots_bit_identical():
    p = param()
    opt = Adam(0.01, params=[p])
    scaler = GradScaler(init_scale=8.0)
    iteration(scaler, [opt], [G])
    before_w, before_slots = bits(p.data), slot_bits(opt)
    iteration(scaler, [opt], [np.float32([0, NAN, 0])])
    assert bits(p.data) == before_w and slot_bits(opt) == before_slots


def test_update_grows_after_exactly_growth_interval_clean_steps():
    p = param()
    opt = SGD(1e-3, params=[p])
    scaler = GradScaler(init_scale=8.0, growth_interval=3)
    scales = []
    for _ in range(4):
        iteration(scaler, [opt], [G])
        scales.append(scaler.get_scale())
    assert scales == [8.0, 8.0, 16.0, 16.0]
    assert scaler.state_dict()["_growth_tracker"] == 1


def test_gradscaler_has_no_floor():
    p = param()
    opt = SGD(params=[p])
    scaler = GradScaler(init_scale=1.0)
    for _ in range(3):
        iteration(scaler, [opt], [np.float32([INF, 0, 0])])
    assert scaler.get_scale() == 0.125


def test_gradscaler_grows_only_to_a_finite_scale():
    p = param()
    scaler = GradScaler(init_scale=2.0**127, growth_interval=1)
    iteration(scaler, [SGD(params=[p])], [np.zeros(3, np.float32)])
    assert scaler.get_scale() == 2.0**127
    assert scaler.state_dict()["_growth_tracker"] == 0


def test_update_with_new_scale_sets_it_and_keeps_the_tracker():
    p = param()
    opt = SGD(params=[p])
    scaler = GradScaler(init_scale=8.0)
    iteration(scaler, [opt], [G])
    scaler.scale(1.0)
    scaler.update(new_scale=3.0)
    assert scaler.get_scale() == 3.0 and scaler.state_dict()["_growth_tracker"] == 1
    with pytest.raises(TypeError, match="new_scale"):
        scaler.update(new_scale="big")


def test_gradscaler_state_dict_round_trips():
    p = param()
    a = GradScaler(init_scale=8.0, growth_interval=5)
    iteration(a, [SGD(params=[p])], [G])
    b = GradScaler(enabled=True)
    b.load_state_dict(a.state_dict())
    assert b.state_dict() == a.state_dict() == {
        "scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 5,
        "_growth_tracker": 1}


def test_gradscaler_load_state_dict_rejects_empty_or_incomplete_state():
    scaler = GradScaler()
    with pytest.raises(RuntimeError, match="empty"):
        scaler.load_state_dict({})
    with pytest.raises(ValueError, match="_growth_tracker"):
        scaler.load_state_dict({"scale": 1.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                                "growth_interval": 10})
    assert scaler.get_scale() == 2.0**16


# ---- GradScaler misuse ---------------------------------------------------------------------

def ready(grad=G, fmt=fpsim.FP32):
    p = param(grad=grad, fmt=fmt)
    opt = SGD(params=[p])
    scaler = GradScaler()
    scaler.scale(1.0)
    return scaler, opt


def test_unscale_twice_before_update_raises():
    scaler, opt = ready()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)


def test_unscale_after_step_raises():
    scaler, opt = ready()
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        scaler.unscale_(opt)


def test_step_twice_before_update_raises():
    scaler, opt = ready()
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)


@pytest.mark.parametrize("verb", ["step", "unscale_"])
def test_step_or_unscale_before_scale_raises(verb):
    scaler, opt = GradScaler(), SGD(params=[param(grad=G)])
    with pytest.raises(RuntimeError, match="before scale"):
        getattr(scaler, verb)(opt)
    scaler, opt = ready()
    scaler.step(opt)
    scaler.update()
    with pytest.raises(RuntimeError, match="before scale"):  # scale() is needed every iteration
        getattr(scaler, verb)(opt)


def test_update_before_any_step_raises():
    with pytest.raises(RuntimeError, match="before scale"):
        GradScaler().update()
    scaler, _ = ready()
    with pytest.raises(RuntimeError, match="no inf checks"):
        scaler.update()


def test_step_with_no_gradients_raises():
    scaler, opt = ready(grad=None)
    with pytest.raises(RuntimeError, match="no inf checks.*backward"):
        scaler.step(opt)


def test_unscaling_fp16_gradients_raises():
    scaler, opt = ready(grad=np.float16(G), fmt=fpsim.FP16)
    with pytest.raises(ValueError, match="FP16 gradients"):
        scaler.unscale_(opt)


def test_optimizer_without_params_raises():
    scaler = GradScaler()
    scaler.scale(1.0)
    with pytest.raises(RuntimeError, match="params="):
        scaler.unscale_(SGD())
    with pytest.raises(TypeError, match="SGD, RMSprop, Adam"):
        scaler.step(LossScaleOptimizer(SGD()))


def test_gradscaler_rejects_invalid_factors():
    with pytest.raises(ValueError, match="growth_factor"):
        GradScaler(growth_factor=1.0)
    with pytest.raises(ValueError, match="backoff_factor"):
        GradScaler(backoff_factor=1.5)


def test_disabled_gradscaler_is_a_pass_through():
    p = param(grad=G)
    opt = SGD(0.1, params=[p])
    scaler = GradScaler(enabled=False)
    assert scaler.scale(3.0) == 3.0 and scaler.get_scale() == 1.0
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    np.testing.assert_allclose(p.data, W0.astype(np.float64) - 0.1 * G.astype(np.float64),
                               rtol=1e-7)
    assert scaler.state_dict() == {} and not scaler.is_enabled()
