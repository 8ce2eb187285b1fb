"""``fpsim.torch.quantize``: rounding to a format as a torch.autograd.Function, whose backward
is the straight-through estimator (the gradient passes unchanged, as if rounding were the
identity: the usual rule of quantization-aware training)."""

from __future__ import annotations

from typing import Any

import torch

from fpsim.catalog import get_format
from fpsim.formats import Format
from fpsim.monitor import is_active as monitor_is_active
from fpsim.mx import BLOCK_FORMATS, BlockFormat
from fpsim.rounding import RoundingMode, get_mode, resolve_overflow, resolve_subnormals
from fpsim.torch import mx
from fpsim.torch.rounding import check_tensor, round_checked


class Quantize(torch.autograd.Function):
    """Forward: ``fpsim.torch.round`` (or ``fpsim.torch.mx.quantize`` for a block format);
    backward: the gradient unchanged (straight-through)."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor, rounder: Any) -> torch.Tensor:  # noqa: D102
        return rounder(t)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # noqa: D102
        return grad, None


def quantize(
    t: torch.Tensor,
    fmt: Format | BlockFormat | str,
    mode: str | RoundingMode = "nearest_even",
    *,
    generator: torch.Generator | None = None,
    subnormals: bool | None = None,
    overflow: str | None = None,
    axis: int = -1,
    scale_rounding: str | None = None,
    site: str | None = None,
) -> torch.Tensor:
    """``t`` rounded to ``fmt`` in the forward pass, its gradient passed straight through.

    ``fmt`` is an fpsim format (``fpsim.torch.round``'s arguments apply) or a block format
    name such as ``"mxfp8_e4m3"`` or ``"nvfp4"`` (``fpsim.torch.mx.quantize``'s: blocks along
    ``axis``, ``scale_rounding``). Differentiable: ``quantize(w, "e4m3fn")`` inside a model
    trains ``w`` as quantization-aware training does.

    >>> w = torch.tensor([0.3, 500.0], requires_grad=True)
    >>> q = fpsim.torch.quantize(w, "e4m3fn", overflow="saturate"); q.sum().backward()
    >>> q.detach(), w.grad
    (tensor([3.1250e-01, 4.4800e+02]), tensor([1., 1.]))
    """
    t = check_tensor("t", t)
    mode = get_mode(mode)
    block = fmt if isinstance(fmt, BlockFormat) else (
        BLOCK_FORMATS.get(fmt.strip().lower()) if isinstance(fmt, str) else None)
    if block is not None:
        if subnormals is not None or overflow is not None:
            raise ValueError(f"subnormals= and overflow= apply to element formats; block format "
                             f"{block.name} follows fpsim.mx's rules (elements saturate)")

        def rounder(x: torch.Tensor) -> torch.Tensor:
            return mx.quantize(x, block, axis=axis, scale_rounding=scale_rounding, mode=mode,
                               generator=generator, site=site)
    else:
        f = get_format(fmt)
        policy = resolve_overflow(f, overflow)
        keep_subnormals = resolve_subnormals(f, subnormals)

        def rounder(x: torch.Tensor) -> torch.Tensor:
            return round_checked(x, f, mode, generator, keep_subnormals, policy, site,
                                 counting=monitor_is_active())
    out: torch.Tensor = Quantize.apply(t, rounder)
    return out
