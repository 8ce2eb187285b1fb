"""Float64 central-difference checks of a layer call: gradients of the inputs and of every
trainable variable (the oracle for the layers' backward passes)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from nn_gradcheck import numeric_gradients

import nn


def check_layer_gradients(
    call: Callable[..., nn.Tensor], inputs: Sequence[np.ndarray],
    variables: Sequence[nn.Variable] = (), seed: int = 0, rtol: float = 1e-5,
    atol: float = 1e-7,
) -> None:
    """``call(*tensors)`` under float64: backward (weighted by a random upstream gradient)
    against central differences, for each input and each variable in ``variables``.

    Call it once before, so that the layer is built and ``variables`` exist.
    """
    arrays = [np.array(a, dtype=np.float64) for a in inputs]
    tensors = [nn.Tensor(a, fmt="float64", requires_grad=True) for a in arrays]
    for v in variables:
        v.zero_grad()
    out = call(*tensors)
    weights = np.random.default_rng(seed).standard_normal(out.shape)
    out.backward(weights)

    def loss() -> float:
        with nn.no_grad():
            y = call(*[nn.Tensor(a, fmt="float64") for a in arrays])
            return float(np.sum(y.data * weights))

    numeric = numeric_gradients(loss, [*arrays, *[v.data for v in variables]])
    for t, g in zip([*tensors, *variables], numeric, strict=True):
        assert t.grad is not None, f"no gradient for {getattr(t, 'name', None) or 'an input'}"
        np.testing.assert_allclose(t.grad.data, g, rtol=rtol, atol=atol,
                                   err_msg=getattr(t, "name", None) or "input")
