"""Tensor, Variable and the autograd engine; nn's rounding kernel against fpsim.round; losses
and accuracy against closed forms in float64."""

from __future__ import annotations

import numpy as np
import pytest

import fpsim
import nn
from fpsim import BF16, FP16, FP32
from nn.engine.rounding import round_array


def test_repr_shows_the_format():
    assert repr(nn.Tensor([1e-8, 70000.0], fmt="fp16")) == "Tensor([ 0., inf], fmt=float16)"
    assert "fmt=bfloat16" in repr(nn.Variable([1.0], fmt="bf16", name="w"))


def test_tensor_data_is_rounded_to_its_format_on_creation():
    t = nn.Tensor(np.float64([0.1, 1 + 2.0**-8 + 2.0**-40]), fmt="bf16")
    assert t.data.dtype == np.float32
    # rounded once from the float64 bits: no double rounding through float32
    assert np.array_equal(t.data, fpsim.round(np.float64([0.1, 1 + 2.0**-8 + 2.0**-40]), BF16))
    assert t.data[1] == 1.0078125


def test_python_scalar_operand_takes_the_tensor_format():
    t = nn.Tensor([1.0], fmt="fp16")
    assert (t * 0.1).fmt == FP16
    assert (t * 0.1).item() == float(fpsim.round(np.float32(0.1), FP16))


def test_mixing_formats_promotes_to_the_wider_one():
    a, b = nn.Tensor([1.0], fmt="fp16"), nn.Tensor([1.0], fmt="bf16")
    assert (a + nn.Tensor([1.0])).fmt == FP32
    assert (a + b).fmt == FP32  # neither contains the other
    assert (a + nn.Tensor([1.0], fmt="e4m3fn")).fmt == FP16


def test_leaf_gradients_accumulate_across_backward_calls():
    x = nn.Tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    (x * 3.0).sum().backward()
    assert np.array_equal(x.grad.data, [2 + 3, 4 + 3])


def test_intermediate_tensors_keep_their_gradient_of_the_last_pass():
    x = nn.Tensor([1.0, 2.0], requires_grad=True)
    h = x * 2.0
    (h * h).sum().backward()
    assert np.array_equal(h.grad.data, [4.0, 8.0])


def test_no_grad_records_no_graph():
    x = nn.Tensor([1.0], requires_grad=True)
    with nn.no_grad():
        y = x * 2.0
    assert not y.requires_grad and y.is_leaf
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.backward()


def test_backward_is_deterministic():
    def grads():
        x = nn.Tensor(np.linspace(-1, 1, 50), fmt="fp16", requires_grad=True)
        y = ((x * x).exp() + x.tanh() * x).sum() + (x * 0.3).relu().sum()
        y.backward()
        return x.grad.data

    assert np.array_equal(grads(), grads())


def test_numpy_returns_a_copy():
    t = nn.Tensor([1.0])
    t.numpy()[0] = 5
    assert t.item() == 1.0


def test_variable_assign_rounds_to_its_format_in_place_and_checks_the_shape():
    v = nn.Variable(np.zeros(2), fmt="fp16", name="w")
    data = v.data
    v.assign([1.0001, 1e-9])
    assert v.data is data and np.array_equal(v.data, [1.0, 0.0])
    v.assign_sub([2.0**-11, 0.0])  # 1 - 2^-11 is an fp16 value
    assert v.data[0] == 1 - 2.0**-11
    with pytest.raises(ValueError, match=r"shape \(3,\) to variable 'w' of shape \(2,\)"):
        v.assign(np.zeros(3))


def test_variable_defaults_to_the_policy_variable_format():
    with nn.policy_scope("mixed_float16"):
        assert nn.Variable([1.0]).fmt == FP32
    with nn.policy_scope("float16"):
        assert nn.Variable([1.0]).fmt == FP16
    with nn.policy_scope("float64"):
        v = nn.Variable([1.0])
        assert v.fmt is None and v.data.dtype == np.float64


def test_leaf_gradients_own_their_arrays():
    a, b = nn.Variable(np.ones(3), name="a"), nn.Variable(np.ones(3), name="b")
    (a + b).sum().backward()
    assert a.grad.data is not b.grad.data
    assert a.grad.data.flags.writeable and b.grad.data.flags.writeable


# --- nn's rounding kernel against fpsim.round ----------------------------------------------------


