"""``torch.autograd``: ``grad``, ``backward`` and ``Function`` (PyTorch's custom-op class).

``grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
allow_unused=None)`` returns one gradient per input, without touching ``.grad``; several
outputs give the sum of their vector-Jacobian products (one seed per output in
``grad_outputs``, None for a one-element output), from one backward pass; with
``create_graph=True`` the gradients keep their history, so a gradient penalty can be
differentiated (nn's engine: ``nn.engine.autograd.gradients``). ``retain_graph`` defaults to
``create_graph``; a pass without it frees the graph, as PyTorch's.

``Function``: subclass it with static ``forward(ctx, *args)`` and ``backward(ctx, *grads)``
written in tensor ops, call it through ``apply``. ``ctx.save_for_backward(*tensors)`` /
``ctx.saved_tensors`` and ``ctx.needs_input_grad`` are PyTorch's. The forward runs without
recording (its own ops are not differentiated; ``backward`` is) and returns a tensor or a tuple
of tensors, whose values must lie in their dtypes (a tensor built by nn ops always does).
``ctx.mark_non_differentiable(*outputs)`` is PyTorch's: those outputs do not require grad, and
``backward`` gets zeros for them. One output of a forward may be differentiable (a tuple with
several differentiable outputs raises, naming the fix). Backward passes run with autocast off
unless ``torch.amp.custom_bwd`` restores the forward's state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from nn.engine import autograd as _engine
from nn.engine.tensor import Tensor
from nn.precision.autocast import disabled as _autocast_disabled


def _tensors(value: Any, what: str) -> list[Tensor]:
    items = [value] if isinstance(value, Tensor) else list(value)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(f"autograd.grad: {what}[{i}] is a {type(t).__name__}, not a tensor")
    return items


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"autograd.grad: {name} must be True or False, got {value!r}")
    return bool(value)


def _seeds(grad_outputs: Any, outs: list[Tensor]) -> list[Any]:
    """One seed (a tensor, or None for a one-element output) per output, as PyTorch pairs
    them."""
    if grad_outputs is None:
        seeds: list[Any] = [None] * len(outs)
    elif isinstance(grad_outputs, Tensor):
        seeds = [grad_outputs]
    else:
        seeds = list(grad_outputs)
    if len(seeds) != len(outs):
        raise RuntimeError(f"grad_outputs has {len(seeds)} entries but outputs has "
                           f"{len(outs)}: give one per output (None for a one-element output)")
    for i, (o, s) in enumerate(zip(outs, seeds, strict=True)):
        if s is None and o.size != 1:
            raise RuntimeError(f"grad can be implicitly created only for scalar outputs "
                               f"(outputs[{i}] has shape {o.shape}); pass grad_outputs=")
        if s is not None and not isinstance(s, Tensor):
            raise TypeError(f"autograd.grad: grad_outputs[{i}] is a {type(s).__name__}, not a "
                            "tensor (or None)")
    return seeds


def grad(outputs: Tensor | Iterable[Tensor], inputs: Tensor | Iterable[Tensor],
         grad_outputs: Any = None, retain_graph: bool | None = None, create_graph: bool = False,
         only_inputs: bool = True, allow_unused: bool | None = None) -> tuple[Tensor | None, ...]:
    """d(outputs)/d(inputs), one tensor (or None, with ``allow_unused=True``) per input.

    Several outputs give the sum of their vector-Jacobian products (``grad_outputs``: one seed
    per output), from one backward pass, as PyTorch's."""
    outs = _tensors(outputs, "outputs")
    seeds = _seeds(grad_outputs, outs)
    sources = _tensors(inputs, "inputs")
    for i, s in enumerate(sources):
        if not s.requires_grad:
            raise RuntimeError(f"autograd.grad: inputs[{i}] does not require grad")
    for i, o in enumerate(outs):
        if not o.requires_grad:
            raise RuntimeError(f"autograd.grad: outputs[{i}] does not require grad (no graph)")
    create = _flag("create_graph", create_graph)
    retain = create if retain_graph is None else _flag("retain_graph", retain_graph)
    with _autocast_disabled():  # a backward runs each op in its forward's formats
        found = _engine.gradients(outs, sources, seeds, create_graph=create,
                                  retain_graph=retain)
    if not allow_unused:
        for i, g in enumerate(found):
            if g is None:
                raise RuntimeError(f"autograd.grad: inputs[{i}] was not used in the graph; "
                                   "pass allow_unused=True to get None for it")
    return tuple(found)


def backward(tensors: Tensor | Iterable[Tensor], grad_tensors: Any = None,
             retain_graph: bool | None = None, create_graph: bool = False) -> None:
    """Accumulate into every leaf's ``.grad`` the sum of the vector-Jacobian products of
    ``tensors`` (one seed per tensor in ``grad_tensors``, None for a one-element tensor), in one
    backward pass, as PyTorch's ``torch.autograd.backward``."""
    outs = _tensors(tensors, "tensors")
    seeds = _seeds(grad_tensors, outs)
    for i, o in enumerate(outs):
        if not o.requires_grad:
            raise RuntimeError(f"autograd.backward: tensors[{i}] does not require grad")
    create = _flag("create_graph", create_graph)
    retain = create if retain_graph is None else _flag("retain_graph", retain_graph)
    _engine.backward(outs, seeds, retain_graph=retain, create_graph=create)


