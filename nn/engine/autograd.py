"""The autograd engine: the ``Function`` base class, the graph it records, and ``backward``.

Precision rules (docs/semantics.md), enforced here (the rounding itself is nn.rounding's):

- an op's output is rounded to its format (``ctx.fmt``, chosen by ``Function.output_format``:
  by default the promotion of the input formats) -- each op's ``forward`` does this through
  ``round_array``, usually fused with its arithmetic;
- every gradient is rounded to the format of the tensor it belongs to, by ``backward`` below,
  at a named monitor site (``tensor.grad_site``, e.g. ``"dense/grad_activation"``), so
  activation gradients underflow and overflow exactly where they would on hardware (a hot op
  may do that same single rounding itself, in place, at the same site: ``Linear``'s matmuls);
- gradients of broadcast inputs are summed (in fp32) back to the input's shape first.

Grad mode (``no_grad``) and the name scope (``nn.engine.sites.name_scope``) are per thread (and per
asyncio task): each lives in a ``contextvars.ContextVar``, so two threads training at once never
see each other's state.

Values of the float64 policy (format ``None``) are never rounded.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import numpy as np

from fpsim import Format
from nn.engine import sites
from nn.engine.formats import promote
from nn.engine.rounding import fit_array, round_array
from nn.engine.sites import current_scope, name_scope
from nn.engine.tensor import Tensor

# --- grad mode (per thread / task); the name scope is nn.sites' ----------------------------

_GRAD_ENABLED: contextvars.ContextVar[bool] = contextvars.ContextVar("nn_grad", default=True)


def is_grad_enabled() -> bool:
    """True unless inside ``no_grad()`` (in this thread)."""
    return _GRAD_ENABLED.get()


@contextlib.contextmanager
def no_grad() -> Iterator[None]:
    """Inside this block ops record no graph (inference, optimizer updates, backward itself).

    Per thread: ``no_grad`` in one thread leaves another thread's ops recording.
    """
    token = _GRAD_ENABLED.set(False)
    try:
        yield
    finally:
        _GRAD_ENABLED.reset(token)


# --- Function ---------------------------------------------------------------------------------


class Context:
    """What a Function's forward leaves for its backward.

    ``op`` (the Function), ``inputs`` (the input Tensors), ``needs_input_grad`` (one bool per
    input: backward may skip the others), ``fmt`` (the output format), ``out`` (the output
    array), ``scope`` (the name scope at forward time), and ``saved``: what forward keeps for
    backward, by name (``ctx.saved["axis"] = axis``).
    """

    __slots__ = ("op", "inputs", "needs_input_grad", "fmt", "out", "scope", "saved")

    def __init__(self, op: type[Function], inputs: tuple[Tensor, ...], fmt: Format | None,
                 scope: str) -> None:
        self.op = op
        self.inputs = inputs
        self.fmt = fmt
        self.scope = scope
        self.saved: dict[str, Any] = {}
        self.needs_input_grad: tuple[bool, ...] = ()
        self.out: np.ndarray = np.empty(0, dtype=np.float32)

    def site(self, what: str) -> str:
        """A monitor site name: ``"<scope>/<what>"``."""
        return sites.scoped(self.scope, what)

    def output_site(self) -> str:
        """Where the op rounds its output: ``"<scope>/<Op>"``."""
        return sites.scoped(self.scope, sites.op_output(self.op.__name__))

    def output(self) -> Tensor:
        """The forward output as a Tensor without history (for use in backward)."""
        return Tensor._make(self.out, self.fmt)


Grads = Tensor | None | tuple[Tensor | None, ...]


class Function:
    """One differentiable op. Subclasses write ``forward`` on arrays and ``backward`` in tensor ops.

    ``forward(ctx, *arrays, **params)`` returns the output array with every value already
    rounded to ``ctx.fmt`` (use ``round_array(..., out=...)`` or a fused kernel); each op
    names its own arrays and parameters (``forward(ctx, a, b)``). ``backward(ctx, grad)``
    gets the output's gradient as a Tensor in ``ctx.fmt`` and returns one Tensor (or None) per
    input Tensor; the engine reduces broadcasting and rounds each to its input's format.
    """

    # Declared as a callable, not a method, so that each op's forward names its own arrays and
    # parameters (``forward(ctx, a, b)``) without breaking the base class's signature.
    forward: ClassVar[Callable[..., np.ndarray]]

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Grads:
        raise NotImplementedError

    @staticmethod
    def output_format(*fmts: Format | None, **params: Any) -> Format | None:
        """The format of the output: by default the promotion of the input formats."""
        out = fmts[0]
        for f in fmts:
            if f is not out:
                out = promote(out, f)
        return out

    @classmethod
    def apply(cls, *inputs: Tensor, **params: Any) -> Tensor:
        """Run forward and, when any input needs a gradient, record the node in the graph."""
        ctx = Context(cls, inputs, cls.output_format(*[t.fmt for t in inputs], **params),
                      current_scope())
        out = cls.forward(ctx, *[t.data for t in inputs], **params)
        ctx.out = out if type(out) is np.ndarray else np.asarray(out)
        ctx.needs_input_grad = needs = tuple([t.requires_grad for t in inputs])
        if _GRAD_ENABLED.get() and True in needs:
            return Tensor._make(ctx.out, ctx.fmt, cls, ctx)
        return Tensor._make(ctx.out, ctx.fmt)


# --- the backward pass ------------------------------------------------------------------------


def _topological_order(root: Tensor, watched: frozenset[int] = frozenset()) -> list[Tensor]:
    """Tensors that need a gradient (or are ``watched`` ids), root first, each before the
    tensors it was made from.

    An iterative depth-first post-order, a tensor marked when it is expanded (not when it is
    pushed): a tensor reached along paths of different lengths (``w * w * w``) must come after
    every tensor made from it, or the gradient arriving by the longer path would be dropped.
    """
    order: list[Tensor] = []
    expanded: set[int] = set()
    stack: list[tuple[Tensor, bool]] = [(root, False)]
    while stack:
        t, done = stack.pop()
        if done:
            order.append(t)
            continue
        if id(t) in expanded:
            continue
        expanded.add(id(t))
        stack.append((t, True))
        if t._ctx is not None:
            for parent in reversed(t._ctx.inputs):
                if (parent.requires_grad or id(parent) in watched) and id(parent) not in expanded:
                    stack.append((parent, False))
    order.reverse()
    return order


def fit_gradient(grad: Tensor, t: Tensor, site: str) -> Tensor:
    """``grad`` summed to ``t``'s shape and rounded to ``t``'s format (the gradient rule)."""
    return Tensor._make(fit_array(grad.data, grad.fmt, t.shape, t.fmt, t.data.dtype, site), t.fmt)


def _accumulate(a: Tensor, b: Tensor, site: str) -> Tensor:
    """a + b computed in the carrier and rounded once to a's format."""
    return Tensor._make(round_array(a.data + b.data, a.fmt, site=site), a.fmt)


