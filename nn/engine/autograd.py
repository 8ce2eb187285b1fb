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

Higher derivatives (``create_graph=True``, PyTorch's double backward): the backward pass then
runs with grad mode on, so each op's backward -- written in tensor ops -- records a graph of its
own, and the gradient rule (sum to shape, round to the tensor's format) is itself an op
(``FitGradient``) whose gradient passes straight through its rounding, as ``Cast``'s does. An op
declares ``differentiable_backward = True`` when its backward is built from such ops only; the
gradients of any other op are marked once-differentiable, and differentiating through them
raises an error naming the op (never a silently dropped term).
"""

from __future__ import annotations

import contextlib
import contextvars
import weakref
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
def enable_grad() -> Iterator[None]:
    """Inside this block ops record the graph again (inside ``no_grad`` too), per thread."""
    token = _GRAD_ENABLED.set(True)
    try:
        yield
    finally:
        _GRAD_ENABLED.reset(token)


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
    backward, by name (``ctx.saved["axis"] = axis``). ``freed`` is set once a backward pass
    without ``retain_graph`` ran through the node (a second pass then raises, as PyTorch's).
    """

    __slots__ = ("op", "inputs", "needs_input_grad", "fmt", "out", "scope", "saved", "freed",
                 "out_ref")

    def __init__(self, op: type[Function], inputs: tuple[Tensor, ...], fmt: Format | None,
                 scope: str) -> None:
        self.op = op
        self.inputs = inputs
        self.fmt = fmt
        self.scope = scope
        self.saved: dict[str, Any] = {}
        self.needs_input_grad: tuple[bool, ...] = ()
        self.out: np.ndarray = np.empty(0, dtype=np.float32)
        self.freed = False
        self.out_ref: weakref.ref[Tensor] | None = None

    def site(self, what: str) -> str:
        """A monitor site name: ``"<scope>/<what>"``."""
        return sites.scoped(self.scope, what)

    def output_site(self) -> str:
        """Where the op rounds its output: ``"<scope>/<Op>"``."""
        return sites.scoped(self.scope, sites.op_output(self.op.__name__))

    def output(self) -> Tensor:
        """The forward output, for use in backward: the output Tensor itself (with its history)
        while a graph is recorded (``create_graph=True``), else a Tensor without history."""
        if _GRAD_ENABLED.get() and self.out_ref is not None:
            live = self.out_ref()
            if live is not None:
                return live
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

    differentiable_backward: ClassVar[bool] = False
    """True when ``backward`` is written in differentiable tensor ops only (no raw arrays), so
    ``create_graph=True`` can differentiate through it; see the module docstring."""

    checks_output: ClassVar[bool] = False
    """True for ops defined outside nn (set by ``__init_subclass__``): ``apply`` then refuses a
    forward output that does not lie in the output format (``check_in_format``)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.checks_output = cls.__module__.split(".")[0] not in ("nn", "fpsim")

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
        if cls.checks_output:
            check_in_format(cls.__name__, ctx.out, ctx.fmt)
        ctx.needs_input_grad = needs = tuple([t.requires_grad for t in inputs])
        if _GRAD_ENABLED.get() and True in needs:
            t = Tensor._make(ctx.out, ctx.fmt, cls, ctx)
            ctx.out_ref = weakref.ref(t)
            return t
        return Tensor._make(ctx.out, ctx.fmt)


def check_in_format(op: str, values: np.ndarray, fmt: Format | None) -> None:
    """Refuse (ValueError) ``values`` that do not all lie in ``fmt`` in its carrier: a custom
    op's forward must round its output to the format it is labelled with (nn rounds nothing
    after a forward; we refuse rather than round, so the port's missing rounding shows)."""
    carrier = np.float64 if fmt is None else np.float32
    if values.dtype != carrier:
        raise ValueError(f"{op}.forward returned a {values.dtype} array; the output format "
                         f"{'float64' if fmt is None else fmt.name} is carried in "
                         f"{np.dtype(carrier).name}")
    if fmt is None:
        return
    rounded = round_array(values.copy(), fmt)
    same = (rounded == values) | (np.isnan(rounded) & np.isnan(values))
    if not same.all():
        i = int(np.argmin(same.reshape(-1)))
        bad, near = values.reshape(-1)[i], rounded.reshape(-1)[i]
        raise ValueError(
            f"{op}.forward returned values that are not {fmt.name} numbers (e.g. {float(bad)!r}, "
            f"which rounds to {fmt.name} as {float(near)!r}): round the output to the op's "
            f"format (nn.engine.rounding.round_array(out, ctx.fmt)) or label it with the "
            f"format it is in (output_format)")


class FitGradient(Function):
    """The gradient rule as an op (used when ``create_graph=True``): ``grad`` summed to
    ``shape`` and rounded to ``fmt`` at ``site``; its own gradient is broadcast back and passes
    straight through the rounding (as ``Cast``'s)."""

    differentiable_backward = True

    @staticmethod
    def output_format(*fmts: Format | None, **params: Any) -> Format | None:
        fmt: Format | None = params["fmt"]
        return fmt

    @staticmethod
    def forward(ctx: Context, g: np.ndarray, shape: tuple[int, ...] = (), fmt: Any = None,
                dtype: Any = None, site: str = "") -> np.ndarray:
        return fit_array(g, ctx.inputs[0].fmt, shape, ctx.fmt, dtype, site)

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        return BroadcastGradient.apply(grad, shape=ctx.inputs[0].shape)


class BroadcastGradient(Function):
    """``grad`` broadcast to ``shape`` (exact): ``FitGradient``'s backward."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx: Context, g: np.ndarray, shape: tuple[int, ...] = ()) -> np.ndarray:
        return np.broadcast_to(g, shape)

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        t = ctx.inputs[0]
        return FitGradient.apply(grad, shape=t.shape, fmt=t.fmt, dtype=t.data.dtype,
                                 site=sites.GRAD)


class OnceDifferentiable(Function):
    """Marks the gradients of an op whose backward is not differentiable (``create_graph``):
    forward passes the gradient on; differentiating through it raises naming the op."""

    @staticmethod
    def output_format(*fmts: Format | None, **params: Any) -> Format | None:
        return fmts[0]

    @staticmethod
    def forward(ctx: Context, g: np.ndarray, *inputs: np.ndarray, op: str = "") -> np.ndarray:
        ctx.saved["op"] = op
        return g

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Grads:
        op = ctx.saved["op"]
        raise RuntimeError(
            f"{op} has no double backward: its backward is not written in differentiable ops, "
            f"so a gradient taken with create_graph=True (or a nested GradientTape) cannot be "
            f"differentiated through {op}. Ops with double backward: "
            f"{', '.join(sorted(differentiable_ops()))}")


def differentiable_ops() -> set[str]:
    """Names of the Function subclasses that declare ``differentiable_backward``."""
    found: set[str] = set()
    stack = list(Function.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.differentiable_backward and not cls.__name__.startswith("_") and cls not in (
                FitGradient, BroadcastGradient):
            found.add(cls.__name__)
    return found


# --- the backward pass ------------------------------------------------------------------------


def _topological_order(roots: Tensor | list[Tensor], watched: frozenset[int] = frozenset()
                       ) -> list[Tensor]:
    """Tensors that need a gradient (or are ``watched`` ids), from ``roots`` (one tensor or
    several, as if made from one more), each before the tensors it was made from.

    An iterative depth-first post-order, a tensor marked when it is expanded (not when it is
    pushed): a tensor reached along paths of different lengths (``w * w * w``) must come after
    every tensor made from it, or the gradient arriving by the longer path would be dropped.
    """
    order: list[Tensor] = []
    expanded: set[int] = set()
    starts = [roots] if isinstance(roots, Tensor) else roots
    stack: list[tuple[Tensor, bool]] = [(r, False) for r in reversed(starts)]
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
    """``grad`` summed to ``t``'s shape and rounded to ``t``'s format (the gradient rule); an op
    (``FitGradient``) while a graph is recorded (``create_graph=True``)."""
    if _GRAD_ENABLED.get() and grad.requires_grad:
        return FitGradient.apply(grad, shape=t.shape, fmt=t.fmt, dtype=t.data.dtype, site=site)
    return Tensor._make(fit_array(grad.data, grad.fmt, t.shape, t.fmt, t.data.dtype, site), t.fmt)


def _accumulate(a: Tensor, b: Tensor, site: str) -> Tensor:
    """a + b computed in the carrier and rounded once to a's format (the Add op, recorded, while
    a graph is recorded)."""
    if _GRAD_ENABLED.get() and (a.requires_grad or b.requires_grad):
        return a + b
    return Tensor._make(round_array(a.data + b.data, a.fmt, site=site), a.fmt)


def _once_differentiable(pg: Tensor, ctx: Context, g_t: Tensor) -> Tensor:
    """``pg`` (a gradient of ``ctx.op``, whose backward is not differentiable) as a node whose
    own backward raises naming the op."""
    sources = tuple(t for t in (g_t, *ctx.inputs) if t.requires_grad)
    if not sources:
        return pg
    return OnceDifferentiable.apply(Tensor._make(pg.data, pg.fmt), *sources,
                                    op=ctx.op.__name__)


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
            raise TypeError(f"backward(gradient=...) must be real numbers, got dtype {g.dtype}")
        if g.shape != root.shape:
            raise ValueError(f"gradient shape {g.shape} does not match tensor shape {root.shape}")
        g = round_array(g.astype(root.data.dtype), root.fmt, site=root.grad_site or sites.GRAD)
    return Tensor._make(g, root.fmt)


_FREED = (
    "Trying to backward through the graph a second time: a backward pass without "
    "retain_graph=True freed this graph (PyTorch's rule). Pass retain_graph=True to the first "
    "backward()/autograd.grad() to run several passes over one graph."
)


def _run_backward(roots: list[Tensor], seeds: list[Tensor],
                  on_leaf: Callable[[Tensor, Tensor], None],
                  on_node: Callable[[Tensor, Tensor], None],
                  watched: frozenset[int] = frozenset(), create_graph: bool = False,
                  retain_graph: bool = True) -> None:
    """The backward pass from ``roots`` (each seeded with its gradient in ``seeds``; the pass
    is the sum of their vector-Jacobian products, as PyTorch's for several outputs): each
    tensor's gradient, in reverse topological order, handed to ``on_leaf`` (leaves) or
    ``on_node`` (op outputs, before their op's backward runs).

    ``create_graph``: record the backward's own ops (higher derivatives). ``retain_graph``
    False: mark the nodes run through as freed (a later pass over them raises)."""
    grads: dict[int, Tensor] = {}
    with enable_grad() if create_graph else no_grad():
        for root, seed in zip(roots, seeds, strict=True):  # a root listed twice: seeds summed
            key = id(root)
            grads[key] = seed if key not in grads else _accumulate(
                grads[key], seed, root.grad_site or sites.GRAD)
    order = _topological_order(roots, watched)
    for t in order:
        if t._ctx is not None and t._ctx.freed:
            raise RuntimeError(_FREED)
    with enable_grad() if create_graph else no_grad():
        for t in order:
            g_t = grads.pop(id(t), None)
            if g_t is None:
                continue
            ctx, op = t._ctx, t._op
            if ctx is None or op is None:
                on_leaf(t, g_t)
                continue
            on_node(t, g_t)
            once = create_graph and not op.differentiable_backward
            with name_scope(ctx.site(sites.GRAD), absolute=True), \
                    no_grad() if once else contextlib.nullcontext():
                in_grads = op.backward(ctx, g_t)
            if not isinstance(in_grads, tuple):
                in_grads = (in_grads,)
            if once:
                in_grads = tuple(None if pg is None else _once_differentiable(pg, ctx, g_t)
                                 for pg in in_grads)
            for i, (parent, pg) in enumerate(zip(ctx.inputs, in_grads, strict=True)):
                if pg is None or not (parent.requires_grad or id(parent) in watched):
                    continue
                site = grad_site(parent, ctx, i, op)
                pg = fit_gradient(pg, parent, site)
                key = id(parent)
                grads[key] = pg if key not in grads else _accumulate(grads[key], pg, site)
    if not retain_graph:
        for t in order:
            if t._ctx is not None:
                t._ctx.freed = True


def backward(root: Tensor | list[Tensor], grad: Any = None, retain_graph: bool = True,
             create_graph: bool = False) -> None:
    """Fill ``.grad`` of every tensor ``root`` depends on, in reverse topological order.
    ``root`` may be a list of tensors, ``grad`` then a list of one seed (or None) per root:
    one pass, the sum of their vector-Jacobian products (PyTorch's ``autograd.backward``).

    Leaves (Variables, user tensors with ``requires_grad``) accumulate gradients across calls;
    intermediate tensors keep this pass's gradient. ``grad`` defaults to 1 for a one-element
    root and is rounded to the root's format. ``create_graph``: the gradients keep a history
    (higher derivatives); ``retain_graph`` False frees the graph (see ``_run_backward``).
    """
    roots, seeds = ([root], [grad]) if isinstance(root, Tensor) else (list(root), list(grad))
    for r in roots:
        if not r.requires_grad:
            raise RuntimeError("backward() on a tensor that does not require grad (no graph to "
                               "run)")
    leaf_arrays: set[int] = set()

    def on_leaf(t: Tensor, g_t: Tensor) -> None:  # accumulate, into an array the leaf owns
        # (optimizers and GradScaler.unscale_ may update .grad.data in place)
        if t.grad is not None:
            g_t = _accumulate(t.grad, g_t, grad_site(t, None))
        elif id(g_t.data) in leaf_arrays or not _owns(g_t.data):
            g_t = _with_data(g_t, g_t.data.copy())
        leaf_arrays.add(id(g_t.data))
        t.grad = g_t

    def on_node(t: Tensor, g_t: Tensor) -> None:
        t.grad = g_t

    _run_backward(roots, [_root_gradient(r, s, default_ones=False)
                          for r, s in zip(roots, seeds, strict=True)],
                  on_leaf, on_node, create_graph=create_graph, retain_graph=retain_graph)


def _with_data(t: Tensor, data: np.ndarray) -> Tensor:
    """``t`` over another array of the same values, keeping its history."""
    return Tensor._make(data, t.fmt, t._op, t._ctx)


def gradients(root: Tensor | list[Tensor], sources: list[Tensor], grad: Any = None,
              watched: frozenset[int] = frozenset(), create_graph: bool = False,
              retain_graph: bool = True) -> list[Tensor | None]:
    """d(root)/d(source) for each source, as fresh Tensors (without history unless
    ``create_graph``); no ``.grad`` of any tensor is read or written (the engine behind
    ``nn.GradientTape.gradient`` and the PyTorch face's ``autograd.grad``).

    - ``root`` may be a list of tensors, with ``grad`` then a list of one seed (or None) per
      root: the result is the sum of their vector-Jacobian products, in one backward pass.
    - Each gradient is in its source's format, rounded at the same monitor sites as
      ``backward``; a source ``root`` does not depend on gets None.
    - ``grad`` (the seed) defaults to ones of the root's shape: the gradient of ``root.sum()``,
      as TensorFlow does for a non-scalar target.
    - ``watched``: ids of tensors to differentiate through even if ``requires_grad`` is False.
    """
    wanted = {id(s): i for i, s in enumerate(sources)}
    found: list[Tensor | None] = [None] * len(sources)
    roots, seeds = ([root], [grad]) if isinstance(root, Tensor) else (list(root), list(grad))
    live = [(r, s) for r, s in zip(roots, seeds, strict=True)
            if r.requires_grad or id(r) in watched]
    if not live:
        return found

    def keep(t: Tensor, g_t: Tensor) -> None:
        i = wanted.get(id(t))
        if i is not None:
            found[i] = _with_data(g_t, g_t.data.copy()) if create_graph else Tensor._make(
                g_t.data.copy(), g_t.fmt)

    _run_backward([r for r, _ in live],
                  [_root_gradient(r, s, default_ones=True) for r, s in live], keep, keep, watched,
                  create_graph=create_graph, retain_graph=retain_graph)
    for i, s in enumerate(sources):  # a source listed twice gets the gradient twice
        if found[i] is None and id(s) in wanted and wanted[id(s)] != i:
            first = found[wanted[id(s)]]
            found[i] = None if first is None else _with_data(first, first.data.copy())
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


# (name_scope and current_scope live in nn.sites)
__all__ = ["Context", "Function", "backward", "current_scope", "differentiable_ops",
           "enable_grad", "gradients", "is_grad_enabled", "name_scope", "no_grad"]
