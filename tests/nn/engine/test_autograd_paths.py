"""A tensor reached along paths of different lengths gets the gradient of every path.

(The engine once ordered such graphs wrongly: ``(w * w * w).backward()`` gave 4w instead of 3w^2,
the longer path's gradient dropped.) Oracle: float64 central differences of the same function
written in numpy.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import nn

W0 = np.array([0.7, -1.3, 2.1])


def _central_differences(f: Callable[[np.ndarray], float], w: np.ndarray,
                         h: float = 1e-6) -> np.ndarray:
    grad = np.zeros_like(w)
    for i in range(w.size):
        up, down = w.copy(), w.copy()
        up[i] += h
        down[i] -= h
        grad[i] = (f(up) - f(down)) / (2 * h)
    return grad


CASES = {
    "w*w*w": (lambda w: (w * w * w).sum(), lambda w: float((w * w * w).sum())),
    "w*(w*w)": (lambda w: (w * (w * w)).sum(), lambda w: float((w * (w * w)).sum())),
    "w+tanh(w)*w+exp(tanh(w))": (
        lambda w: (w + w.tanh() * w + w.tanh().exp()).sum(),
        lambda w: float((w + np.tanh(w) * w + np.exp(np.tanh(w))).sum())),
    "a=w*w; a*a*w+a": (
        lambda w: ((w * w) * (w * w) * w + w * w).sum(),
        lambda w: float((w**5 + w**2).sum())),
}


@pytest.mark.parametrize("name", list(CASES))
def test_backward_sums_the_gradients_of_paths_of_different_lengths(name):
    f_nn, f_np = CASES[name]
    with nn.policy_scope("float64"):
        w = nn.Variable(W0, name="w")
        f_nn(w).backward()
    np.testing.assert_allclose(w.grad.numpy(), _central_differences(f_np, W0), rtol=1e-6)


@pytest.mark.parametrize("name", list(CASES))
def test_tape_gradient_sums_the_gradients_of_paths_of_different_lengths(name):
    f_nn, f_np = CASES[name]
    with nn.policy_scope("float64"):
        w = nn.Variable(W0, name="w")
        with nn.GradientTape() as tape:
            y = f_nn(w)
        g = tape.gradient(y, w)
    np.testing.assert_allclose(g.numpy(), _central_differences(f_np, W0), rtol=1e-6)