def _every_fp16_value_midpoint_and_neighbour() -> np.ndarray:
    codes = np.arange(2**16, dtype=np.uint16)
    values = codes.view(np.float16).astype(np.float32)
    finite = np.sort(values[np.isfinite(values)])
    mids = ((finite[:-1].astype(np.float64) + finite[1:]) / 2).astype(np.float32)
    beyond = np.float32([65504.0, 65519.99, 65520.0, 7e4, np.inf, -np.inf, np.nan])
    around = [np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf))]
    return np.concatenate([values, mids, *around, beyond, -beyond])


def test_kernel_rounding_equals_fpsim_round_on_every_fp16_value_midpoint_and_neighbour():
    x = _every_fp16_value_midpoint_and_neighbour()
    got = round_array(x, FP16)
    assert np.array_equal(got.view(np.uint32), fpsim.round(x, FP16).view(np.uint32))
    with np.errstate(over="ignore"):
        assert np.array_equal(got, x.astype(np.float16).astype(np.float32), equal_nan=True)


@pytest.mark.parametrize("fmt", [BF16, fpsim.E4M3FN, fpsim.E5M2, fpsim.E4M3FNUZ, fpsim.E4M3,
                                 fpsim.TF32, fpsim.E5M2FNUZ, fpsim.E4M3B11FNUZ])
def test_kernel_rounding_equals_fpsim_round_on_random_float32_bit_patterns(fmt):
    bits = np.random.default_rng(7).integers(0, 2**32, 200_000, dtype=np.uint64)
    x = bits.astype(np.uint32).view(np.float32)
    with np.errstate(invalid="ignore"):
        x = np.concatenate([x, x * np.float32(2.0**-100), np.float32([0, -0.0, np.inf, -np.inf])])
    got, want = round_array(x, fmt), fpsim.round(x, fmt)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


def test_rounding_to_float32_is_the_identity_and_float64_is_never_rounded():
    x = np.float32([0.1, 1e-40])
    assert round_array(x, FP32) is x
    y = np.float64([0.1])
    assert round_array(y, None) is y


# --- losses and accuracy against closed forms -----------------------------------------------------


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_losses_equal_their_closed_forms():
    rng = np.random.default_rng(8)
    z = rng.standard_normal((6, 4))
    labels = rng.integers(0, 4, 6)
    onehot = np.eye(4)[labels]
    p = _softmax(z)
    ce = -np.log(p[np.arange(6), labels]).mean()
    losses = nn.losses
    with nn.policy_scope("float64"):
        zt, pt = nn.Tensor(z), nn.Tensor(p)
        assert np.isclose(losses.SparseCategoricalCrossentropy(from_logits=True)(labels, zt).item(),
                          ce)
        assert np.isclose(losses.SparseCategoricalCrossentropy()(labels, pt).item(), ce)
        assert np.isclose(losses.CategoricalCrossentropy(from_logits=True)(onehot, zt).item(), ce)
        assert np.isclose(losses.CategoricalCrossentropy()(onehot, pt).item(), ce)
        assert np.isclose(losses.get("mse")(onehot, pt).item(), ((p - onehot) ** 2).mean())


def test_probability_losses_clip_zero_probabilities_instead_of_returning_inf():
    loss = nn.losses.SparseCategoricalCrossentropy()([0], nn.Tensor([[0.0, 1.0]]))
    assert np.isclose(loss.item(), -np.log(1e-7), rtol=1e-4)


def test_accuracy_reads_sparse_and_one_hot_labels():
    pred = np.float32([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    assert nn.metrics.accuracy([1, 0, 0], pred) == pytest.approx(2 / 3)
    assert nn.metrics.accuracy(np.eye(2)[[1, 0, 0]], nn.Tensor(pred)) == pytest.approx(2 / 3)
    m = nn.metrics.get("accuracy")
    m.update_state([1, 0, 0], pred)
    m.update_state([[1]], pred[:1])
    assert m.result() == pytest.approx(3 / 4)
    with pytest.raises(ValueError, match="do not match"):
        nn.metrics.accuracy([1, 0], pred)


@pytest.mark.parametrize("fmt", ["fp16", "e2m1fn", "float64", "auto"])
def test_zero_dimensional_tensors_stay_zero_dimensional_through_ops_and_gradients(fmt):
    v = nn.Variable(0.5, fmt=fmt, name="s")
    for _ in range(2):
        ((v * v).exp() / v).backward()
    assert v.shape == () and v.grad.shape == () and isinstance(v.grad.data, np.ndarray)
