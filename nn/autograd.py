"""The autograd engine, the ``Function`` base class, and the one place where values are rounded.

Precision rules (DESIGN.md section 3), enforced here:

- an op's output is rounded to its format (``ctx.fmt``, chosen by ``Function.output_format``:
  by default the promotion of the input formats) -- each op's ``forward`` does this through
  ``round_array``, usually fused with its arithmetic;
- every gradient is rounded to the format of the tensor it belongs to, by ``backward`` below,
  at a named monitor site (``tensor.grad_site``, e.g. ``"dense/grad_activation"``), so
  activation gradients underflow and overflow exactly where they would on hardware (a hot op
  may do that same single rounding itself, in place, at the same site: ``Linear``'s matmuls);
- gradients of broadcast inputs are summed (in fp32) back to the input's shape first.

Values of the float64 policy (format ``None``) are never rounded.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

import fpsim
from fpsim import FP32, Format
from fpsim.monitor import is_active as _monitor_is_active
from fpsim.quantize import nearest_even_f32_constants
from nn import _kernels, sites
from nn.policy import contains, promote
from nn.tensor import Tensor

# --- rounding ---------------------------------------------------------------------------------

KERNELS_ENABLED = True  # tests flip this to check the numba paths against numpy + fpsim.round

def round_params(fmt: Format) -> tuple | None:
    """The constants of fpsim's float32 nearest-even kernel for ``fmt``, or None where that
    kernel does not apply (then ``fpsim.round`` does the work)."""
    return nearest_even_f32_constants(fmt, fmt.subnormals, fmt.overflow)


def needs_rounding(values_fmt: Format | None, fmt: Format | None) -> bool:
    """False when values of ``values_fmt`` already lie in ``fmt`` (rounding would be exact)."""
    return not contains(fmt, values_fmt)


def use_kernel(fmt: Format | None) -> bool:
    """True if a fused numba kernel may round to ``fmt`` (no monitor is counting events)."""
    return (
        KERNELS_ENABLED
        and fmt is not None
        and not _monitor_is_active()
        and round_params(fmt) is not None
    )


def round_array(
    x: np.ndarray, fmt: Format | None, *, site: str | None = None, out: np.ndarray | None = None
) -> np.ndarray:
    """``x`` rounded (nearest-even) to ``fmt`` in ``fmt``'s carrier; ``out`` may be ``x``.

    float32 -> FP32 and anything -> None (float64) are exact and return ``x`` (or fill ``out``).
    The numba kernel does the work unless an ``fpsim.monitor`` is counting, in which case
    ``fpsim.round(..., site=site)`` does, so that every rounding is counted at its site.
    """
    x = np.asarray(x)  # numpy returns scalars for 0-d operands
    if fmt is None:
        result = x if x.dtype == np.float64 else x.astype(np.float64)
    elif x.dtype == np.float32 and (fmt is FP32 or fmt == FP32):
        result = x
    elif x.dtype != np.float32:
        # round float64 once from its own bits, then the carrier holds the value exactly
        result = np.asarray(fpsim.round(x, fmt, site=site), dtype=np.float32)
    elif use_kernel(fmt):
        src = x if x.flags.c_contiguous else np.ascontiguousarray(x)  # (keeps 0-d as 0-d)
        if out is not None and out.flags.c_contiguous:
            dst = out
        else:
            dst = src if src is not x else np.empty(x.shape, dtype=np.float32)
        _kernels.round_into(src.reshape(-1), dst.reshape(-1), round_params(fmt))
        result = dst
    else:
        direct = out is not None and out.flags.c_contiguous
        result = np.asarray(fpsim.round(x, fmt, site=site, out=out if direct else None))
    if out is not None and result is not out:
        out[...] = result
        return out
    return result


# --- grad mode and name scopes ---------------------------------------------------------------

_GRAD_ENABLED = [True]
_SCOPE = [""]


def is_grad_enabled() -> bool:
    """True unless inside ``no_grad()``."""
    return _GRAD_ENABLED[-1]


@contextlib.contextmanager
def no_grad() -> Iterator[None]:
    """Inside this block ops record no graph (inference, optimizer updates, backward itself)."""
    _GRAD_ENABLED.append(False)
    try:
        yield
    finally:
        _GRAD_ENABLED.pop()


class name_scope:  # noqa: N801 (used like a function: ``with name_scope("dense"):``)
    """Prefix the monitor site names of the ops run inside (layers use their own name)."""

    __slots__ = ("scope",)

    def __init__(self, name: str) -> None:
        self.scope = f"{_SCOPE[-1]}/{name}" if _SCOPE[-1] else name

    def __enter__(self) -> str:
        _SCOPE.append(self.scope)
        return self.scope

    def __exit__(self, *exc: object) -> None:
        _SCOPE.pop()


def current_scope() -> str:
    return _SCOPE[-1]


# --- Function ---------------------------------------------------------------------------------


class Context:
    """What a Function's forward leaves for its backward.

    ``inputs`` (the input Tensors), ``needs_input_grad`` (one bool per input: backward may skip
    the others), ``fmt`` (the output format), ``out`` (the output array), ``scope`` (the name
    scope at forward time), plus whatever the op stores.
    """

    inputs: tuple[Tensor, ...]
    needs_input_grad: tuple[bool, ...]
    fmt: Format | None
    out: np.ndarray
    scope: str

    def site(self, what: str) -> str:
        """A monitor site name: ``"<scope>/<what>"``."""
        return sites.scoped(self.scope, what)

    def output(self) -> Tensor:
        """The forward output as a Tensor without history (for use in backward)."""
        return Tensor._make(self.out, self.fmt)


class Function:
    """One differentiable op. Subclasses write ``forward`` on arrays and ``backward`` in tensor ops.

    ``forward(ctx, *arrays, **params)`` returns the output array with every value already
    rounded to ``ctx.fmt`` (use ``round_array(..., out=...)`` or a fused kernel).
    ``backward(ctx, grad)`` gets the output's gradient as a Tensor in ``ctx.fmt`` and returns
    one Tensor (or None) per input Tensor; the engine reduces broadcasting and rounds each to
    its input's format.
    """

    @staticmethod
    def output_format(*fmts: Format | None, **params: Any) -> Format | None:
        """The format of the output: by default the promotion of the input formats."""
        out = fmts[0]
        for f in fmts:
            if f is not out:
                out = promote(out, f)
        return out

    @staticmethod
    def forward(ctx: Context, *arrays: np.ndarray, **params: Any) -> np.ndarray:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor | None | tuple[Tensor | None, ...]:
        raise NotImplementedError

    @classmethod
    def apply(cls, *inputs: Tensor, **params: Any) -> Tensor:
        """Run forward and, when any input needs a gradient, record the node in the graph."""
        ctx = Context()
        ctx.inputs = inputs
        ctx.fmt = cls.output_format(*[t.fmt for t in inputs], **params)
        ctx.scope = _SCOPE[-1]
        out = cls.forward(ctx, *[t.data for t in inputs], **params)
        ctx.out = out if type(out) is np.ndarray else np.asarray(out)
        ctx.needs_input_grad = needs = tuple([t.requires_grad for t in inputs])
        if _GRAD_ENABLED[-1] and True in needs:
            return Tensor._make(ctx.out, ctx.fmt, cls, ctx)
        return Tensor._make(ctx.out, ctx.fmt)


# --- the backward pass ------------------------------------------------------------------------


def _topological_order(root: Tensor) -> list[Tensor]:
    """Tensors that need a gradient, root first, each before the tensors it was made from."""
    order: list[Tensor] = []
    seen: set[int] = {id(root)}
    stack: list[tuple[Tensor, bool]] = [(root, False)]
    while stack:
        t, done = stack.pop()
        if done:
            order.append(t)
            continue
        stack.append((t, True))
        if t._ctx is not None:
            for parent in reversed(t._ctx.inputs):
                if parent.requires_grad and id(parent) not in seen:
                    seen.add(id(parent))
                    stack.append((parent, False))
    order.reverse()
    return order


def sum_to_shape(data: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum a broadcast gradient back to ``shape`` (numpy's float32 pairwise sum: fp32 work)."""
    if data.shape == shape:
        return data
    lead = data.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, n in enumerate(shape) if n == 1 and data.shape[i + lead] != 1
    )
    return data.sum(axis=axes, keepdims=True).reshape(shape) if axes else data.reshape(shape)


