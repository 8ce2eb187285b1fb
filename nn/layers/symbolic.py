"""Symbolic tensors: what ``nn.Input`` returns and what calling a layer on one gives (Keras's
``KerasTensor``), and the ``Node`` that records each such call.

A ``SymbolicTensor`` holds no values: a shape (the batch axis ``None`` unless fixed), the
emulated format its values will lie in (``.dtype``: ``"float16"`` after a Dense under
"mixed_float16", as in Keras) and the node that produced it. ``nn.Model(inputs=, outputs=)``
walks the nodes back from the outputs to get its graph.

Calling a layer on symbolic tensors builds the layer (its weights are created then, as Keras
does) and finds the output's shape and format by running the layer on a batch of zeros without
recording a graph, in inference mode (``training=False``: Dropout draws nothing). An axis given
as ``None`` runs with sizes 1 and 2; an output axis whose size follows is ``None``.

Multi-input layers: a node keeps the list of its input tensors and how they were passed, one
tensor (``layer(x)``), a list (``layer([a, b])``, e.g. ``Add``) or several arguments
(``layer(q, v)``, e.g. ``MultiHeadAttention``; other keyword options are kept, tensors must be
positional). ``route_symbolic_calls`` wraps the ``__call__`` of ``Layer`` and of every subclass
that defines its own, so any layer called with a symbolic tensor among its positional
arguments lands in ``symbolic_call``, with no code of its own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

import fpsim
from nn.engine.autograd import no_grad
from nn.engine.dtypes import DType
from nn.engine.formats import carrier_dtype
from nn.engine.tensor import Tensor

CALL_STYLES = ("input", "tensor", "list", "args")


class Node:
    """One call of ``layer`` on symbolic tensors: its inputs, how they were passed (one of
    ``CALL_STYLES``), the extra keyword arguments (JSON-able values) and its outputs."""

    def __init__(self, layer: Any, inputs: list[SymbolicTensor], style: str,
                 kwargs: dict[str, Any] | None = None) -> None:
        if style not in CALL_STYLES:
            raise ValueError(f"call style must be one of {CALL_STYLES}, got {style!r}")
        self.layer = layer
        self.inputs = inputs
        self.style = style
        self.kwargs = dict(kwargs or {})
        self.outputs: list[SymbolicTensor] = []

    def call(self, values: list[Any], training: bool | None = False) -> Any:
        """Run the layer on concrete ``values`` (one per input) as the node was called."""
        layer = self.layer
        if self.style == "tensor":
            return layer(values[0], training=training)
        if self.style == "list":
            return layer(list(values), training=training)
        if self.style == "args":
            return layer(*values, training=training, **self.kwargs)
        raise ValueError(f"an input node of layer '{layer.name}' is not called")


class SymbolicTensor:
    """A placeholder with a shape and an emulated format, made by ``nn.Input`` or by a layer
    called on symbolic tensors. It has no values: call the model built from it on data."""

    def __init__(self, shape: tuple[int | None, ...], fmt: fpsim.Format | None,
                 node: Node | None = None, index: int = 0, name: str | None = None) -> None:
        self.shape = tuple(shape)
        self.fmt = fmt
        self.node = node
        self.index = index
        self.name = name

    @property
    def dtype(self) -> DType:
        """The emulated format the values will lie in (``.name`` e.g. ``"float16"``), as a
        Tensor's ``dtype`` reports it."""
        return DType.of(self.fmt)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def layer_name(self) -> str | None:
        """The name of the layer that produced this tensor."""
        return None if self.node is None else self.node.layer.name

    def __repr__(self) -> str:
        made = f", created by layer '{self.layer_name}'" if self.node is not None else ""
        return f"<SymbolicTensor shape={self.shape}, dtype={self.dtype.name}{made}>"

    def _no_values(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            "a symbolic tensor (from nn.Input) has no values: build a model with "
            "nn.Model(inputs=..., outputs=...) and call it on data. Arithmetic on symbolic "
            "tensors is not supported: do it inside a layer (e.g. nn.layers.Activation, or a "
            "layer that takes a list of tensors, layer([a, b]))")

    __array__ = numpy = item = _no_values
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _no_values
    __truediv__ = __rtruediv__ = __matmul__ = __rmatmul__ = __pow__ = __neg__ = _no_values
    __float__ = __int__ = __bool__ = _no_values