def _root_gradient(root: Tensor, grad: Any, default_ones: bool) -> Tensor:
    """The seed gradient of a backward pass, checked and rounded to the root's format."""
    if grad is None:
        if root.size != 1 and not default_ones:
            raise ValueError(
                f"backward() without a gradient needs a one-element tensor; got shape {root.shape}"
            )
        g = np.ones(root.shape, dtype=root.data.dtype)
    else:
        g = np.asarray(grad.data if isinstance(grad, Tensor) else grad)
        if g.dtype.kind not in "biuf":
            raise TypeError(f"backward(grad=...) must be real numbers, got dtype {g.dtype}")
        if g.shape != root.shape:
            raise ValueError(f"gradient shape {g.shape} does not match tensor shape {root.shape}")
        g = round_array(g.astype(root.data.dtype), root.fmt, site=root.grad_site or sites.GRAD)
    return Tensor._make(g, root.fmt)


def _run_backward(root: Tensor, seed: Tensor, on_leaf: Callable[[Tensor, Tensor], None],
                  on_node: Callable[[Tensor, Tensor], None],
                  watched: frozenset[int] = frozenset()) -> None:
    """The backward pass: each tensor's gradient, in reverse topological order, handed to
    ``on_leaf`` (leaves) or ``on_node`` (op outputs, before their op's backward runs)."""
    grads: dict[int, Tensor] = {id(root): seed}
    with no_grad():
        for t in _topological_order(root, watched):
            g_t = grads.pop(id(t), None)
            if g_t is None:
                continue
            ctx, op = t._ctx, t._op
            if ctx is None or op is None:
                on_leaf(t, g_t)
                continue
            on_node(t, g_t)
            with name_scope(ctx.site(sites.GRAD), absolute=True):
                in_grads = op.backward(ctx, g_t)
            if not isinstance(in_grads, tuple):
                in_grads = (in_grads,)
            for i, (parent, pg) in enumerate(zip(ctx.inputs, in_grads, strict=True)):
                if pg is None or not (parent.requires_grad or id(parent) in watched):
                    continue
                site = grad_site(parent, ctx, i, op)
                pg = fit_gradient(pg, parent, site)
                key = id(parent)
                grads[key] = pg if key not in grads else _accumulate(grads[key], pg, site)


