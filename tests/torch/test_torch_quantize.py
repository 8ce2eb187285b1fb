"""fpsim.torch.quantize: fpsim.torch.round (or fpsim.torch.mx.quantize) forward, the gradient
passed straight through in backward."""

from __future__ import annotations

import numpy as np
import pytest
from torch_device import DEVICE

import fpsim

torch = pytest.importorskip("torch")
import fpsim.torch as ft  # noqa: E402


def _leaf(seed: int = 0, n: int = 200) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, generator=g) * 300).to(DEVICE).requires_grad_(True)


@pytest.mark.parametrize("fmt,kw", [("fp16", {}), ("e4m3fn", {"overflow": "saturate"}),
                                    ("e5m2", {"subnormals": False}), ("e2m1fn", {}),
                                    ("e4m3fnuz", {})])
def test_quantize_forward_is_fpsim_round(fmt, kw):
    w = _leaf()
    for mode in ("nearest_even", "toward_zero", "odd"):
        want = fpsim.round(w.detach().cpu().numpy(), fmt, mode, **kw)
        np.testing.assert_array_equal(ft.quantize(w, fmt, mode, **kw).detach().cpu().numpy(),
                                      want)


def test_quantize_forward_is_fpsim_mx_for_block_formats():
    w = _leaf(n=96).reshape(3, 32)
    want = fpsim.mx.quantize(w.detach().cpu().numpy(), "nvfp4", axis=0)
    got = ft.quantize(w, "nvfp4", axis=0).detach().cpu().numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fmt", ["fp16", "e4m3fn", "mxfp4_e2m1"])
def test_quantize_backward_passes_the_gradient_straight_through(fmt):
    w = _leaf()
    upstream = torch.randn(200, device=DEVICE)
    (grad,) = torch.autograd.grad(ft.quantize(w, fmt), w, upstream)
    assert torch.equal(grad, upstream)  # not the true derivative (zero almost everywhere)


def test_quantize_trains_a_weight_through_rounding():
    """Quantization-aware training: the gradient reaches the fp32 master through the STE."""
    w = torch.tensor([0.3, 500.0], device=DEVICE, requires_grad=True)
    q = ft.quantize(w, "e4m3fn", overflow="saturate")
    (q * torch.tensor([2.0, 3.0], device=DEVICE)).sum().backward()
    assert q.detach().cpu().tolist() == [0.3125, 448.0]
    assert w.grad.cpu().tolist() == [2.0, 3.0]


def test_quantize_refuses_element_options_for_block_formats():
    with pytest.raises(ValueError, match="block format mxfp8_e4m3"):
        ft.quantize(torch.ones(4), "mxfp8_e4m3", overflow="saturate")
    with pytest.raises(TypeError, match="torch.Tensor"):
        ft.quantize(np.ones(3), "fp16")
