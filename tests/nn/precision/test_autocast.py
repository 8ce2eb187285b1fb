"""nn.autocast: op-level formats whatever the layer's policy, per thread, PyTorch's op lists."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import fpsim
import nn
from nn import functions as F

RNG = np.random.default_rng(0)
A = RNG.normal(size=(3, 5)).astype(np.float32)
B = RNG.normal(size=(5, 2)).astype(np.float32)


def h(a):
    return np.asarray(a, np.float32).astype(np.float16).astype(np.float64)


def test_matmul_runs_in_the_autocast_format_with_fp32_accumulation():
    a, b = nn.Tensor(A), nn.Tensor(B)
    with nn.autocast("cpu", dtype="float16"):
        out = a @ b
    assert out.fmt.name == "float16"
    np.testing.assert_array_equal(out.data, h(h(A) @ h(B)))  # one rounding of the exact sum
    assert (a @ b).fmt.name == "float32"  # outside the block: as before


def test_bfloat16_is_the_cpu_default_and_format_objects_are_accepted():
    with nn.autocast("cpu") as ctx:
        assert (nn.Tensor(A) @ nn.Tensor(B)).fmt.name == "bfloat16"
    assert ctx.fast_dtype is fpsim.BF16
    with nn.autocast("cpu", dtype=fpsim.E4M3FN):
        assert (nn.Tensor(A) @ nn.Tensor(B)).fmt.name == "float8_e4m3fn"


@pytest.mark.parametrize("op", [F.softmax, F.log_softmax, F.exp, F.log,
                                lambda t: F.pow(t, 2.0), F.sum])
def test_range_hungry_ops_run_and_return_fp32_under_cuda_autocast(op):
    """CUDA's fp32 list (autocast("cuda"), emulated on the CPU)."""
    x = nn.Tensor(np.abs(A) + 0.5, fmt="float16")
    with nn.autocast("cuda", dtype="float16"):
        out = op(x)
    assert out.fmt.name == "float32"
    with nn.no_grad():
        reference = op(nn.Tensor(x.data))  # the same op on the exact fp32 widening
    np.testing.assert_array_equal(out.data, reference.data)


def test_other_ops_keep_their_inputs_format_under_autocast():
    x16 = nn.Tensor(A, fmt="float16")
    with nn.autocast("cpu", dtype="float16"):
        assert F.relu(x16).fmt.name == "float16"
        assert F.tanh(x16).fmt.name == "float16"
        assert (x16 + nn.Tensor(A)).fmt.name == "float32"  # promotion, as fp16 + fp32 in torch


def test_loss_under_autocast_is_fp32():
    model = nn.Sequential([nn.Linear(5, 3)])
    with nn.autocast("cpu", dtype="float16"):
        logits = model(A)
        loss = nn.CrossEntropyLoss()(logits, np.array([0, 1, 2]))
    assert logits.fmt.name == "float16" and loss.fmt.name == "float32"


def test_autocast_overrides_every_layer_policy():
    nn.set_global_policy("mixed_bfloat16")
    dense = nn.Dense(2)
    nn.set_global_policy("float32")
    with nn.autocast("cpu", dtype="float16"):
        out = dense(A)
    assert out.fmt.name == "float16"
    kernel, bias = dense.kernel.data, dense.bias.data
    np.testing.assert_array_equal(out.data, h(h(A) @ h(kernel) + h(bias)))  # from fp32 masters


def test_gradients_under_autocast_go_to_each_tensors_own_format():
    layer = nn.Linear(5, 2, seed=0)
    x = nn.Tensor(A, requires_grad=True)
    with nn.autocast("cpu", dtype="float16"):
        out = layer(x)
        out.sum().backward()  # backward inside the block ignores autocast
    assert layer.weight.grad.fmt.name == "float32" and x.grad.fmt.name == "float32"
    g = np.ones((3, 2))  # the gradient of each fp16 copy is fp16, widened exactly to fp32
    np.testing.assert_array_equal(layer.weight.grad.data, h(g.T @ h(A)))
    np.testing.assert_array_equal(x.grad.data, h(g @ h(layer.weight.data)))
    again = nn.Tensor(A, requires_grad=True)
    with nn.autocast("cpu", dtype="float16"):
        out = layer(again)
    out.sum().backward()  # the usual place: outside the block
    np.testing.assert_array_equal(again.grad.data, x.grad.data)


