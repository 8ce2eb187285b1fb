"""``nn.GradientTape``: fresh gradients, nothing written to ``.grad``, TF's one-shot rule."""

from __future__ import annotations

import numpy as np
import pytest

import nn

RNG = np.random.default_rng(7)
X = RNG.normal(size=(4, 3))
W0 = RNG.normal(size=(3, 2))


def _f64(w: np.ndarray) -> float:
    """The oracle's function in plain float64 numpy: sum(tanh(X @ w) ** 2)."""
    return float((np.tanh(X @ w) ** 2).sum())


def _central_differences(w: np.ndarray, h: float = 1e-6) -> np.ndarray:
    grad = np.zeros_like(w)
    for i in np.ndindex(w.shape):
        up, down = w.copy(), w.copy()
        up[i] += h
        down[i] -= h
        grad[i] = (_f64(up) - _f64(down)) / (2 * h)
    return grad


def test_tape_gradient_matches_float64_central_differences():
    with nn.policy_scope("float64"):
        w = nn.Variable(W0, name="w")
        with nn.GradientTape() as tape:
            loss = ((nn.Tensor(X) @ w).tanh() ** 2).sum()
        (g,) = tape.gradient(loss, [w])
    np.testing.assert_allclose(g.numpy(), _central_differences(W0), rtol=1e-6, atol=1e-9)


def test_tape_gradient_equals_backward_and_leaves_grad_untouched():
    w = nn.Variable(W0.astype(np.float32), name="w")
    x = nn.Tensor(X.astype(np.float32))
    with nn.GradientTape() as tape:
        loss = ((x @ w).tanh() ** 2).sum()
    g = tape.gradient(loss, w)
    assert w.grad is None
    loss.backward()
    np.testing.assert_array_equal(g.numpy(), w.grad.numpy())
    assert g.dtype == w.dtype == "float32" and g.is_leaf and not g.requires_grad


def test_gradients_of_two_tape_steps_are_independent():
    w = nn.Variable(W0.astype(np.float32), name="w")
    x = nn.Tensor(X.astype(np.float32))
    grads = []
    for _ in range(2):
        with nn.GradientTape() as tape:
            loss = ((x @ w) ** 2).sum()
        grads.append(tape.gradient(loss, [w])[0])
    np.testing.assert_array_equal(grads[0].numpy(), grads[1].numpy())  # no accumulation
    assert grads[0].data is not grads[1].data and w.grad is None


def test_a_non_persistent_tape_answers_once_and_a_persistent_one_again():
    w = nn.Variable([2.0], name="w")
    with nn.GradientTape() as tape:
        y = (w * w).sum()
    assert tape.gradient(y, w).numpy() == [4.0]
    with pytest.raises(RuntimeError, match="persistent=True"):
        tape.gradient(y, w)
    with nn.GradientTape(persistent=True) as tape:
        y = (w * w * w).sum()
    assert tape.gradient(y, w).numpy() == [12.0] and tape.gradient(y, [w])[0].numpy() == [12.0]


def test_sources_keep_their_structure_and_unconnected_ones_get_none():
    a, b, c = nn.Variable([1.0], name="a"), nn.Variable([3.0], name="b"), nn.Variable([5.0])
    with nn.GradientTape(persistent=True) as tape:
        y = (a * b).sum()
    got = tape.gradient(y, {"a": a, "b": b, "c": c})
    assert list(got) == ["a", "b", "c"] and got["c"] is None
    assert got["a"].numpy() == [3.0] and got["b"].numpy() == [1.0]
    listed = tape.gradient(y, (a, a))  # a source listed twice gets the gradient twice
    assert isinstance(listed, list) and listed[0].numpy() == listed[1].numpy() == [3.0]
    assert listed[0].data is not listed[1].data


def test_a_non_scalar_target_is_differentiated_as_its_sum_unless_output_gradients_is_given():
    w = nn.Variable([1.0, 2.0], name="w")
    with nn.GradientTape(persistent=True) as tape:
        y = w * w
    np.testing.assert_array_equal(tape.gradient(y, w).numpy(), [2.0, 4.0])
    np.testing.assert_array_equal(tape.gradient(y, w, output_gradients=[1.0, 0.0]).numpy(),
                                  [2.0, 0.0])


def test_watch_makes_a_plain_tensor_differentiable_until_the_block_ends():
    x = nn.Tensor([3.0])
    with nn.GradientTape() as tape:
        tape.watch(x)
        y = (x * x).sum()
    assert not x.requires_grad  # restored on exit
    assert tape.gradient(y, x).numpy() == [6.0]


def test_without_watch_accessed_variables_only_watched_sources_get_gradients():
    a, b = nn.Variable([2.0], name="a"), nn.Variable([3.0], name="b")
    with nn.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(a)
        y = (a * b).sum()
    ga, gb = tape.gradient(y, [a, b])
    assert ga.numpy() == [3.0] and gb is None


def test_a_target_without_graph_gives_none_for_every_source():
    w = nn.Variable([1.0])
    with nn.GradientTape() as tape:
        y = nn.Tensor([2.0]) * 3.0
    assert tape.gradient(y, [w]) == [None]


def test_bad_tape_arguments_raise_naming_them():
    with pytest.raises(TypeError, match="persistent must be True or False"):
        nn.GradientTape(persistent=1)  # type: ignore[arg-type]
    w = nn.Variable([1.0])
    with nn.GradientTape() as tape:
        y = (w * w).sum()
    with pytest.raises(TypeError, match=r"sources\[1\] is a ndarray"):
        tape.gradient(y, [w, np.ones(1)])
    with pytest.raises(TypeError, match="target must be one nn.Tensor"):
        tape.gradient([y, y], [w])
    with pytest.raises(TypeError, match="wrap arrays with nn.Tensor"):
        tape.watch(np.ones(2))  # type: ignore[arg-type]


def test_stop_recording_records_no_graph():
    w = nn.Variable([1.0])
    with nn.GradientTape() as tape:
        with tape.stop_recording():
            y = w * 2.0
    assert not y.requires_grad


def test_nested_tapes_give_the_second_derivative_as_tensorflow():
    """TensorFlow: d2(w^3)/dw2 at w = 3 is 18 (issue 26's nested tape, once None)."""
    w = nn.Variable(np.float32(3.0), fmt="float32")
    with nn.GradientTape() as outer:
        with nn.GradientTape() as inner:
            y = w * w * w
        dy = inner.gradient(y, w)
    assert dy.item() == 27.0
    assert outer.gradient(dy, w).item() == 18.0


def test_a_tape_outside_any_other_records_nothing_extra():
    w = nn.Variable(np.float32(3.0), fmt="float32")
    with nn.GradientTape() as tape:
        y = w * w * w
    dy = tape.gradient(y, w)
    assert not dy.requires_grad


def test_nested_tapes_through_an_op_without_double_backward_raise_naming_it():
    x = nn.Variable(np.arange(12, dtype=np.float32).reshape(1, 2, 6, 1), fmt="float32")
    with nn.GradientTape() as outer:
        with nn.GradientTape() as inner:
            y = (nn.functions.max_pool2d(x, 2, 2) ** 2.0).sum()
        dy = inner.gradient(y, x)
    with pytest.raises(RuntimeError, match="MaxPool2D has no double backward"):
        outer.gradient((dy * dy).sum(), x)
