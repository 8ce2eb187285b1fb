"""Per-tensor fp8 scaling for ``fpsim.torch.emulate``: nn.fp8's DelayedScaling and
CurrentScaling (Transformer Engine's recipes), on torch tensors.

A product's operand (the input and weight of ``linear``, the two factors of ``matmul``; the
output gradient in backward) is first rounded to the compute format (bf16: what nn's autocast
cast gives), then cast to fp8 with its own scale:

- ``q = round(x * scale, fp8, nearest even, saturating to +-max)``; ``x * scale`` is exact in
  float64 (two float32 values), so the cast rounds once (TE casts with satfinite; NaN stays);
- the product runs in float32 on the fp8 values and its result is multiplied by
  ``float32(scale_inv_a * scale_inv_b)`` (TE's GEMM alpha), the bias added in float32 after,
  and the output rounded once to the compute format;
- backward: the output gradient (rounded to the compute format) is cast with its own scale
  (E5M2 under "hybrid"); ``grad_a = (g_q @ b_q^T) * float32(inv_g * inv_b)`` and
  ``grad_b = (a_q^T @ g_q) * float32(inv_a * inv_g)`` from the forward's fp8 operands, each
  rounded to the compute format; the bias gradient is the float32 sum of the rounded output
  gradient, rounded to the compute format.

Scale rule (one state per tensor, ``ScalingState``): ``fpsim.scaling``'s, the rule nn.fp8
follows too (Transformer Engine's fused delayed-scaling update: a zero amax skips the update, a
NaN amax is dropped by the max; current scaling takes the tensor's own amax, scale 1 for a
zero or non-finite one). Delayed scaling casts with the scale before its own update; current
scaling updates first. The amax skips NaN elements, as TE's cast kernels do.

Amax reduction (``reduce_amax=True``, TE's default for its recipes): under an initialised
``torch.distributed`` the amax of every tensor is all-reduced with MAX over the ranks before
the scale update, as TE's ``reduce_amax``, so every rank keeps the same scales and histories;
``reduce_amax=False`` keeps them per shard.

Other products (conv, attention, baddbmm) are not fp8 under these recipes: their operands and
output are rounded to the compute format (TE's fp8_autocast leaves them to their own modules).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fpsim import scaling
from fpsim.catalog import E4M3FN, E5M2
from fpsim.formats import Format
from fpsim.monitor import active_monitors, counting_in
from fpsim.monitor import is_active as monitor_is_active
from fpsim.rounding import RoundingMode
from fpsim.torch.rounding import round_checked

# fp8_format -> (forward format: activations and weights, backward format: gradients)
FP8_FORMATS: dict[str, tuple[Format, Format]] = {
    "hybrid": (E4M3FN, E5M2),
    "e4m3": (E4M3FN, E4M3FN),
}
AMAX_ALGOS = scaling.AMAX_ALGOS


@dataclass(frozen=True)
class PerTensorScaling:
    """A per-tensor fp8 recipe by nn.fp8's settings: ``current`` False is DelayedScaling
    (``amax_history_len``, ``amax_compute_algo``), True is CurrentScaling (history of one,
    "most_recent"); ``reduce_amax``: all-reduce MAX of each amax over torch.distributed's
    ranks (TE's default, True)."""

    fp8_format: str = "hybrid"
    current: bool = False
    amax_history_len: int = 16
    amax_compute_algo: str = "max"
    margin: int = 0
    reduce_amax: bool = True

    def __post_init__(self) -> None:
        if self.fp8_format not in FP8_FORMATS:
            raise ValueError(f"fp8_format must be one of {tuple(FP8_FORMATS)}, got "
                             f"{self.fp8_format!r}")
        if self.amax_compute_algo not in AMAX_ALGOS:
            raise ValueError(f"amax_compute_algo must be one of {AMAX_ALGOS}, got "
                             f"{self.amax_compute_algo!r}")
        for name in ("amax_history_len", "margin"):
            value = getattr(self, name)
            low = 1 if name == "amax_history_len" else 0
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        if not isinstance(self.reduce_amax, bool):
            raise TypeError(f"reduce_amax must be True or False, got {self.reduce_amax!r}")

    def format(self, backward: bool) -> Format:
        return FP8_FORMATS[self.fp8_format][int(backward)]


# nn's per-tensor policy names (nn.fp8.recipes.POLICY_RECIPES)
PER_TENSOR_RECIPES: dict[str, PerTensorScaling] = {
    "fp8_hybrid_delayed": PerTensorScaling("hybrid"),
    "fp8_e4m3_delayed": PerTensorScaling("e4m3"),
    "fp8_hybrid_current": PerTensorScaling("hybrid", True, 1, "most_recent"),
    "fp8_e4m3_current": PerTensorScaling("e4m3", True, 1, "most_recent"),
}


class ScalingState(scaling.ScalingState):
    """One tensor's scale, amax window and step count: ``fpsim.scaling.ScalingState`` (the rule
    nn.fp8 follows) with the recipe it belongs to."""

    def __init__(self, recipe: PerTensorScaling, fmt: Format) -> None:
        super().__init__(fmt.max, recipe.amax_history_len, recipe.amax_compute_algo,
                         recipe.margin, fmt)
        self.recipe = recipe
        self.fmt: Format = fmt


def _amax(x: torch.Tensor, reduce: bool) -> float:
    """max |x| as TE's cast kernels reduce it (``fmaxf``: NaN elements skipped, inf kept; 0 if
    empty), all-reduced with MAX over the ranks when ``reduce`` and torch.distributed is
    initialised."""
    a = x.abs()
    a = torch.where(torch.isnan(a), torch.zeros_like(a), a)
    a = a.amax().reshape(1) if x.numel() else x.new_zeros(1)
    dist = torch.distributed
    if reduce and dist.is_available() and dist.is_initialized():
        dist.all_reduce(a, op=dist.ReduceOp.MAX)
    return float(a)


def cast(x: torch.Tensor, state: ScalingState, site: str) -> tuple[torch.Tensor, float]:
    """(the fp8 values of ``x * scale`` as float32, float32(1 / scale)), updating ``state``
    before the cast (current scaling) or after it (delayed)."""
    recipe = state.recipe
    amax = _amax(x, recipe.reduce_amax)
    if recipe.current:
        state.current(amax)  # TE's current scaling: no usable amax gives scale 1
    scale = state.scale
    scaled = x.to(torch.float64) * scale  # exact: 24 x 24 bits < 53
    q = round_checked(scaled, state.fmt, RoundingMode.NEAREST_EVEN, None, True, "saturate",
                      site, monitor_is_active()).to(torch.float32)
    if not recipe.current:
        state.update(amax)
    return q, float(np.float32(1.0) / np.float32(scale))


def _alpha(inv_a: float, inv_b: float) -> float:
    return float(np.float32(inv_a) * np.float32(inv_b))


def _to_compute(x: torch.Tensor, fmt: Format, site: str, counted: bool = True) -> torch.Tensor:
    """x rounded to the compute format; counted at ``site`` by an active monitor unless
    ``counted`` is False (an fp8 operand's cast to the compute format: the site counts its
    fp8 cast)."""
    return round_checked(x, fmt, RoundingMode.NEAREST_EVEN, None, fmt.subnormals,
                         fmt.overflow or "inf", site, counted and monitor_is_active())


class ScaledProduct(torch.autograd.Function):
    """``fn(a, b) * alpha (+ bias)`` with a and b cast per tensor (the module docstring).

    ``fn`` is the torch product with its other arguments bound, called with the bias left
    out; ``states(name, backward)`` gives the ScalingState of the tensor ``site/name``."""

    @staticmethod
    def forward(ctx: Any, fn: Any, states: Any, site: str, compute: Format, names: tuple[str, ...],
                a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        qs, invs = [], []
        for x, name in zip((a, b), names, strict=False):
            xc = _to_compute(x.detach(), compute, f"{site}/{name}", counted=False)
            q, inv = cast(xc, states(name, False), f"{site}/{name}")
            qs.append(q.requires_grad_(x.requires_grad))
            invs.append(inv)
        with torch.enable_grad():
            z = fn(*qs)
        out = z.detach() * _alpha(*invs)
        bc = None
        if bias is not None:
            bc = _to_compute(bias.detach(), compute, f"{site}/{names[2]}")
            out = out + bc
        ctx.saved = (fn, states, site, compute, names, z, qs, invs, bias is not None)
        ctx.monitors = active_monitors()
        # (an accumulator's products are float64; the rounded output lies in float32)
        return _to_compute(out, compute, site).to(torch.float32)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        with counting_in(ctx.monitors):  # (on CUDA tensors torch runs this on its own thread)
            return ScaledProduct._backward(ctx, grad)

    @staticmethod
    def _backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        fn, states, site, compute, names, z, qs, invs, has_bias = ctx.saved
        ctx.saved = None
        g = _to_compute(grad, compute, f"{site}/grad_output", counted=False)
        wanted = [q for q in qs if q.requires_grad]
        grads: list[torch.Tensor | None] = [None, None]
        if wanted:
            gq, inv_g = cast(g, states("grad_output", True), f"{site}/grad_output")
            found = iter(torch.autograd.grad(z, wanted, gq.to(z.dtype)))
            for i, q in enumerate(qs):
                if q.requires_grad:  # (the other operand's scale: grad_a = g_q @ b_q^T ...)
                    grads[i] = _to_compute(next(found) * _alpha(inv_g, invs[1 - i]), compute,
                                           f"{site}/grad_{names[i]}")
        gb = None
        if has_bias and ctx.needs_input_grad[7]:
            gb = _to_compute(g.reshape(-1, g.shape[-1]).sum(0), compute, f"{site}/grad_{names[2]}")
        return (None, None, None, None, None, *grads, gb)
