"""The PyTorch face's ``Conv2d`` holds PyTorch's weights: ``weight`` (out, in, kh, kw) and
``bias`` under the keys ``"weight"``/``"bias"``, made at construction, so a torch 2.13
``Conv2d``'s ``state_dict()`` loads as it is and ours loads into torch, with the same forward.

In fp32 the two libraries sum a window's products in different orders: with small integers
every product and sum is exact and the outputs agree bit for bit; with random weights they agree
to a few fp32 ulps (rtol 1e-6 of the output's scale)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import nn.faces.torch as face

torch = pytest.importorskip("torch")


def as_np(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().float().numpy()
    return np.asarray(value, dtype=np.float32)


ARGS = dict(in_channels=3, out_channels=4, kernel_size=(3, 2), stride=(2, 1), padding=1)


def test_conv2d_weights_have_torchs_shapes_keys_and_exist_at_construction():
    mine, theirs = face.nn.Conv2d(**ARGS), torch.nn.Conv2d(**ARGS)
    assert mine.weight.shape == tuple(theirs.weight.shape) == (4, 3, 3, 2)
    assert {k: v.shape for k, v in mine.state_dict().items()} == {
        k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    assert [p.shape for p in mine.parameters()] == [tuple(p.shape) for p in theirs.parameters()]


@pytest.mark.parametrize("exact", [True, False], ids=["integers", "random"])
def test_a_torch_conv2d_state_dict_loads_and_gives_torchs_forward(exact):
    torch.manual_seed(0)
    theirs = torch.nn.Conv2d(**ARGS)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 3, 6, 5)).astype(np.float32)
    if exact:
        with torch.no_grad():
            theirs.weight.copy_(torch.tensor(rng.integers(-3, 4, (4, 3, 3, 2)).astype(np.float32)))
            theirs.bias.copy_(torch.tensor([1.0, -2.0, 0.5, 0.0]))
        x = rng.integers(-4, 5, x.shape).astype(np.float32)
    mine = face.nn.Conv2d(**ARGS)
    mine.load_state_dict(theirs.state_dict())  # torch tensors, torch's layout
    np.testing.assert_array_equal(as_np(mine.weight), as_np(theirs.weight))
    got, want = as_np(mine(face.tensor(x))), as_np(theirs(torch.tensor(x)))
    assert got.shape == want.shape == (2, 4, 3, 6)
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())


def test_our_conv2d_state_dict_loads_into_torch_and_round_trips():
    face.manual_seed(4)
    mine = face.nn.Conv2d(**ARGS)
    theirs = torch.nn.Conv2d(**ARGS)
    theirs.load_state_dict({k: torch.tensor(v) for k, v in mine.state_dict().items()})
    back = face.nn.Conv2d(**ARGS)
    back.load_state_dict(theirs.state_dict())
    for k, v in mine.state_dict().items():
        np.testing.assert_array_equal(back.state_dict()[k], v)
    x = np.random.default_rng(5).normal(size=(1, 3, 5, 4)).astype(np.float32)
    np.testing.assert_allclose(as_np(back(face.tensor(x))), as_np(theirs(torch.tensor(x))),
                               rtol=1e-6, atol=1e-6)


def test_a_sequential_with_conv2d_loads_torchs_state_dict_by_its_keys():
    def net(T: Any) -> Any:
        return T.nn.Sequential(T.nn.Conv2d(1, 2, 3), T.nn.ReLU(), T.nn.Conv2d(2, 1, 1,
                                                                          bias=False))
    torch.manual_seed(1)
    theirs, mine = net(torch), net(face)
    mine.load_state_dict(theirs.state_dict())
    assert list(mine.state_dict()) == list(theirs.state_dict()) == [
        "0.weight", "0.bias", "2.weight"]
    x = np.random.default_rng(6).normal(size=(2, 1, 5, 5)).astype(np.float32)
    np.testing.assert_allclose(as_np(mine(face.tensor(x))), as_np(theirs(torch.tensor(x))),
                               rtol=1e-6, atol=1e-6)


def test_conv2d_gradients_are_in_torchs_layout():
    torch.manual_seed(2)
    theirs = torch.nn.Conv2d(**ARGS)
    mine = face.nn.Conv2d(**ARGS)
    mine.load_state_dict(theirs.state_dict())
    x = np.random.default_rng(7).normal(size=(2, 3, 6, 5)).astype(np.float32)
    mine(face.tensor(x)).sum().backward()
    theirs(torch.tensor(x)).sum().backward()
    assert mine.weight.grad.shape == tuple(theirs.weight.grad.shape)
    np.testing.assert_allclose(as_np(mine.weight.grad), as_np(theirs.weight.grad), rtol=1e-5,
                               atol=1e-5)