def is_symbolic(x: Any) -> bool:
    """True for a SymbolicTensor, or a list/tuple holding one."""
    if isinstance(x, SymbolicTensor):
        return True
    return isinstance(x, (list, tuple)) and any(isinstance(t, SymbolicTensor) for t in x)


def _flatten(layer: Any, args: tuple[Any, ...]) -> tuple[list[SymbolicTensor], str]:
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        tensors, style = list(args[0]), "list"
    elif len(args) == 1:
        tensors, style = [args[0]], "tensor"
    else:
        tensors, style = list(args), "args"
    bad = [type(t).__name__ for t in tensors if not isinstance(t, SymbolicTensor)]
    if bad or not tensors:
        raise TypeError(
            f"layer '{layer.name}' was called on a mix of symbolic tensors (nn.Input) and "
            f"other values ({', '.join(bad) or 'an empty list'}); in a functional model every "
            "tensor input must come from nn.Input or from a layer called on one")
    return tensors, style


def _dummy(tensors: list[SymbolicTensor], size: int) -> list[Tensor]:
    return [Tensor(np.zeros([size if d is None else d for d in t.shape], carrier_dtype(t.fmt)),
                   fmt=t.fmt) for t in tensors]


def _run(layer: Any, node: Node, values: list[Tensor]) -> list[Tensor]:
    with no_grad(), np.errstate(all="ignore"):
        out = node.call(values, training=False)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    if not all(isinstance(o, Tensor) for o in outs):
        raise TypeError(f"layer '{layer.name}' returned {type(out).__name__}, expected a Tensor "
                        "or a list of Tensors")
    return outs


def symbolic_call(layer: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None
                  ) -> Any:
    """Call ``layer`` on symbolic ``args``: build it, record a Node, return the symbolic
    output (a list of them if the layer returns several tensors).

    ``kwargs`` are non-tensor options of the call (kept in the node and the model's config);
    ``training`` is decided when the model runs, so it is dropped here.
    """
    kwargs = {k: v for k, v in (kwargs or {}).items() if k != "training"}
    if any(is_symbolic(v) or isinstance(v, Tensor) for v in kwargs.values()):
        raise TypeError(f"layer '{layer.name}': pass tensors positionally in a functional "
                        "model, not as keyword arguments")
    tensors, style = _flatten(layer, args)
    node = Node(layer, tensors, style, kwargs)
    first = _run(layer, node, _dummy(tensors, 1))
    polymorphic = any(d is None for t in tensors for d in t.shape)
    second = _run(layer, node, _dummy(tensors, 2)) if polymorphic else first
    for i, (a, b) in enumerate(zip(first, second, strict=True)):
        shape = tuple(None if da != db else int(da)
                      for da, db in zip(a.shape, b.shape, strict=True))
        node.outputs.append(SymbolicTensor(shape, a.fmt, node, i))
    return node.outputs[0] if len(node.outputs) == 1 else list(node.outputs)


def route_symbolic_calls(cls: type) -> None:
    """Make ``cls.__call__`` (if ``cls`` defines one) hand symbolic inputs to
    ``symbolic_call``; concrete calls go straight to it, unchanged."""
    call: Callable[..., Any] | None = cls.__dict__.get("__call__")
    if call is None or getattr(call, "routes_symbolic", False):
        return

    @functools.wraps(call)
    def routed(self: Any, *args: Any, **kwargs: Any) -> Any:
        if any(is_symbolic(a) for a in args):
            return symbolic_call(self, args, kwargs)
        return call(self, *args, **kwargs)

    routed.routes_symbolic = True  # type: ignore[attr-defined]
    setattr(cls, "__call__", routed)  # noqa: B010 (assigning to a method of a class)
