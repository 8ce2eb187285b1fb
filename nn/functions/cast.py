"""``Cast``: move a tensor between formats (one rounding); its backward casts the gradient back."""

from __future__ import annotations

from typing import Any

import numpy as np

from fpsim import Format
from nn.engine.autograd import Context, Function
from nn.engine.formats import FormatLike, carrier_dtype, resolve_format
from nn.engine.rounding import needs_rounding, round_array
from nn.engine.tensor import Tensor


class Cast(Function):
    """y = round(x, fmt). Widening (fp16 -> fp32) is exact and shares the data.

    Backward: the gradient (in ``fmt``) is handed back as is, and the engine's gradient rule
    rounds it to x's format -- that rounding *is* the cast back (fp32 -> fp16 for the
    gradient of logits cast up for an fp32 loss), done at x's monitor site.
    """

    differentiable_backward = True

    @staticmethod
    def output_format(*fmts: Format | None, **params: Any) -> Format | None:
        fmt: Format | None = params.get("fmt")
        return fmt

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, fmt: Format | None = None) -> np.ndarray:
        carrier = carrier_dtype(ctx.fmt)
        if x.dtype == carrier and not needs_rounding(ctx.inputs[0].fmt, ctx.fmt):
            return x
        return round_array(x.astype(carrier) if ctx.fmt is None else x, ctx.fmt,
                           site=ctx.output_site())

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return grad


def cast(x: Tensor, fmt: FormatLike) -> Tensor:
    """``x`` in format ``fmt`` (a Format, a name, or "float64"); ``x`` itself if already there."""
    target = resolve_format(fmt, "cast: fmt")
    if target is x.fmt or target == x.fmt:
        return x
    return Cast.apply(x, fmt=target)
