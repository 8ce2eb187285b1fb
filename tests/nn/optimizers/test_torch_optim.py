"""Optimizers and GradScaler in PyTorch's spelling; nn.utils gradient clipping.

Oracles: PyTorch's update rules for Adam and RMSprop written out from its documentation, in
float64; float64 norms for clip_grad_norm_.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import nn


def variable(values, grad=None, name="w"):
    v = nn.Variable(np.asarray(values, np.float32), name=name)
    if grad is not None:
        v.grad = nn.Tensor(np.asarray(grad, np.float32))
    return v


GRADS = [np.array([0.5, -2.0, 1e-3]), np.array([0.25, 1.0, -3.0]), np.array([-1.0, 0.5, 2.0])]


def run(opt_factory, start=(1.0, -1.0, 0.5)):
    w = variable(start)
    opt = opt_factory([w])
    for g in GRADS:
        w.grad = nn.Tensor(g.astype(np.float32))
        opt.step()
        opt.zero_grad()
    return w.data.astype(np.float64)


def test_sgd_takes_parameters_first_and_lr_like_pytorch():
    torch_style = run(lambda p: nn.SGD(p, lr=0.1, momentum=0.9))
    keras_style = run(lambda p: nn.SGD(learning_rate=0.1, momentum=0.9, params=p))
    np.testing.assert_array_equal(torch_style, keras_style)
    w, buf = np.array([1.0, -1.0, 0.5]), np.zeros(3)
    for g in GRADS:  # PyTorch: buf = momentum * buf + g; w -= lr * buf
        buf = 0.9 * buf + g
        w = w - 0.1 * buf
    np.testing.assert_allclose(torch_style, w, rtol=1e-6)


def test_sgd_with_parameters_first_defaults_to_pytorch_lr():
    assert nn.SGD([variable([1.0])]).learning_rate == 1e-3
    assert nn.SGD().learning_rate == 0.01  # Keras's default in the Keras spelling
    assert nn.SGD([variable([1.0])], lr=0.5).lr == 0.5


def test_adam_in_pytorch_spelling_follows_pytorchs_update_rule():
    got = run(lambda p: nn.Adam(p, lr=0.01, betas=(0.8, 0.99), eps=1e-3))
    w, m, v = np.array([1.0, -1.0, 0.5]), np.zeros(3), np.zeros(3)
    for t, g in enumerate(GRADS, start=1):  # torch.optim.Adam's documented algorithm
        m = 0.8 * m + 0.2 * g
        v = 0.99 * v + 0.01 * g * g
        m_hat, v_hat = m / (1 - 0.8**t), v / (1 - 0.99**t)
        w = w - 0.01 * m_hat / (np.sqrt(v_hat) + 1e-3)
    np.testing.assert_allclose(got, w, rtol=1e-5)
    assert nn.Adam([variable([1.0])]).epsilon == 1e-8  # PyTorch's default eps


def test_rmsprop_in_pytorch_spelling_follows_pytorchs_update_rule():
    got = run(lambda p: nn.RMSprop(p, lr=0.01, eps=1e-2))
    w, sq = np.array([1.0, -1.0, 0.5]), np.zeros(3)
    for g in GRADS:  # torch.optim.RMSprop: alpha=0.99, eps outside the square root
        sq = 0.99 * sq + 0.01 * g * g
        w = w - 0.01 * g / (np.sqrt(sq) + 1e-2)
    np.testing.assert_allclose(got, w, rtol=1e-5)


def test_keras_spelling_keeps_keras_formulas_and_defaults():
    adam = nn.Adam(0.01)
    assert (adam.epsilon, adam.pytorch_epsilon) == (1e-7, False)
    rms = nn.RMSprop()
    assert (rms.rho, rms.epsilon, rms.pytorch_epsilon) == (0.9, 1e-7, False)
    again = nn.Adam.from_config(nn.Adam([variable([1.0])], lr=0.1).get_config())
    assert again.pytorch_epsilon and again.epsilon == 1e-8  # the face survives a checkpoint


def test_error_messages_name_the_argument_as_written():
    with pytest.raises(ValueError, match=r"SGD: lr must be"):
        nn.SGD([variable([1.0])], lr=-1)
    with pytest.raises(ValueError, match=r"SGD: learning_rate must be"):
        nn.SGD(learning_rate=float("nan"))
    with pytest.raises(ValueError, match=r"both learning_rate=0.1 and lr=0.2"):
        nn.SGD(0.1, lr=0.2)
    with pytest.raises(ValueError, match=r"eps must be"):
        nn.Adam([variable([1.0])], eps=-1.0)
    with pytest.raises(ValueError, match=r"betas\[1\] must be"):
        nn.Adam([variable([1.0])], betas=(0.9, 1.5))
    with pytest.raises(ValueError, match=r"both epsilon=0.1 and eps=0.2"):
        nn.Adam(epsilon=0.1, eps=0.2)
    with pytest.raises(ValueError, match=r"lr must be"):
        opt = nn.SGD([variable([1.0])], lr=0.1)
        opt.lr = -0.5


def test_second_positional_argument_raises_instead_of_being_misread():
    with pytest.raises(TypeError, match=r"by keyword.*SGD\(model.parameters\(\), lr=0.1\)"):
        nn.SGD([variable([1.0])], 0.1)  # PyTorch reads 0.1 as lr, Keras as momentum


def test_zero_grad_set_to_none_false_zeroes_in_place():
    w = variable([1.0, 2.0], grad=[3.0, 4.0])
    grad = w.grad
    nn.SGD([w], lr=0.1).zero_grad(set_to_none=False)
    assert w.grad is grad
    np.testing.assert_array_equal(grad.data, 0)


def test_grad_scaler_accepts_cpu_and_cuda_and_rejects_other_devices():
    assert nn.GradScaler("cpu").device == "cpu"
    assert nn.GradScaler("cuda").device == "cuda"  # PyTorch's recipe's spelling, emulated
    assert nn.GradScaler(device="cpu", init_scale=8.0).get_scale() == 8.0
    with pytest.raises(ValueError, match="device='tpu'.*emulates every format on the CPU"):
        nn.GradScaler("tpu")
    with pytest.raises(TypeError, match=r"init_scale=1024.0"):
        nn.GradScaler(1024.0)


def test_grad_scaler_takes_its_arguments_in_pytorchs_positional_order():
    scaler = nn.GradScaler("cpu", 1024.0, 4.0, 0.25, 3, True)
    keyword = nn.GradScaler("cpu", init_scale=1024.0, growth_factor=4.0, backoff_factor=0.25,
                            growth_interval=3, enabled=True)
    assert scaler.state_dict() == keyword.state_dict()
    assert scaler.get_scale() == 1024.0
    assert not nn.GradScaler("cpu", 8.0, 2.0, 0.5, 2000, False).is_enabled()


def grads_of(*arrays):
    return [variable(np.zeros_like(a), grad=a, name=f"p{i}") for i, a in enumerate(arrays)]


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
def test_clip_grad_norm_returns_the_norm_before_clipping_and_scales_to_max_norm(norm_type):
    rng = np.random.default_rng(0)
    arrays = [rng.normal(size=(3, 4)), rng.normal(size=5)]
    params = grads_of(*arrays)
    flat = np.concatenate([a.astype(np.float32).astype(np.float64).ravel() for a in arrays])
    total = (np.abs(flat).max() if math.isinf(norm_type)
             else (np.abs(flat) ** norm_type).sum() ** (1 / norm_type))
    norm = nn.utils.clip_grad_norm_(params, max_norm=0.5, norm_type=norm_type)
    assert norm.fmt.name == "float32"
    np.testing.assert_allclose(norm.item(), total, rtol=1e-6)
    for p, a in zip(params, arrays, strict=True):
        np.testing.assert_allclose(p.grad.data, a * 0.5 / (total + 1e-6), rtol=1e-6)


def test_clip_grad_norm_leaves_small_gradients_alone():
    params = grads_of(np.array([0.3, 0.4]))
    assert nn.utils.clip_grad_norm_(params, 1.0).item() == pytest.approx(0.5)
    np.testing.assert_array_equal(params[0].grad.data, np.float32([0.3, 0.4]))
    assert nn.utils.clip_grad_norm_([variable([1.0])], 1.0).item() == 0.0  # no grads


def test_clip_grad_norm_with_an_inf_gradient_behaves_as_pytorch():
    params = grads_of(np.array([np.inf, 1.0]))
    norm = nn.utils.clip_grad_norm_(params, 1.0)  # coefficient 0: inf*0 -> nan, 1*0 -> 0
    assert norm.item() == np.inf
    assert np.isnan(params[0].grad.data[0]) and params[0].grad.data[1] == 0
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_(grads_of(np.array([np.nan])), 1.0, error_if_nonfinite=True)


def test_clip_grad_norm_rounds_the_scaled_gradient_to_its_format():
    p = nn.Variable(np.zeros(2, np.float32), fmt="float16", name="h")
    p.grad = nn.Tensor(np.float32([3.0, 4.0]), fmt="float16")
    nn.utils.clip_grad_norm_([p], 1.0)
    expected = (np.float32([3.0, 4.0]) * (np.float32(1) / np.float32(5 + 1e-6))).astype(np.float16)
    np.testing.assert_array_equal(p.grad.data, expected.astype(np.float32))


def test_clip_grad_value_clips_entries_and_checks_its_arguments():
    params = grads_of(np.array([-3.0, 0.5, 2.0]))
    nn.utils.clip_grad_value_(params, 1.0)
    np.testing.assert_array_equal(params[0].grad.data, [-1.0, 0.5, 1.0])
    with pytest.raises(ValueError, match="max_norm"):
        nn.utils.clip_grad_norm_(params, -1.0)
    with pytest.raises(ValueError, match="norm_type"):
        nn.utils.clip_grad_norm_(params, 1.0, norm_type=0)
    with pytest.raises(TypeError, match="model.parameters"):
        nn.utils.clip_grad_norm_(5, 1.0)
