"""fpsim.torch.emulate: products with operands rounded to the compute format, fp32
accumulation, the output rounded once; gradients rounded to each tensor's format; fp32 master
weights; torch.amp.GradScaler unchanged; monitor sites; policies by nn's names."""

from __future__ import annotations

import math

import numpy as np
import pytest
from torch_device import DEVICE

import fpsim

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import fpsim.torch as ft  # noqa: E402
from fpsim.torch.emulate import PRODUCTS  # noqa: E402


def r16(t: torch.Tensor) -> torch.Tensor:
    """The oracle's rounding: fpsim.round (numpy) to fp16, back as a float32 tensor."""
    return torch.from_numpy(fpsim.round(t.detach().cpu().numpy(), "fp16")).to(DEVICE)


def seeded(*shape: int, seed: int = 0, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(DEVICE)


def test_linear_rounds_operands_accumulates_in_fp32_and_rounds_the_output_once():
    torch.manual_seed(0)
    layer = torch.nn.Linear(16, 8).to(DEVICE)
    x = seeded(5, 16, scale=3.0)
    want = r16(F.linear(r16(x), r16(layer.weight), r16(layer.bias)))
    got = ft.emulate(layer, "mixed_float16")(x)
    assert torch.equal(got, want)
    # independent of torch's product: within half an fp16 ulp (plus fp32's error) of the
    # float64 product of the rounded operands
    exact = (r16(x).double() @ r16(layer.weight).double().T + r16(layer.bias).double())
    ulp = torch.from_numpy(fpsim.ulp(exact.cpu().numpy(), "fp16")).to(DEVICE)
    assert torch.all((got.double() - exact).abs() <= ulp / 2 + exact.abs() * 2**-20)


def test_linear_gradients_are_rounded_to_the_compute_format():
    torch.manual_seed(1)
    layer = ft.emulate(torch.nn.Linear(6, 4).to(DEVICE), "mixed_float16")
    x = seeded(3, 6, seed=2).requires_grad_(True)
    upstream = seeded(3, 4, seed=3, scale=1e-3)
    layer(x).backward(upstream)
    g = r16(upstream)
    xq, wq = r16(x), r16(layer.weight)
    assert torch.equal(x.grad, r16(g @ wq))
    assert torch.equal(layer.weight.grad, r16(g.T @ xq))
    assert torch.equal(layer.bias.grad, r16(g.sum(0)))
    assert layer.weight.dtype == torch.float32  # the fp32 master is kept


def test_an_activation_gradient_below_fp16s_range_underflows_to_zero():
    layer = ft.emulate(torch.nn.Linear(2, 2, bias=False).to(DEVICE), "mixed_float16")
    x = torch.ones(1, 2, device=DEVICE)
    layer(x).backward(torch.full((1, 2), 1e-8, device=DEVICE))
    assert torch.count_nonzero(layer.weight.grad) == 0  # 1e-8 < 2^-25: rounds to 0 in fp16
    plain = torch.nn.Linear(2, 2, bias=False).to(DEVICE)
    plain(x).backward(torch.full((1, 2), 1e-8, device=DEVICE))
    assert torch.count_nonzero(plain.weight.grad) == 4


@pytest.mark.parametrize("conv,shape", [(torch.nn.Conv1d(3, 4, 3, padding=1), (2, 3, 9)),
                                        (torch.nn.Conv2d(3, 4, 3, stride=2), (2, 3, 8, 8))])
def test_conv_forward_and_backward_follow_the_same_rule(conv, shape):
    conv = conv.to(DEVICE)
    fn = F.conv1d if isinstance(conv, torch.nn.Conv1d) else F.conv2d
    args = (conv.stride, conv.padding, conv.dilation, conv.groups)
    x = seeded(*shape, seed=4).requires_grad_(True)
    xq, wq, bq = r16(x).requires_grad_(True), r16(conv.weight).requires_grad_(True), r16(
        conv.bias)
    want_out = fn(xq, wq, bq, *args)
    got = ft.emulate(conv, "mixed_float16")(x)
    assert torch.equal(got, r16(want_out))
    upstream = seeded(*got.shape, seed=5)
    got.backward(upstream)
    gx, gw = torch.autograd.grad(want_out, (xq, wq), r16(upstream))
    assert torch.equal(x.grad, r16(gx)) and torch.equal(conv.weight.grad, r16(gw))


class Products(torch.nn.Module):
    """Every product emulate catches, called the way model code calls them."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        q = a.reshape(1, 2, 4, 8)
        out = (a @ b).sum() + torch.matmul(a, b).sum() + a.matmul(b).sum()
        out = out + torch.mm(a, b).sum() + a.mm(b).sum()
        out = out + torch.bmm(a[None], b[None]).sum() + a[None].bmm(b[None]).sum()
        out = out + torch.baddbmm(a[None], a[None], b[None]).sum()
        out = out + a[None].baddbmm(a[None], b[None], beta=0.5).sum()
        out = out + F.scaled_dot_product_attention(q, q, q).sum()
        w = b.T[:3]
        out = out + F.linear(a, w).sum()
        out = out + F.conv1d(a[None], b[:, :, None].permute(1, 0, 2)[:2]).sum()
        return out + F.conv2d(a[None, None], b[None, None, :2, :2]).sum()


def test_every_product_in_the_table_is_caught_and_rounds_its_operands():
    a, b = seeded(8, 8, seed=6), seeded(8, 8, seed=7)
    model = ft.emulate(Products(), "mixed_bfloat16")
    with fpsim.monitor() as m:
        model(a, b)
    caught = {site.split("/")[0] for site in m.counts}
    assert caught == {p.name for p in PRODUCTS.values()}
    assert m.counts["matmul/a"]["elements"] == 7 * 64  # seven matmul spellings
    assert m.counts["attention/query"]["elements"] == 64


def test_matmul_output_equals_rounded_operands_product_rounded_once():
    class Attn(torch.nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v) + (q @ k.transpose(-1, -2)).mean()

    q, k, v = (seeded(2, 5, 8, seed=s) for s in (8, 9, 10))
    got = ft.emulate(Attn(), "mixed_float16")(q, k, v)
    att = r16(F.scaled_dot_product_attention(r16(q), r16(k), r16(v)))
    want = att + r16(r16(q) @ r16(k).transpose(-1, -2)).mean()
    assert torch.equal(got, want)


def test_block_recipe_quantizes_operands_along_the_reduced_axis():
    torch.manual_seed(2)
    layer = torch.nn.Linear(64, 8).to(DEVICE)
    x = seeded(4, 64, seed=11, scale=10.0)
    b16 = lambda t: ft.round(t.detach(), "bf16")  # noqa: E731
    want = b16(F.linear(ft.mx.quantize(x, "mxfp8_e4m3"),
                        ft.mx.quantize(layer.weight.detach(), "mxfp8_e4m3"), b16(layer.bias)))
    assert torch.equal(ft.emulate(layer, "mxfp8")(x), want)
    # the operands really are MX values: fpsim.mx (numpy) is the oracle of the quantization
    np.testing.assert_array_equal(ft.mx.quantize(x, "mxfp8_e4m3").cpu().numpy(),
                                  fpsim.mx.quantize(x.cpu().numpy(), "mxfp8_e4m3"))


def test_remove_restores_plain_float32_and_float32_policy_changes_nothing():
    torch.manual_seed(3)
    layer = torch.nn.Linear(5, 3).to(DEVICE)
    x = seeded(2, 5, seed=12)
    plain = layer(x)
    assert torch.equal(ft.emulate(layer, "float32")(x), plain)
    layer.fpsim_emulation.remove()
    ft.emulate(layer, "mixed_float16")
    assert not torch.equal(layer(x), plain)
    with pytest.raises(ValueError, match="already emulated"):
        ft.emulate(layer, "mixed_bfloat16")
    layer.fpsim_emulation.remove()
    assert torch.equal(layer(x), plain) and not hasattr(layer, "fpsim_emulation")


def test_monitor_counts_of_an_operand_equal_fpsim_rounds():
    torch.manual_seed(4)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    model = ft.emulate(model.to(DEVICE), "mixed_float16")
    x = seeded(6, 4, seed=13, scale=1e-6)  # some inputs become subnormal in fp16
    with fpsim.monitor() as got:
        model(x).sum().backward()
    with fpsim.monitor() as want:
        fpsim.round(x.cpu().numpy(), "fp16", site="0/linear/input")
        fpsim.round(model[2].weight.detach().cpu().numpy(), "fp16", site="2/linear/weight")
    for site in want.counts:
        assert got.counts[site] == want.counts[site]
    assert got.counts["0/linear/input"]["subnormal"] > 0
    assert {"2/linear/grad_output", "2/linear/grad_weight", "2/linear/grad_input",
            "0/linear/grad_weight"} <= set(got.counts)


def test_grad_scaler_skips_a_step_whose_rounded_gradients_overflow_exactly_as_torch_does():
    """torch.amp.GradScaler on an emulated model: a scale that pushes fp16 gradients past
    65504 makes them inf; unscale_ finds them, step leaves every parameter bit-identical, the
    scale halves; finite steps update and, each growth_interval, double the scale."""
    torch.manual_seed(5)
    model = ft.emulate(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                           torch.nn.Linear(16, 4)).to(DEVICE), "mixed_float16")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(DEVICE, init_scale=2.0**20, growth_interval=3)
    x, y = seeded(32, 8, seed=14), torch.arange(32, device=DEVICE) % 4
    skipped = updated = 0
    for _ in range(12):
        before = [p.detach().clone() for p in model.parameters()]
        scale = scaler.get_scale()
        opt.zero_grad()
        scaler.scale(F.cross_entropy(model(x), y)).backward()
        scaler.unscale_(opt)
        finite = all(torch.isfinite(p.grad).all() for p in model.parameters())
        tracker = int(scaler._growth_tracker.item()) if scaler._growth_tracker is not None else 0
        scaler.step(opt)
        scaler.update()
        same = all(torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))
        if finite:
            updated += 1
            assert not same
            grown = scale * 2 if tracker + 1 == 3 else scale
            assert scaler.get_scale() == grown
        else:
            skipped += 1
            assert same and scaler.get_scale() == scale * 0.5
    assert skipped >= 1 and updated >= 1


@pytest.mark.parametrize("name,compute,variable,inputs", [
    ("float32", "float32", "float32", "float32"),
    ("mixed_float16", "float16", "float32", "float16"),
    ("mixed_bfloat16", "bfloat16", "float32", "bfloat16"),
    ("float16", "float16", "float16", "float16"),
    ("bfloat16", "bfloat16", "bfloat16", "bfloat16"),
    ("mixed_e4m3fn", "float8_e4m3fn", "float32", "float8_e4m3fn"),
    ("float8_e5m2", "float8_e5m2", "float8_e5m2", "float8_e5m2"),
    ("mixed_tf32", "float32", "float32", "tf32"),
    ("mxfp8", "bfloat16", "float32", "mxfp8_e4m3"),
    ("nvfp4", "bfloat16", "float32", "nvfp4"),
])
def test_policies_parse_nns_names(name, compute, variable, inputs):
    p = ft.get_policy(name)
    assert (p.compute_format.name, p.variable_format.name, p.inputs.name) == (
        compute, variable, inputs)


def test_bad_policies_and_modules_raise_clear_errors():
    with pytest.raises(ValueError, match="unknown policy 'mixed_fp17'"):
        ft.get_policy("mixed_fp17")
    with pytest.raises(ValueError, match="per-tensor fp8 recipe"):
        ft.get_policy("fp8_hybrid_delayd")
    with pytest.raises(TypeError, match="torch.nn.Module"):
        ft.emulate(lambda x: x, "mixed_float16")


def reference_mha(mha: torch.nn.Module, x: torch.Tensor, mask: torch.Tensor | None,
                  need_weights: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """nn.MultiheadAttention's self-attention (batch_first) written out by hand, each product's
    operands and output rounded to fp16 by fpsim.round (numpy): (output, out-projection input)."""
    B, L, E = x.shape
    H = mha.num_heads
    D = E // H
    qkv = r16(F.linear(r16(x.transpose(0, 1)), r16(mha.in_proj_weight), r16(mha.in_proj_bias)))
    q, k, v = (t.reshape(L, B * H, D).transpose(0, 1) for t in qkv.chunk(3, dim=-1))
    additive = None if mask is None else torch.zeros(L, L, device=DEVICE).masked_fill(
        mask, float("-inf"))
    if need_weights:
        scores = r16(q * math.sqrt(1.0 / D)) @ r16(k).transpose(-2, -1)
        if additive is not None:
            scores = scores + r16(additive)  # 0 or -inf: exact in any order
        o = r16(r16(torch.softmax(r16(scores), dim=-1)) @ r16(v))
        o = o.transpose(0, 1).reshape(L * B, E)
    else:
        q, k, v = (t.reshape(B, H, L, D) for t in (q, k, v))
        o = r16(F.scaled_dot_product_attention(r16(q), r16(k), r16(v), additive))
        o = o.permute(2, 0, 1, 3).reshape(B * L, E)
    out = r16(F.linear(r16(o), r16(mha.out_proj.weight), r16(mha.out_proj.bias)))
    return out.view(L, B, E).transpose(0, 1), o


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("causal", [False, True])
def test_multihead_attention_projections_and_attention_products_are_rounded(need_weights,
                                                                             causal):
    """nn.MultiheadAttention computes inside F.multi_head_attention_forward: its in- and
    out-projections and its attention products (bmm/baddbmm, or scaled_dot_product_attention
    when need_weights=False) are caught and rounded as a hand-written fp16 version rounds
    them, forward bit for bit, and the out-projection's weight gradient too."""
    torch.manual_seed(6)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).to(DEVICE)
    x = seeded(2, 5, 8, seed=15, scale=2.0)
    mask = torch.ones(5, 5, dtype=torch.bool, device=DEVICE).triu(1) if causal else None
    want, o = reference_mha(mha, x, mask, need_weights)
    ft.emulate(mha, "mixed_float16")
    with fpsim.monitor() as m:
        got = mha(x, x, x, need_weights=need_weights, attn_mask=mask)[0]
    assert torch.equal(got, want)
    assert m.counts["linear/input"]["elements"] == 2 * 5 * 8 * 2  # in- and out-projection
    # q (2 heads x 2 batches x 5 x 4 = 80) times k, then the 100 probabilities times v
    products = ({"baddbmm/batch1": 80, "matmul/a": 100} if causal else {"matmul/a": 180}
                ) if need_weights else {"attention/query": 80}
    for site, elements in products.items():
        assert m.counts[site]["elements"] == elements
    upstream = seeded(2, 5, 8, seed=16)
    got.backward(upstream)
    g = upstream.transpose(0, 1).reshape(10, 8)
    assert torch.equal(mha.out_proj.weight.grad, r16(r16(g).T @ r16(o)))
    assert mha.in_proj_weight.grad is not None
    assert torch.equal(mha.in_proj_weight.grad, r16(mha.in_proj_weight.grad))
    mha.fpsim_emulation.remove()
    assert not torch.equal(mha(x, x, x, attn_mask=mask)[0], got)  # plain float32 again


@pytest.mark.parametrize("training", [True, False])
def test_a_transformer_encoder_layer_has_its_attention_emulated(training):
    """Also in eval mode without grad, where torch would take its fused fast path (which an
    active function mode turns off)."""
    torch.manual_seed(7)
    layer = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
                                             batch_first=True).to(DEVICE).train(training)
    with fpsim.monitor() as m, torch.set_grad_enabled(training):
        ft.emulate(layer, "mixed_bfloat16")(seeded(2, 5, 8, seed=17))
    assert {"self_attn/linear", "self_attn/attention", "linear1/linear", "linear2/linear"} <= set(
        m.counts)
