"""``torch.autograd`` in the PyTorch face against torch 2.13 CPU: ``grad`` of several outputs
(the sum of their vector-Jacobian products), ``allow_unused``, ``create_graph`` and
``retain_graph`` over several outputs, and ``Function``'s ``ctx.mark_non_differentiable``.

The values are small integers, so every product and sum is exact in fp32 and the two libraries
must agree bit for bit whatever their summation order."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import nn.faces.torch as face

torch = pytest.importorskip("torch")

A = np.array([[1.0, -2.0, 3.0], [4.0, 0.5, -1.0]], np.float32)
B = np.array([[2.0, 1.0, -1.0], [0.5, 3.0, 2.0]], np.float32)
G = np.array([[1.0, 2.0, -1.0], [0.5, -2.0, 4.0]], np.float32)


def as_np(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().float().numpy()
    return np.asarray(value, dtype=np.float32)


def several_outputs(T: Any, create_graph: bool = False) -> list[np.ndarray]:
    x = T.tensor(A, requires_grad=True)
    w = T.tensor(B, requires_grad=True)
    y1 = x * w                       # non-scalar: seeded with G
    y2 = (x * x * w).sum()           # scalar: seeded with 1 (None)
    gx, gw = T.autograd.grad([y1, y2], [x, w], grad_outputs=[T.tensor(G), None],
                             create_graph=create_graph)
    out = [as_np(gx), as_np(gw)]
    if create_graph:  # the sum of both VJPs is itself differentiable
        (ggx,) = T.autograd.grad((gx * gx).sum() + gw.sum(), [x])
        out.append(as_np(ggx))
    return out


@pytest.mark.parametrize("create_graph", [False, True])
def test_grad_of_several_outputs_sums_their_vector_jacobian_products_as_torch(create_graph):
    mine, theirs = several_outputs(face, create_graph), several_outputs(torch, create_graph)
    for m, t in zip(mine, theirs, strict=True):
        np.testing.assert_array_equal(m, t)
    # the independent oracle: d(y1.G + y2)/dx = G*w + 2*x*w, d/dw = G*x + x*x
    np.testing.assert_array_equal(mine[0], G * B + 2 * A * B)
    np.testing.assert_array_equal(mine[1], G * A + A * A)


def shared_and_repeated(T: Any) -> list[np.ndarray]:
    x = T.tensor(A, requires_grad=True)
    h = x * x                        # shared by both outputs
    y1, y2 = h.sum(), (h * T.tensor(B)).sum()
    unused = T.tensor(B, requires_grad=True)
    g = T.autograd.grad([y1, y2, y1], [x, unused], allow_unused=True, retain_graph=True)
    assert g[1] is None
    (again,) = T.autograd.grad([y2], x)  # the graph was retained
    return [as_np(g[0]), as_np(again)]


def test_a_shared_subgraph_and_a_repeated_output_accumulate_as_torch():
    mine, theirs = shared_and_repeated(face), shared_and_repeated(torch)
    for m, t in zip(mine, theirs, strict=True):
        np.testing.assert_array_equal(m, t)
    np.testing.assert_array_equal(mine[0], 2 * A * (2 + B))


def test_grad_of_several_outputs_refuses_what_torch_refuses():
    x = face.tensor(A, requires_grad=True)
    y = x * x
    with pytest.raises(RuntimeError, match=r"outputs\[1\] has shape \(2, 3\).*grad_outputs="):
        face.autograd.grad([y.sum(), y], [x])
    with pytest.raises(RuntimeError, match="grad_outputs has 1 entries but outputs has 2"):
        face.autograd.grad([y.sum(), y.sum()], [x], grad_outputs=[None])
    with pytest.raises(RuntimeError, match=r"outputs\[1\] does not require grad"):
        face.autograd.grad([y.sum(), face.tensor([1.0])], [x])
    with pytest.raises(RuntimeError, match=r"inputs\[1\] was not used.*allow_unused=True"):
        face.autograd.grad([y.sum()], [x, face.tensor([1.0], requires_grad=True)])


# --- ctx.mark_non_differentiable --------------------------------------------------------------

def sort_function(T: Any) -> Any:
    """PyTorch's documented use: values and their (non-differentiable) positions."""

    class SortRows(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            values = x * x                      # differentiable
            order = T.tensor(np.argsort(as_np(x), axis=1).astype(np.float32))
            ctx.mark_non_differentiable(order)
            ctx.save_for_backward(x)
            return values, order

        @staticmethod
        def backward(ctx, g_values, g_order):
            (x,) = ctx.saved_tensors
            assert float(as_np(g_order).sum()) == 0.0 and g_order.shape == x.shape
            return g_values * 2.0 * x

    return SortRows


def marked(T: Any) -> list[Any]:
    x = T.tensor(A, requires_grad=True)
    values, order = sort_function(T).apply(x)
    assert values.requires_grad and not order.requires_grad
    (values * T.tensor(G)).sum().backward()
    return [as_np(values), as_np(order), as_np(x.grad)]


def test_mark_non_differentiable_outputs_get_no_grad_and_zeros_in_backward_as_torch():
    mine, theirs = marked(face), marked(torch)
    for m, t in zip(mine, theirs, strict=True):
        np.testing.assert_array_equal(m, t)
    np.testing.assert_array_equal(mine[2], G * 2 * A)


def test_a_function_with_two_differentiable_outputs_raises_naming_the_fix():
    class Two(face.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * x, x + x

        @staticmethod
        def backward(ctx, a, b):
            raise AssertionError("not reached")

    with pytest.raises(NotImplementedError, match="2 differentiable outputs.*"
                                                  "mark_non_differentiable"):
        Two.apply(face.tensor(A, requires_grad=True))


def backward_of_several(T: Any) -> list[np.ndarray]:
    x = T.tensor(A, requires_grad=True)
    w = T.tensor(B, requires_grad=True)
    T.autograd.backward([x * w, (x * x).sum()], grad_tensors=[T.tensor(G), None])
    return [as_np(x.grad), as_np(w.grad)]


def test_autograd_backward_of_several_tensors_accumulates_as_torch():
    mine, theirs = backward_of_several(face), backward_of_several(torch)
    for m, t in zip(mine, theirs, strict=True):
        np.testing.assert_array_equal(m, t)
    np.testing.assert_array_equal(mine[0], G * B + 2 * A)