def test_enabled_false_and_nesting_restore_the_outer_state():
    with nn.autocast("cpu", dtype="float16"):
        with nn.autocast("cpu", enabled=False):
            assert (nn.Tensor(A) @ nn.Tensor(B)).fmt.name == "float32"
        with nn.autocast("cpu", dtype="bfloat16"):
            assert (nn.Tensor(A) @ nn.Tensor(B)).fmt.name == "bfloat16"
        assert (nn.Tensor(A) @ nn.Tensor(B)).fmt.name == "float16"
    assert (nn.Tensor(A) @ nn.Tensor(B)).fmt.name == "float32"


def test_autocast_as_a_decorator():
    @nn.autocast("cpu", dtype="float16")
    def forward(a, b):
        return nn.Tensor(a) @ nn.Tensor(b)

    assert forward(A, B).fmt.name == "float16"


def test_autocast_is_per_thread():
    seen = {}
    inside, done = threading.Event(), threading.Event()

    def other():
        inside.wait()
        seen["other"] = (nn.Tensor(A) @ nn.Tensor(B)).fmt.name
        done.set()

    thread = threading.Thread(target=other)
    thread.start()
    with nn.autocast("cpu", dtype="float16"):
        inside.set()
        done.wait()
        seen["here"] = (nn.Tensor(A) @ nn.Tensor(B)).fmt.name
    thread.join()
    assert seen == {"other": "float32", "here": "float16"}


def test_autocast_rejects_other_devices_and_bad_dtypes():
    with pytest.raises(ValueError, match="device_type='tpu' is not one of \\['cpu', 'cuda'\\]"):
        nn.autocast("tpu")
    with pytest.raises(ValueError, match="autocast: dtype='half16'"):
        nn.autocast("cpu", dtype="half16")
    with pytest.raises(ValueError, match="float64"):
        nn.autocast("cpu", dtype="float64")
    with pytest.raises(TypeError, match="enabled"):
        nn.autocast("cpu", enabled="no")


def test_a_gradient_tape_inside_autocast_gives_what_backward_gives():
    layer = nn.Linear(5, 2, seed=0)
    x = nn.Tensor(A, requires_grad=True)
    with nn.autocast("cpu", dtype="float16"):
        with nn.GradientTape() as tape:
            loss = layer(x).sum()
        g_w, g_x = tape.gradient(loss, [layer.weight, x])  # taken inside the block, as in TF
    with nn.autocast("cpu", dtype="float16"):
        out = layer(x)
    out.sum().backward()
    np.testing.assert_array_equal(g_w.data, layer.weight.grad.data)
    np.testing.assert_array_equal(g_x.data, x.grad.data)


@pytest.mark.parametrize("layer", [nn.LayerNormalization, nn.BatchNormalization])
def test_normalisation_layers_run_in_fp32_under_autocast(layer):
    """README's autocast list: the norms compute and return fp32 even on an fp16 input."""
    norm = layer()
    with nn.autocast("cpu", dtype="float16"):
        h = nn.Linear(5, 4, seed=0)(nn.Tensor(A))
        out = norm(h, training=True)
    assert h.dtype == "float16" and out.dtype == "float32"
    x = h.data.astype(np.float64)
    axis = -1 if layer is nn.LayerNormalization else 0
    mean, var = x.mean(axis, keepdims=True), x.var(axis, keepdims=True)
    want = (x - mean) / np.sqrt(var + norm.epsilon)  # gamma 1, beta 0 at init
    np.testing.assert_allclose(out.data, want, rtol=1e-5, atol=1e-6)
