"""The quantized matmul: what ``matmul`` and ``linear`` become under an fp8 or block recipe.

Forward, for ``a @ b`` (``linear``: ``relu?(x @ w + bias)``), as the hardware does it:

1. each operand is quantized by the recipe (``recipe.quantize``): per-tensor recipes give fp8
   values of ``operand * scale`` (saturated) and ``scale_inv = float32(1 / scale)``; block
   recipes give the dequantized MX/NVFP4 values along the inner dimension (a's last axis,
   b's second-to-last) and ``scale_inv = 1``;
2. the quantized values are multiplied with float32 BLAS (the products of fp8 values are exact
   in fp32, the sum is fp32 accumulation) and the fp32 result is multiplied by
   ``float32(scale_inv_a * scale_inv_b)`` (the GEMM's alpha); the bias is added in fp32;
3. one rounding to the op's output format (the promotion of the inputs' formats: the compute
   format, e.g. bf16 under a recipe policy; fp32 for an fp32 model under ``fp8_autocast``).

Backward (the straight-through rule: the quantizer's derivative is taken as 1, as Transformer
Engine does, so a saturated element passes its gradient on unchanged): the incoming gradient
``g`` is quantized as role "backward" (E5M2 under "hybrid"), and

- ``grad_a = (g_q @ b_q^T) * (scale_inv_g * scale_inv_b)``,
  ``grad_b = (a_q^T @ g_q) * (scale_inv_a * scale_inv_g)``, fp32 accumulation; per-tensor
  recipes reuse the forward's ``a_q``, ``b_q`` (a transpose is exact); block recipes quantize
  a, b and g again along each product's inner dimension (TE's "columnwise" copies);
- each result is in fp32 and the engine rounds it to its input's format; the bias gradient is
  the fp32 sum of g over the batch (relu's mask applied first when fused).

Operand names for the recipe's states and log: ``"<op site>/input"``, ``"/weight"`` and
``"/grad_output"`` for ``linear``; ``"/a"``, ``"/b"``, ``"/grad_output"`` for ``matmul``;
block recipes' backward copies add ``"_t"`` (``nn.engine.sites.fp8_tensor``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fpsim import FP32
from nn.engine import sites
from nn.engine.autograd import Context, Function, is_grad_enabled
from nn.engine.tensor import Tensor
from nn.fp8.meta import UPDATES, ModuleScaling, block_scope, current_layer, deferring_block
from nn.fp8.recipes import Recipe
from nn.fp8.scope import Run, owner_scope
from nn.functions._common import finish


def _swap(v: np.ndarray) -> np.ndarray:
    return np.swapaxes(v, -1, -2)


def _product(va: np.ndarray, vb: np.ndarray, inv_a: float, inv_b: float) -> np.ndarray:
    """(va @ vb) * float32(inv_a * inv_b): fp32 accumulation, then the scales undone.

    When float32(inv_a * inv_b) leaves float32's range (large margins, tiny amaxes), the
    product of the inverse scales is taken in float64 and a zero sum stays zero (ours: a
    quantized operand flushed to zero by a tiny scale gives 0, never 0 * inf = NaN)."""
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        z = np.matmul(va, vb)
        alpha = np.float32(inv_a) * np.float32(inv_b)
        if np.isfinite(alpha) and alpha != 0:
            if alpha != 1:
                z = np.multiply(z, alpha.astype(z.dtype), out=z)
        else:
            wide = np.float64(inv_a) * np.float64(inv_b)
            z = np.where(z == 0, z, (z.astype(np.float64) * wide).astype(z.dtype))
    return z


def _grad(values: np.ndarray) -> Tensor:
    """A gradient array as a Tensor in fp32 (float64 stays unrounded): the engine rounds it."""
    return Tensor._make(values, None if values.dtype == np.float64 else FP32)


class QuantizedMatMul(Function):
    """``relu?(a @ b + bias)`` with recipe-quantized operands (see the module docstring)."""

    @staticmethod
    def forward(ctx: Context, a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None,
                recipe: Recipe | None = None, site: str = "", names: tuple[str, str] = ("a", "b"),
                relu: bool = False, update_backward: bool = False) -> np.ndarray:
        assert recipe is not None
        name_a, name_b = (sites.fp8_tensor(site, n) for n in names)
        va, inv_a = recipe.quantize(a, name_a, "forward", axis=-1)
        vb, inv_b = recipe.quantize(b, name_b, "forward", axis=-2)
        ctx.saved.update(recipe=recipe, site=site, names=names, relu=relu, va=va, vb=vb,
                         inv=(inv_a, inv_b), owner=current_layer(), block=deferring_block(),
                         update_backward=update_backward)
        z = _product(va, vb, inv_a, inv_b)
        if bias is not None:
            z += bias
        z = finish(ctx, z)
        return np.maximum(z, 0, out=z) if relu else z

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, ...]:
        s = ctx.saved
        # the forward's layer owns the gradient's state; its TE block (if any) defers updates
        with owner_scope(s["owner"]), block_scope(s["block"]):
            grads = QuantizedMatMul._backward(ctx, grad)
        if s["update_backward"]:  # TE's first module: the end of the block's backward
            UPDATES.flush("backward")
        return grads

    @staticmethod
    def _backward(ctx: Context, grad: Tensor) -> tuple[Tensor | None, ...]:
        s = ctx.saved
        recipe: Recipe = s["recipe"]
        g = grad.data
        if s["relu"]:
            g = np.where(ctx.out > 0, g, np.zeros((), g.dtype))
        need = ctx.needs_input_grad
        name_a, name_b = s["names"]
        gname = sites.fp8_tensor(s["site"], "grad_output")
        inv_a, inv_b = s["inv"]
        a, b = ctx.inputs[0].data, ctx.inputs[1].data
        da = db = None
        if recipe.per_tensor:
            if need[0] or need[1]:
                vg, inv_g = recipe.quantize(g, gname, "backward")
                if need[0]:
                    da = _product(vg, _swap(s["vb"]), inv_g, inv_b)
                if need[1]:
                    db = _product(_swap(s["va"]), vg, inv_a, inv_g)
        else:
            t = sites.fp8_tensor
            if need[0]:  # inner dimension: g's last axis, b's last axis
                vg, inv_g = recipe.quantize(g, gname, "backward", axis=-1)
                vbt, inv_bt = recipe.quantize(b, t(s["site"], name_b + "_t"), "forward",
                                              axis=-1)
                da = _product(vg, _swap(vbt), inv_g, inv_bt)
            if need[1]:  # inner dimension: a's and g's second-to-last axis
                vat, inv_at = recipe.quantize(a, t(s["site"], name_a + "_t"), "forward",
                                              axis=-2)
                vgt, inv_gt = recipe.quantize(g, gname + "_t", "backward", axis=-2)
                db = _product(_swap(vat), vgt, inv_at, inv_gt)
        grads: tuple[Tensor | None, ...] = (None if da is None else _grad(da),
                                            None if db is None else _grad(db))
        if len(ctx.inputs) == 3:
            grads += (_grad(np.sum(g, axis=0, dtype=g.dtype)) if need[2] else None,)
        return grads


def _updates_backward(*inputs: Tensor) -> bool:
    """Whether this matmul's backward ends a TE block's backward: the first one of a TE module
    in the block that records a graph (TE's ``_check_fp8_reduce_and_update``)."""
    block = deferring_block()
    if block is None or not isinstance(getattr(current_layer(), "fp8_meta", None),
                                       ModuleScaling):
        return False
    if not (is_grad_enabled() and any(t.requires_grad for t in inputs)):
        return False
    return block.take_first()


def _site(run: Run, op_name: str) -> str:
    """The op site of this use, claimed by the layer running it (``Recipe.claim``)."""
    site = run.op_site(op_name)
    assert run.recipe is not None
    run.recipe.claim(site, current_layer())
    return site


def matmul(run: Run, a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` under the run's recipe (operands named "a" and "b")."""
    return QuantizedMatMul.apply(a, b, recipe=run.recipe, site=_site(run, "MatMul"),
                                 update_backward=_updates_backward(a, b))


def linear(run: Run, x: Tensor, w: Tensor, b: Tensor | None = None, activation: Any = None
           ) -> Tensor:
    """``relu?(x @ w + b)`` under the run's recipe (operands "input" and "weight")."""
    inputs = (x, w) if b is None else (x, w, b)
    return QuantizedMatMul.apply(*inputs, recipe=run.recipe, site=_site(run, "Linear"),
                                 names=("input", "weight"), relu=activation == "relu",
                                 update_backward=_updates_backward(*inputs))
