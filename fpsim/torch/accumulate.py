"""Products accumulated in a chosen model, for ``fpsim.torch.emulate(..., accumulator=...)``.

Without an accumulator, ``emulate`` lets torch compute each product in float32 (fp32
accumulation in torch's own order). With one, a product's dot products are those of
``fpsim.accumulate``: exact products added into the accumulator, rounded as the model says (a
Format: after every addition, left to right; an ``fpsim.accumulators`` model or one of its
presets, ``"hopper_fp8_fast"`` ...: its own groups, truncations and promotions). The values
are computed by ``fpsim.accumulate.matmul_nd`` on the CPU (a tensor on another device makes
the round trip), so they equal ``fpsim.matmul``'s bit for bit; the caller rounds them once to
the output format.

How each product becomes matrix products (``PRODUCT_FUNCTIONS``):

- ``linear``: ``x @ W^T`` over the rows of x, then the bias added in float64 (exact: both
  lie in float32, the sum of two float32 values is exact in float64 unless their exponents
  lie more than 29 binades apart, where the one rounding of the output decides anyway);
- ``conv1d`` / ``conv2d``: the input's patches (``F.unfold``, after the padding), every
  image's side by side, then ``W @ patches`` (per group), the bias added as for linear;
- ``matmul`` / ``mm`` / ``bmm``: ``matmul_nd`` with numpy's broadcasting; ``baddbmm``:
  ``beta * input + alpha * (batch1 @ batch2)`` in float64.

The backward products use the same accumulator (nn's rule): for ``a @ b`` the gradients are
``g @ b^T`` and ``a^T @ g``; where an operand was broadcast over a batch (a convolution's
weight over the images and output positions), its gradient is one dot product over all of
them, batch by batch: a convolution's kernel gradient sums batch x output positions products,
the inner dimension nn's ``accumulation`` experiment is about. The sums that ``F.unfold``'s
backward makes (overlapping patches) and a bias's gradient are computed by torch in float32.
``scaled_dot_product_attention`` takes no accumulator (its softmax sits between two products):
name the scopes or products that take one instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from fpsim.accumulate import matmul_nd, same_values
from fpsim.accumulators import resolve
from fpsim.catalog import FP32
from fpsim.formats import Format

Accumulator = Any  # a Format or an fpsim.accumulators model (resolved by the caller)


def resolve_accumulator(accumulator: object) -> Accumulator | None:
    """A Format or model from what ``accumulator=`` takes (a Format or format name, a model,
    a preset name); None for float32, which torch's own product already is."""
    acc = resolve(accumulator)
    return None if isinstance(acc, Format) and same_values(acc, FP32) else acc


def accumulated(a: torch.Tensor, b: torch.Tensor, acc: Accumulator) -> torch.Tensor:
    """The accumulator values of ``a @ b`` (numpy's matmul broadcasting) as float64 on a's
    device: ``fpsim.accumulate.matmul_nd`` with products exact in float64."""
    with np.errstate(invalid="ignore", over="ignore"):
        values = matmul_nd(a.detach().cpu().numpy(), b.detach().cpu().numpy(), FP32, FP32, acc)
    return torch.from_numpy(np.asarray(values, dtype=np.float64)).to(a.device)


def _swap(t: torch.Tensor) -> torch.Tensor:
    return t.transpose(-1, -2)


def _gradient(x: torch.Tensor, y: torch.Tensor, shape: torch.Size, acc: Accumulator
              ) -> torch.Tensor:
    """``x @ y`` summed to ``shape`` (an operand's): where the operand was broadcast over
    batch dimensions, the batches join the inner dimension of one accumulated product."""
    batch = x.shape[:-2] if x.ndim > y.ndim else y.shape[:-2]
    if len(shape) == 2 and batch:  # a 2-D operand broadcast over every batch dimension
        # x: (*batch, m, k) and y: (*batch, k, n) -> (m, batch * k) @ (batch * k, n)
        xs = x.expand(*batch, *x.shape[-2:]).reshape(-1, *x.shape[-2:])
        ys = y.expand(*batch, *y.shape[-2:]).reshape(-1, *y.shape[-2:])
        left = xs.permute(1, 0, 2).reshape(xs.shape[1], -1)
        right = ys.reshape(-1, ys.shape[-1])
        return accumulated(left, right, acc)
    full = accumulated(x, y, acc)
    if full.shape == shape:
        return full
    lead = full.ndim - len(shape)
    summed = full.sum(dim=tuple(range(lead))) if lead else full
    keep = tuple(i for i, n in enumerate(shape) if n == 1 and summed.shape[i] != 1)
    return summed.sum(dim=keep, keepdim=True) if keep else summed