def backward(root: Tensor, grad: Any = None) -> None:
    """Fill ``.grad`` of every tensor ``root`` depends on, in reverse topological order.

    Leaves (Variables, user tensors with ``requires_grad``) accumulate gradients across calls;
    intermediate tensors keep this pass's gradient. ``grad`` defaults to 1 for a one-element
    root and is rounded to the root's format.
    """
    if not root.requires_grad:
        raise RuntimeError("backward() on a tensor that does not require grad (no graph to run)")
    leaf_arrays: set[int] = set()

    def on_leaf(t: Tensor, g_t: Tensor) -> None:  # accumulate, into an array the leaf owns
        # (optimizers and GradScaler.unscale_ may update .grad.data in place)
        if t.grad is not None:
            g_t = _accumulate(t.grad, g_t, grad_site(t, None))
        elif id(g_t.data) in leaf_arrays or not _owns(g_t.data):
            g_t = Tensor._make(g_t.data.copy(), g_t.fmt)
        leaf_arrays.add(id(g_t.data))
        t.grad = g_t

    def on_node(t: Tensor, g_t: Tensor) -> None:
        t.grad = g_t

    _run_backward(root, _root_gradient(root, grad, default_ones=False), on_leaf, on_node)


def gradients(root: Tensor, sources: list[Tensor], grad: Any = None,
              watched: frozenset[int] = frozenset()) -> list[Tensor | None]:
    """d(root)/d(source) for each source, as fresh Tensors without history; no ``.grad`` of any
    tensor is read or written (the engine behind ``nn.GradientTape.gradient``).

    - Each gradient is in its source's format, rounded at the same monitor sites as
      ``backward``; a source ``root`` does not depend on gets None.
    - ``grad`` (the seed) defaults to ones of the root's shape: the gradient of ``root.sum()``,
      as TensorFlow does for a non-scalar target.
    - ``watched``: ids of tensors to differentiate through even if ``requires_grad`` is False.
    """
    wanted = {id(s): i for i, s in enumerate(sources)}
    found: list[Tensor | None] = [None] * len(sources)
    if not (root.requires_grad or id(root) in watched):
        return found

    def keep(t: Tensor, g_t: Tensor) -> None:
        i = wanted.get(id(t))
        if i is not None:
            found[i] = Tensor._make(g_t.data.copy(), g_t.fmt)

    _run_backward(root, _root_gradient(root, grad, default_ones=True), keep, keep, watched)
    for i, s in enumerate(sources):  # a source listed twice gets the gradient twice
        if found[i] is None and id(s) in wanted and wanted[id(s)] != i:
            first = found[wanted[id(s)]]
            found[i] = None if first is None else Tensor._make(first.data.copy(), first.fmt)
    return found


def _owns(a: np.ndarray) -> bool:
    return a.base is None and a.flags.writeable


def grad_site(
    t: Tensor, ctx: Context | None, i: int = 0, op: type[Function] | None = None
) -> str:
    """The monitor site where the gradient of ``t`` (input ``i`` of ``op``) is rounded."""
    if t.grad_site:
        return t.grad_site
    if ctx is None or op is None:
        return sites.GRAD
    return ctx.site(sites.op_input_grad(op.__name__, i))


__all__ = ["Context", "Function", "backward", "current_scope", "gradients", "is_grad_enabled",
           "name_scope", "no_grad"]  # (name_scope and current_scope live in nn.sites)