class FunctionCtx:
    """What ``Function.forward`` leaves for ``backward`` (PyTorch's ``ctx``): tensors by
    ``save_for_backward``, anything else as attributes (``ctx.alpha = 2``)."""

    def __init__(self, needs_input_grad: tuple[bool, ...]) -> None:
        self.needs_input_grad = needs_input_grad
        self._saved: tuple[Any, ...] = ()
        self._non_differentiable: set[int] = set()

    def save_for_backward(self, *tensors: Any) -> None:
        self._saved = tensors

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        return self._saved

    def mark_non_differentiable(self, *tensors: Any) -> None:
        """The outputs ``tensors`` (returned by this forward) get no gradient: they do not
        require grad, and ``backward`` receives zeros for them (PyTorch's)."""
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(f"mark_non_differentiable: argument {i} is a "
                                f"{type(t).__name__}, not a tensor")
            self._non_differentiable.add(id(t))


class _CustomNode(_engine.Function):
    """The graph node of a ``Function.apply``: its output is the forward's, its backward the
    user's ``backward`` (written in tensor ops, so it records under ``create_graph``)."""

    differentiable_backward = True

    @staticmethod
    def output_format(*fmts: Any, **params: Any) -> Any:
        return params["out"].fmt

    @staticmethod
    def forward(ctx: _engine.Context, *arrays: np.ndarray, out: Any = None, fn: Any = None,
                user_ctx: Any = None, positions: Any = None, outputs: Any = None,
                index: int = 0) -> np.ndarray:
        ctx.saved.update(fn=fn, user_ctx=user_ctx, positions=positions, outputs=outputs,
                         index=index)
        data: np.ndarray = out.data
        return data

    @staticmethod
    def backward(ctx: _engine.Context, grad: Tensor) -> tuple[Tensor | None, ...]:
        fn, user_ctx, positions = ctx.saved["fn"], ctx.saved["user_ctx"], ctx.saved["positions"]
        outputs, index = ctx.saved["outputs"], ctx.saved["index"]
        grads = [grad if i == index else Tensor._make(np.zeros(shape, dtype), fmt)
                 for i, (shape, dtype, fmt) in enumerate(outputs)]  # zeros for the others
        got = fn.backward(user_ctx, *grads)
        got = got if isinstance(got, tuple) else (got,)
        n_args = len(user_ctx.needs_input_grad)
        if len(got) != n_args:
            raise RuntimeError(f"{fn.__name__}.backward returned {len(got)} gradients; forward "
                               f"took {n_args} inputs (return None for the others)")
        picked = []
        for i in positions:
            g = got[i]
            if g is not None and not isinstance(g, Tensor):
                raise TypeError(f"{fn.__name__}.backward: gradient {i} is a "
                                f"{type(g).__name__}, not a tensor (or None)")
            picked.append(g)
        return tuple(picked)


class Function:
    """A custom differentiable op, PyTorch's way (see the module docstring)::

        class Square(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * 2.0 * x

        y = Square.apply(x)
    """

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: FunctionCtx, *grad_outputs: Any) -> Any:
        raise NotImplementedError

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        ctx = FunctionCtx(needs)
        with _engine.no_grad():
            out = cls.forward(ctx, *args, **kwargs)
        outputs = out if isinstance(out, tuple) else (out,)
        for i, o in enumerate(outputs):
            if not isinstance(o, Tensor):
                raise TypeError(f"{cls.__name__}.forward returned a {type(o).__name__}"
                                f"{f' as output {i}' if isinstance(out, tuple) else ''}; "
                                "return a tensor or a tuple of tensors")
            _engine.check_in_format(cls.__name__, o.data, o.fmt)
        live = [i for i, o in enumerate(outputs) if id(o) not in ctx._non_differentiable]
        if len(live) > 1:
            raise NotImplementedError(
                f"{cls.__name__}.forward returned {len(live)} differentiable outputs; nn's face "
                "differentiates one output of a Function: mark the others with "
                "ctx.mark_non_differentiable(...), or return them from another Function")
        results = [Tensor._make(o.data, o.fmt) for o in outputs]
        positions = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
        if live and _engine.is_grad_enabled() and any(needs):
            index = live[0]
            results[index] = _CustomNode.apply(*(args[i] for i in positions),
                                               out=outputs[index], fn=cls, user_ctx=ctx,
                                               positions=positions, index=index,
                                               outputs=[(o.shape, o.data.dtype, o.fmt)
                                                        for o in outputs])
        return tuple(results) if isinstance(out, tuple) else results[0]


__all__ = ["Function", "FunctionCtx", "backward", "grad"]
