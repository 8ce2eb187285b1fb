"""Float64 central-difference gradient checks (the independent oracle for every backward)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

import nn

EPS = 1e-6


def numeric_gradients(
    loss: Callable[[], float], arrays: Sequence[np.ndarray], eps: float = EPS
) -> list[np.ndarray]:
    """d loss / d array for each array, by central differences, perturbing the arrays in place."""
    grads = []
    for a in arrays:
        g = np.zeros_like(a, dtype=np.float64)
        for idx in np.ndindex(a.shape):
            old = a[idx]
            a[idx] = old + eps
            up = loss()
            a[idx] = old - eps
            down = loss()
            a[idx] = old
            g[idx] = (up - down) / (2 * eps)
        grads.append(g)
    return grads


def check_op_gradients(
    f: Callable[..., nn.Tensor], *arrays: np.ndarray, seed: int = 0,
    rtol: float = 1e-5, atol: float = 1e-6,
) -> None:
    """Compare backward of ``f(*tensors)`` (weighted by a random upstream gradient) with
    central differences, everything in float64."""
    arrays = [np.array(a, dtype=np.float64) for a in arrays]
    tensors = [nn.Tensor(a, fmt="float64", requires_grad=True) for a in arrays]
    out = f(*tensors)
    weights = np.random.default_rng(seed).standard_normal(out.shape)
    out.backward(weights)

    def loss() -> float:
        with nn.no_grad():
            return float(np.sum(f(*[nn.Tensor(a, fmt="float64") for a in arrays]).data * weights))

    for t, numeric in zip(tensors, numeric_gradients(loss, arrays), strict=True):
        assert t.grad is not None and t.grad.fmt is None and t.grad.shape == t.shape
        np.testing.assert_allclose(t.grad.data, numeric, rtol=rtol, atol=atol)


def check_model_gradients(
    model: nn.Layer, loss_fn: Callable, x: np.ndarray, y: np.ndarray,
    rtol: float = 1e-5, atol: float = 1e-7,
) -> None:
    """Backward of a whole model's loss against central differences on every variable."""
    variables = model.trainable_variables
    for v in variables:
        v.zero_grad()
    loss_fn(y, model(x)).backward()

    def loss() -> float:
        with nn.no_grad():
            return float(loss_fn(y, model(x)).item())

    for v, numeric in zip(variables, numeric_gradients(loss, [v.data for v in variables]),
                          strict=True):
        np.testing.assert_allclose(v.grad.data, numeric, rtol=rtol, atol=atol,
                                   err_msg=f"variable {v.name}")
