"""Double backward (``create_graph=True``): the engine's backward, recorded, differentiated again.

Oracle: torch 2.13 CPU in float64 against nn's float64 carrier (format None, never rounded), so
every second derivative must agree to float64 rounding; and nn itself for the laws that need no
oracle (a recorded first-order gradient equals the plain one bit for bit).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import nn
from nn import functions as F
from nn.engine.autograd import differentiable_ops, gradients

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(3)
X = RNG.uniform(0.5, 1.5, size=(3, 4))  # positive: log, sqrt and pow stay real
W = RNG.normal(size=(4, 4))
V = RNG.normal(size=(3, 4))  # the direction of the Hessian-vector product
LABELS = np.array([0, 3, 1])

# (name, nn version, torch version): f(x, w) -> a tensor; both sides take the same operands
Op = tuple[str, Callable, Callable]
OPS: list[Op] = [
    ("add", lambda x, w: x + w[:3] * x, lambda x, w: x + w[:3] * x),
    ("sub", lambda x, w: x * x - w[:3], lambda x, w: x * x - w[:3]),
    ("mul", lambda x, w: x * x * w[:3], lambda x, w: x * x * w[:3]),
    ("div", lambda x, w: w[:3] / x, lambda x, w: w[:3] / x),
    ("neg", lambda x, w: -(x * x), lambda x, w: -(x * x)),
    ("pow", lambda x, w: x ** 3.0, lambda x, w: x ** 3.0),
    ("square", lambda x, w: F.pow(x, 2) * w[:3], lambda x, w: x.square() * w[:3]),
    ("sqrt", lambda x, w: F.sqrt(x) * w[:3], lambda x, w: x.sqrt() * w[:3]),
    ("exp", lambda x, w: F.exp(x * w[:3]), lambda x, w: (x * w[:3]).exp()),
    ("log", lambda x, w: F.log(x) * x, lambda x, w: x.log() * x),
    ("tanh", lambda x, w: F.tanh(x @ w), lambda x, w: (x @ w).tanh()),
    ("sigmoid", lambda x, w: F.sigmoid(x @ w), lambda x, w: (x @ w).sigmoid()),
    ("relu", lambda x, w: F.relu(x @ w) * x, lambda x, w: (x @ w).relu() * x),
    ("sum", lambda x, w: (x * x).sum(axis=1) * x.sum(), lambda x, w: (x * x).sum(1) * x.sum()),
    ("mean", lambda x, w: (x * x).mean(axis=0) * x, lambda x, w: (x * x).mean(0) * x),
    ("matmul", lambda x, w: (x @ w) * (x @ w), lambda x, w: (x @ w) * (x @ w)),
    ("linear", lambda x, w: F.linear(x, w, w[0]) ** 2.0,
     lambda x, w: torch.nn.functional.linear(x, w.T, w[0]) ** 2.0),
    ("linear_relu", lambda x, w: F.linear(x, w, None, "relu") * x,
     lambda x, w: torch.relu(x @ w) * x),
    ("reshape_transpose", lambda x, w: (x * x).reshape(4, 3).T * x,
     lambda x, w: (x * x).reshape(4, 3).T * x),
    ("getitem", lambda x, w: (x * x)[1:] * x[:2], lambda x, w: (x * x)[1:] * x[:2]),
    ("softmax", lambda x, w: F.softmax(x @ w) * x, lambda x, w: (x @ w).softmax(-1) * x),
    ("log_softmax", lambda x, w: F.log_softmax(x @ w) * x,
     lambda x, w: (x @ w).log_softmax(-1) * x),
    ("cross_entropy", lambda x, w: F.sparse_softmax_cross_entropy(x @ w, LABELS),
     lambda x, w: torch.nn.functional.cross_entropy(x @ w, torch.tensor(LABELS),
                                                    reduction="none")),
    ("mse", lambda x, w: nn.MSELoss()(x @ w, V), lambda x, w: ((x @ w - torch.tensor(V)) ** 2)
     .mean()),
]


def _nn_hvp(f: Callable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = nn.Tensor(X, fmt="float64", requires_grad=True)
    w = nn.Tensor(W, fmt="float64", requires_grad=True)
    (gx,) = gradients(f(x, w).sum(), [x], create_graph=True)
    hx, hw = gradients((gx * nn.Tensor(V, fmt="float64")).sum(), [x, w])
    return gx.numpy(), (np.zeros_like(X) if hx is None else hx.numpy()), (
        np.zeros_like(W) if hw is None else hw.numpy())


def _torch_hvp(f: Callable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = torch.tensor(X, requires_grad=True)
    w = torch.tensor(W, requires_grad=True)
    (gx,) = torch.autograd.grad(f(x, w).sum(), [x], create_graph=True)
    hx, hw = torch.autograd.grad((gx * torch.tensor(V)).sum(), [x, w], allow_unused=True)
    zero = np.zeros_like
    return (gx.detach().numpy(), zero(X) if hx is None else hx.numpy(),
            zero(W) if hw is None else hw.numpy())


@pytest.mark.parametrize("name,nn_f,torch_f", OPS, ids=[op[0] for op in OPS])
def test_second_derivatives_equal_torchs_in_float64(name, nn_f, torch_f):
    for mine, theirs in zip(_nn_hvp(nn_f), _torch_hvp(torch_f), strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-10, atol=1e-12)


def test_every_core_op_declares_a_differentiable_backward():
    core = {"Add", "Sub", "Mul", "Div", "Neg", "Pow", "Exp", "Log", "Sqrt", "Tanh", "Sigmoid",
            "ReLU", "Sum", "Mean", "MatMul", "Linear", "Reshape", "Transpose", "Softmax",
            "LogSoftmax", "SparseSoftmaxCrossEntropy", "Cast", "GetItem", "BroadcastTo"}
    assert core <= differentiable_ops()


@pytest.mark.parametrize("fmt", ["float16", "bfloat16", "float32"])
def test_a_recorded_gradient_equals_the_plain_one_bit_for_bit(fmt):
    """create_graph changes what is recorded, never a value: the composed softmax and
    cross-entropy backwards equal their kernels, FitGradient equals the gradient rule."""
    nn.set_random_seed(0)
    model = nn.Sequential([nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4)])
    x = nn.Tensor(X.astype(np.float32), fmt=fmt)

    def loss() -> nn.Tensor:
        z = model(x)
        return nn.CrossEntropyLoss()(z, LABELS) + F.softmax(z).sum() * 0.5

    params = list(model.parameters())
    plain = gradients(loss(), params)
    recorded = gradients(loss(), params, create_graph=True)
    for p, r in zip(plain, recorded, strict=True):
        assert r is not None and r.requires_grad
        np.testing.assert_array_equal(p.numpy(), r.numpy())


@pytest.mark.parametrize("op,name", [
    (lambda x: F.max_pool2d(x.reshape(1, 2, 6, 1), 2, 2), "MaxPool2D"),
    (lambda x: F.conv2d(x.reshape(1, 3, 4, 1), nn.Tensor(np.ones((1, 1, 1, 2)),
                                                          fmt="float64")), "Patches"),
])
def test_differentiating_through_an_op_without_double_backward_raises_naming_it(op, name):
    x = nn.Tensor(X, fmt="float64", requires_grad=True)
    (gx,) = gradients((op(x) ** 2.0).sum(), [x], create_graph=True)
    np.testing.assert_array_equal(gx.numpy(), gradients((op(x) ** 2.0).sum(), [x])[0].numpy())
    with pytest.raises(RuntimeError, match=f"{name} has no double backward"):
        gradients((gx * gx).sum(), [x])


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_backward_with_create_graph_leaves_a_differentiable_grad_as_torch():
    w = nn.Tensor(np.array([3.0]), fmt="float64", requires_grad=True)
    (w * w * w).sum().backward(create_graph=True)
    assert w.grad is not None and w.grad.requires_grad
    first = w.grad
    w.grad = None
    first.sum().backward()
    tw = torch.tensor([3.0], dtype=torch.float64, requires_grad=True)
    (tw * tw * tw).sum().backward(create_graph=True)
    tfirst = tw.grad
    tw.grad = None
    tfirst.sum().backward()
    assert first.numpy()[0] == tfirst.item() == 27.0
    assert w.grad.numpy()[0] == tw.grad.item() == 18.0


def test_a_second_backward_without_retain_graph_raises_as_torch():
    x = nn.Tensor(X, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time.*"
                                           "retain_graph=True"):
        y.backward()
    tx = torch.tensor(X, requires_grad=True)
    ty = (tx * tx).sum()
    ty.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        ty.backward()


def test_retain_graph_true_allows_a_second_backward_that_accumulates_as_torch():
    x = nn.Tensor(X, fmt="float64", requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    tx = torch.tensor(X, requires_grad=True)
    ty = (tx * tx).sum()
    ty.backward(retain_graph=True)
    ty.backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


def test_backward_flags_must_be_bools():
    y = (nn.Tensor(X, requires_grad=True) * 2.0).sum()
    with pytest.raises(TypeError, match="create_graph must be True, False or None, got 'yes'"):
        y.backward(create_graph="yes")
