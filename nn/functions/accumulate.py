"""Matrix products with a chosen accumulator format (to show what a narrow accumulator does).

``linear``/``matmul`` in nn.functions.linalg always accumulate in fp32 (float32 BLAS on values
of the compute format). The ops here take ``accumulator=`` (a Format or name, e.g. "float16"):
products are exact, each addition is rounded to the accumulator's format, left to right
(``fpsim.accumulate``'s "sequential" model), and the result is rounded once to the output
format. With an fp32 accumulator they take the BLAS path (the same model in BLAS's order).
The backward products use the same accumulator. Under the float64 policy (format None) the
accumulator is ignored: nothing is rounded there.

An fp16 accumulator (IEEE half) on inputs whose significands have at most 32 bits together
(fp16, bf16 and fp8 inputs) takes nn.functions.fp16_accumulate's kernel: bit for bit the
same sequential model, about ten times faster than fpsim's general one.

``accumulator=`` also takes an accumulator model of ``fpsim.accumulators`` or the name of one
of its presets (``fpsim.accumulators.PRESETS``: "hopper_fp8_fast", "hopper_fp8_promote128",
"v100_tensor_core", "wang2018_fp16_chunk64", ...): models of what hardware is reported to do,
each with its source in its docstring. A layer saves a preset by its name; a model object that
is not a preset cannot be saved in a layer's config (``get_config`` says so).

This option lives in the ops of this module and in the layers that pass it: ``Dense``,
``Conv1D``/``Conv2D`` and ``MultiHeadAttention`` (``accumulator=``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fpsim import FP16, FP32
from fpsim.accumulate import matmul_nd, same_values
from fpsim.accumulators import PRESETS, is_model, resolve
from nn.engine.autograd import Context, Function
from nn.engine.formats import FormatLike, format_name, resolve_format
from nn.engine.rounding import round_array
from nn.engine.tensor import Tensor
from nn.functions.activations import relu_grad
from nn.functions.fp16_accumulate import MAX_PRODUCT_BITS, fp16_sequential_matmul
from nn.functions.reductions import sum as reduce_sum
from nn.functions.shape import transpose


def _swap_last(t: Tensor) -> Tensor:
    return transpose(t, tuple(range(t.ndim - 2)) + (t.ndim - 1, t.ndim - 2))


Accumulator = Any  # a Format or an fpsim.accumulators model


def _accumulate(ctx: Context, a: np.ndarray, b: np.ndarray, acc: Accumulator) -> np.ndarray:
    fa, fb = ctx.inputs[0].fmt, ctx.inputs[1].fmt
    if acc is None or fa is None or fb is None:
        return np.asarray(np.matmul(a, b), dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        if is_model(acc):
            return np.asarray(matmul_nd(a, b, fa, fb, acc), dtype=np.float64)
        if same_values(acc, FP16) and fa.precision + fb.precision <= MAX_PRODUCT_BITS:
            return fp16_sequential_matmul(a, b)
        return np.asarray(matmul_nd(a, b, fa, fb, acc), dtype=np.float64)



class AccumulatedMatMul(Function):
    """a @ b (>= 2-D, leading dimensions broadcast) accumulated in ``acc``, rounded once."""

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, b: np.ndarray, acc: Accumulator = None
                ) -> np.ndarray:
        ctx.saved["acc"] = acc
        return round_array(_accumulate(ctx, a, b, acc), ctx.fmt, site=ctx.output_site())

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        a, b = ctx.inputs
        acc = ctx.saved["acc"]
        need_a, need_b = ctx.needs_input_grad
        return (AccumulatedMatMul.apply(grad, _swap_last(b), acc=acc) if need_a else None,
                AccumulatedMatMul.apply(_swap_last(a), grad, acc=acc) if need_b else None)


class AccumulatedLinear(Function):
    """relu?(x @ w + b): the accumulator value plus the bias (exact in float64), one rounding."""

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None,
                acc: Accumulator = None, relu: bool = False) -> np.ndarray:
        ctx.saved.update(acc=acc, relu=relu)
        z = _accumulate(ctx, x, w, acc)
        if b is not None:
            z += b
        out = round_array(z, ctx.fmt, site=ctx.output_site())
        return np.maximum(out, 0, out=out) if relu else out

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, ...]:
        x, w = ctx.inputs[:2]
        acc = ctx.saved["acc"]
        g = relu_grad(grad, ctx.output()) if ctx.saved["relu"] else grad
        need = ctx.needs_input_grad
        grads: tuple[Tensor | None, ...] = (
            AccumulatedMatMul.apply(g, _swap_last(w), acc=acc) if need[0] else None,
            AccumulatedMatMul.apply(_swap_last(x), g, acc=acc) if need[1] else None,
        )
        if len(ctx.inputs) == 3:
            grads += (reduce_sum(g, axis=0) if need[2] else None,)
        return grads


def accumulator_format(accumulator: Any, what: str = "accumulator") -> Accumulator:
    """The accumulator: a Format, an ``fpsim.accumulators`` model (given as an object or a
    preset name), or None for fp32 (given as None or as FP32), the accumulator of every matmul
    in nn, so that callers keep the fused fp32 path."""
    if accumulator is None:
        return None
    if is_model(accumulator) or (isinstance(accumulator, str)
                                 and accumulator.strip().lower() in PRESETS):
        return resolve(accumulator)
    fmt = resolve_format(accumulator, what)
    return None if fmt is FP32 or fmt == FP32 else fmt


def accumulator_name(acc: Accumulator, what: str = "accumulator") -> str | None:
    """How a layer's config stores its accumulator: a format name, a preset name, or None."""
    if acc is None:
        return None
    if not is_model(acc):
        return format_name(acc)
    for name, model in PRESETS.items():
        if model == acc:
            return name
    raise ValueError(f"{what}: the accumulator model {acc!r} is not one of "
                     f"fpsim.accumulators.PRESETS, so it cannot be saved in a config; "
                     f"use a preset name ({', '.join(PRESETS)})")


def accumulated_matmul(a: Tensor, b: Tensor, accumulator: FormatLike) -> Tensor:
    """a @ b with products accumulated in ``accumulator`` (see the module docstring)."""
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} are not aligned")
    return AccumulatedMatMul.apply(a, b, acc=accumulator_format(accumulator))


def accumulated_linear(x: Tensor, w: Tensor, b: Tensor | None, accumulator: FormatLike,
                       activation: Any = None) -> Tensor:
    """``linear`` with products accumulated in ``accumulator``; ``activation`` None or "relu"."""
    if activation not in (None, "relu"):
        raise ValueError(f"linear fuses only activation=None or 'relu', got {activation!r}")
    if x.ndim != 2 or w.ndim != 2 or x.shape[1] != w.shape[0]:
        raise ValueError(f"linear: input of shape {x.shape} does not fit a kernel of shape "
                         f"{w.shape}")
    inputs = (x, w) if b is None else (x, w, b)
    return AccumulatedLinear.apply(*inputs, acc=accumulator_format(accumulator),
                                   relu=activation == "relu")