class AccumulatedMatmul(torch.autograd.Function):
    """``a @ b`` (float32 operands) as its accumulator values, float64; backward the same
    accumulator (see the module docstring)."""

    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor, acc: Accumulator) -> torch.Tensor:
        ctx.save_for_backward(a, b)
        ctx.acc = acc
        return accumulated(a, b, acc)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        a, b = ctx.saved_tensors
        g = grad.to(torch.float32)  # (float32 values: a gradient rounded to its format)
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        g2 = g.unsqueeze(-2) if a.ndim == 1 else g
        g2 = g2.unsqueeze(-1) if b.ndim == 1 else g2
        ga = gb = None
        if ctx.needs_input_grad[0]:
            ga = _gradient(g2, _swap(b2), a2.shape, ctx.acc).reshape(a.shape).to(torch.float32)
        if ctx.needs_input_grad[1]:
            gb = _gradient(_swap(a2), g2, b2.shape, ctx.acc).reshape(b.shape).to(torch.float32)
        return ga, gb, None


def _matmul(acc: Accumulator, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return AccumulatedMatmul.apply(a, b, acc)


def linear(acc: Accumulator, x: torch.Tensor, weight: torch.Tensor,
           bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear`` with its products accumulated in ``acc`` (float64 values)."""
    out = _matmul(acc, x, weight.t())
    return out if bias is None else out + bias.to(torch.float64)


def _same_padding(kernel: tuple[int, ...], dilation: tuple[int, ...]) -> list[int]:
    """F.pad's (left, right, top, bottom) for padding="same" at stride 1: torch's rule, the
    odd one on the far side."""
    pads: list[int] = []
    for k, d in zip(reversed(kernel), reversed(dilation), strict=True):
        total = d * (k - 1)
        pads += [total // 2, total - total // 2]
    return pads


def _pair(v: Any, dims: int) -> tuple[int, ...]:
    return tuple(v) if isinstance(v, (tuple, list)) else (int(v),) * dims


def conv(acc: Accumulator, dims: int, x: torch.Tensor, weight: torch.Tensor,
         bias: torch.Tensor | None = None, stride: Any = 1, padding: Any = 0,
         dilation: Any = 1, groups: int = 1) -> torch.Tensor:
    """``F.conv1d`` (dims 1) / ``F.conv2d`` (dims 2) with its products accumulated in ``acc``
    (float64 values)."""
    batched = x.ndim == dims + 2
    if not batched:
        x = x.unsqueeze(0)
    if dims == 1:  # a row of height 1
        x, weight = x.unsqueeze(2), weight.unsqueeze(2)
        stride, dilation = (1, *_pair(stride, 1)), (1, *_pair(dilation, 1))
        padding = padding if isinstance(padding, str) else (0, *_pair(padding, 1))
    stride, dilation = _pair(stride, 2), _pair(dilation, 2)
    kernel = tuple(weight.shape[2:])
    if isinstance(padding, str):
        if padding == "same":
            x = F.pad(x, _same_padding(kernel, dilation))
        elif padding != "valid":
            raise ValueError(f"padding must be 'same', 'valid' or sizes, got {padding!r}")
        padding = (0, 0)
    n, out_ch = x.shape[0], weight.shape[0]
    patches = F.unfold(x, kernel, dilation=dilation, padding=_pair(padding, 2), stride=stride)
    rows = [(x.shape[2 + i] + 2 * _pair(padding, 2)[i] - dilation[i] * (kernel[i] - 1) - 1)
            // stride[i] + 1 for i in range(2)]
    per_group = patches.shape[1] // groups
    # one 2-D product per group: the patches of every image side by side, (features, n * L),
    # so that the kernel gradient is one dot product over (image, position)
    columns = patches.permute(1, 0, 2).reshape(patches.shape[1], -1)
    outs = []
    for g, w in enumerate(weight.chunk(groups, dim=0)):
        cols = columns[g * per_group:(g + 1) * per_group]
        outs.append(_matmul(acc, w.reshape(w.shape[0], -1), cols))
    out = torch.cat(outs, dim=0).reshape(out_ch, n, *rows).transpose(0, 1)
    if bias is not None:
        out = out + bias.to(torch.float64).reshape(1, -1, 1, 1)
    if dims == 1:
        out = out.squeeze(2)
    return out if batched else out.squeeze(0)


def baddbmm(acc: Accumulator, input: torch.Tensor, batch1: torch.Tensor,
            batch2: torch.Tensor, *, beta: float = 1.0, alpha: float = 1.0) -> torch.Tensor:
    """``torch.baddbmm`` with the product accumulated in ``acc`` (float64 values)."""
    out = _matmul(acc, batch1, batch2)
    out = out if alpha == 1 else alpha * out
    return out if beta == 0 else out + beta * input.to(torch.float64)


# product name (fpsim.torch.emulate.PRODUCTS) -> the function computing it with an accumulator,
# called as f(acc, *operands, *other arguments, **keywords)
PRODUCT_FUNCTIONS: dict[str, Callable[..., torch.Tensor]] = {
    "linear": linear,
    "conv1d": lambda acc, *args, **kw: conv(acc, 1, *args, **kw),
    "conv2d": lambda acc, *args, **kw: conv(acc, 2, *args, **kw),
    "matmul": _matmul,
    "baddbmm": baddbmm,
}