def fit_gradient(grad: Tensor, t: Tensor, site: str) -> Tensor:
    """``grad`` summed to ``t``'s shape and rounded to ``t``'s format (the gradient rule)."""
    data = grad.data
    if data.shape != t.shape:
        if np.broadcast_shapes(data.shape, t.shape) != data.shape:
            raise ValueError(
                f"gradient of shape {data.shape} does not reduce to the tensor's shape {t.shape}"
            )
        data = sum_to_shape(data, t.shape)
    if needs_rounding(grad.fmt, t.fmt) or data.dtype != t.data.dtype:
        data = round_array(data, t.fmt, site=site)
    return Tensor._make(data, t.fmt)


def _accumulate(a: Tensor, b: Tensor, site: str) -> Tensor:
    """a + b computed in the carrier and rounded once to a's format."""
    return Tensor._make(round_array(a.data + b.data, a.fmt, site=site), a.fmt)


def backward(root: Tensor, grad: Any = None) -> None:
    """Fill ``.grad`` of every tensor ``root`` depends on, in reverse topological order.

    Leaves (Variables, user tensors with ``requires_grad``) accumulate gradients across calls;
    intermediate tensors keep this pass's gradient. ``grad`` defaults to 1 for a one-element
    root and is rounded to the root's format.
    """
    if not root.requires_grad:
        raise RuntimeError("backward() on a tensor that does not require grad (no graph to run)")
    if grad is None:
        if root.size != 1:
            raise ValueError(
                f"backward() without a gradient needs a one-element tensor; got shape {root.shape}"
            )
        g = np.ones(root.shape, dtype=root.data.dtype)
    else:
        g = np.asarray(grad.data if isinstance(grad, Tensor) else grad)
        if g.shape != root.shape:
            raise ValueError(f"gradient shape {g.shape} does not match tensor shape {root.shape}")
        g = round_array(g.astype(root.data.dtype), root.fmt, site=root.grad_site or "grad")
    grads: dict[int, Tensor] = {id(root): Tensor._make(g, root.fmt)}
    leaf_arrays: set[int] = set()
    with no_grad():
        for t in _topological_order(root):
            g_t = grads.pop(id(t), None)
            if g_t is None:
                continue
            ctx = t._ctx
            if ctx is None:  # a leaf: accumulate, into an array it owns (optimizers and
                # GradScaler.unscale_ may update .grad.data in place)
                if t.grad is not None:
                    g_t = _accumulate(t.grad, g_t, grad_site(t, None))
                elif id(g_t.data) in leaf_arrays or not _owns(g_t.data):
                    g_t = Tensor._make(g_t.data.copy(), g_t.fmt)
                leaf_arrays.add(id(g_t.data))
                t.grad = g_t
                continue
            t.grad = g_t
            _SCOPE.append(ctx.site("grad"))
            try:
                in_grads = t._op.backward(ctx, g_t)
            finally:
                _SCOPE.pop()
            if not isinstance(in_grads, tuple):
                in_grads = (in_grads,)
            for i, (parent, pg) in enumerate(zip(ctx.inputs, in_grads, strict=True)):
                if pg is None or not parent.requires_grad:
                    continue
                site = grad_site(parent, ctx, i, t._op)
                pg = fit_gradient(pg, parent, site)
                key = id(parent)
                grads[key] = pg if key not in grads else _accumulate(grads[key], pg, site)


def _owns(a: np.ndarray) -> bool:
    return a.base is None and a.flags.writeable


def grad_site(t: Tensor, ctx: Context | None, i: int = 0, op: type | None = None) -> str:
    """The monitor site where the gradient of ``t`` (input ``i`` of ``op``) is rounded."""
    if t.grad_site:
        return t.grad_site
    if ctx is None:
        return "grad"
    return ctx.site(f"grad_{op.__name__}_input{i}")
