"""Per-tensor fp8 recipes in fpsim.torch.emulate: the same numbers as nn.fp8's DelayedScaling and
CurrentScaling for the same Linear (forward, backward, scales and amax histories), the other
products in the compute format, the policy's options."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
from torch_device import DEVICE

import fpsim

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import fpsim.torch as ft  # noqa: E402
from fpsim.torch.fp8 import PER_TENSOR_RECIPES, PerTensorScaling, ScalingState  # noqa: E402

nn = pytest.importorskip("nn")
from nn.engine.tensor import Tensor  # noqa: E402


def _grad(t: object) -> np.ndarray:
    return np.asarray(getattr(t, "data", t))


@pytest.mark.parametrize("policy", sorted(PER_TENSOR_RECIPES))
def test_an_emulated_linear_computes_what_nns_fp8_recipe_computes(policy):
    """Four steps of a Linear under the recipe, the input growing tenfold each step (so delayed
    scaling saturates): outputs, input, weight and bias gradients bit for bit nn's, and every
    tensor's scale, amax history and step count equal to nn.fp8's state."""
    rng = np.random.default_rng(0)
    dense = nn.Dense(3, dtype=policy, name="fc")
    dense.build((None, 5))
    w, b = rng.normal(size=(5, 3)).astype(np.float32), rng.normal(size=3).astype(np.float32)
    dense.set_weights([w, b])
    linear = torch.nn.Linear(5, 3)
    with torch.no_grad():
        linear.weight.copy_(torch.from_numpy(w.T.copy()))
        linear.bias.copy_(torch.from_numpy(b))
    model = ft.emulate(torch.nn.Sequential(OrderedDict(fc=linear)).to(DEVICE), policy)
    for step in range(4):
        xs = rng.normal(size=(4, 5)).astype(np.float32) * 10.0 ** (step - 1)
        gs = fpsim.round(rng.normal(size=(4, 3)).astype(np.float32) * 10.0**-step, "bf16")
        x = Tensor(xs, requires_grad=True)
        y = dense(x)
        y.backward(gs)
        tx = torch.from_numpy(xs).to(DEVICE).requires_grad_(True)
        ty = model(tx)
        ty.backward(torch.from_numpy(gs).to(DEVICE))
        np.testing.assert_array_equal(ty.detach().cpu().numpy(), y.data)
        np.testing.assert_array_equal(tx.grad.cpu().numpy(), _grad(x.grad))
        np.testing.assert_array_equal(linear.weight.grad.cpu().numpy().T,
                                      _grad(dense.kernel.grad))
        np.testing.assert_array_equal(linear.bias.grad.cpu().numpy(), _grad(dense.bias.grad))
        dense.kernel.grad = dense.bias.grad = None
        linear.zero_grad(set_to_none=True)
    ours = model.fpsim_emulation.states
    theirs = dense.policy.recipe.states
    assert sorted(ours) == sorted(n.replace("/Linear/", "/linear/") for n in theirs)
    for name, state in theirs.items():
        mine = ours[name.replace("/Linear/", "/linear/")]
        assert (mine.scale, mine.steps, mine.fmt) == (state.scale, state.steps, state.fmt)
        np.testing.assert_array_equal(mine.amax_history, state.amax_history)
    if "delayed" in policy:  # the growing input saturated under the earlier steps' scale
        assert any(r.saturated for r in dense.policy.recipe.log.records)


def test_other_products_run_in_the_compute_format_under_a_per_tensor_recipe():
    """conv (as attention and baddbmm) is not fp8 under a per-tensor recipe: its operands and
    output are rounded to bf16, the same as under "mixed_bfloat16"; it keeps no scaling state."""
    torch.manual_seed(0)
    conv = torch.nn.Conv1d(3, 4, 3).to(DEVICE)
    x = torch.randn(2, 3, 9, generator=torch.Generator().manual_seed(1)).to(DEVICE)
    got = ft.emulate(conv, "fp8_hybrid_delayed")(x)
    assert conv.fpsim_emulation.states == {}
    conv.fpsim_emulation.remove()
    b16 = lambda t: torch.from_numpy(fpsim.round(t.detach().cpu().numpy(), "bf16"))  # noqa: E731
    want = b16(F.conv1d(b16(x), b16(conv.weight), b16(conv.bias)))
    assert torch.equal(got.cpu(), want)


def test_a_matmul_is_scaled_per_tensor_and_the_monitor_counts_its_fp8_casts():
    class MatMul(torch.nn.Module):
        def forward(self, a, b):
            return a @ b

    a = torch.randn(4, 6, generator=torch.Generator().manual_seed(2)).to(DEVICE) * 1e-3
    b = torch.randn(6, 5, generator=torch.Generator().manual_seed(3)).to(DEVICE) * 1e3
    model = ft.emulate(MatMul(), "fp8_e4m3_current")
    with fpsim.monitor() as m:
        got = model(a, b)
    states = model.fpsim_emulation.states
    assert sorted(states) == ["matmul/a", "matmul/b"]
    # current scaling: scale = 448 / amax of the bf16-rounded operand, in float32
    for name, x in (("matmul/a", a), ("matmul/b", b)):
        amax = np.float32(np.abs(fpsim.round(x.cpu().numpy(), "bf16")).max())
        assert states[name].scale == float(np.float32(448.0) / amax)
    # oracle: fpsim.round (numpy) of the scaled operands, the product in float64
    qa, qb = (fpsim.round(fpsim.round(x.cpu().numpy(), "bf16").astype(np.float64)
                          * states[n].scale, "e4m3fn", overflow="saturate")
              for n, x in (("matmul/a", a), ("matmul/b", b)))
    inv = np.float32(1 / np.float32(states["matmul/a"].scale)) * np.float32(
        1 / np.float32(states["matmul/b"].scale))
    want = fpsim.round((qa @ qb).astype(np.float32) * inv, "bf16")
    np.testing.assert_array_equal(got.cpu().numpy(), want)
    assert m.counts["matmul/a"]["elements"] == 24 and m.counts["matmul/b"]["elements"] == 30


def test_scaling_state_follows_the_delayed_rule_on_a_window():
    state = ScalingState(PerTensorScaling(amax_history_len=2), fpsim.get_format("e4m3fn"))
    assert state.scale == 1.0
    assert [state.update(a) for a in (2.0, 1.0, 1.0, 0.0)] == [224.0, 224.0, 448.0, 448.0]
    assert state.update(float("nan")) == 448.0  # a NaN amax keeps the scale


def test_reduce_amax_is_an_option_of_the_per_tensor_recipes_only():
    assert ft.get_policy("fp8_hybrid_delayed").scaling.reduce_amax  # TE's default
    assert not ft.get_policy("fp8_e4m3_current", reduce_amax=False).scaling.reduce_amax
    with pytest.raises(ValueError, match="reduce_amax applies to the per-tensor fp8 recipes"):
        ft.get_policy("mixed_float16", reduce_amax=False)
    p = ft.get_policy("fp8_hybrid_current")
    assert (p.compute_format.name, p.scaling.format(True).name) == ("bfloat16", "float8_e5m2")
