"""Keras's functional API: ``nn.Input``, layers called on symbolic tensors, and the
``Functional`` model that ``nn.Model(inputs=..., outputs=...)`` returns.

>>> inputs = nn.Input(shape=(784,), name="digits")
>>> x = nn.Dense(64, activation="relu", name="dense_1")(inputs)
>>> outputs = nn.Activation("softmax", dtype="float32", name="predictions")(nn.Dense(10)(x))
>>> model = nn.Model(inputs=inputs, outputs=outputs, name="mnist")   # a Functional model
>>> model.layers[0].name, outputs.shape, outputs.dtype.name
('digits', (None, 10), 'float32')

The model's layers are its nodes' layers in a topological order (inputs first; a depth-first
walk from the outputs, inputs taken in the order they were passed), which is also the order of
``model.weights``. Its config is the graph: each layer's registered class and config, and for
each layer the tensors it was called on (``[layer_name, output_index]``) and how (one tensor,
a list, several arguments). As everywhere in a model, layer names are unique and a layer
object is used once (shared layers are refused).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nn import functions as F
from nn.engine.formats import default_tensor_format, format_name, resolve_format
from nn.engine.tensor import Tensor
from nn.layers.base import Layer, deserialize, register, serialize
from nn.layers.sequential import Container, check_new_layers
from nn.layers.symbolic import Node, SymbolicTensor, symbolic_call
from nn.models.model import Model
from nn.precision.policy import Policy
from nn.training.loop import single_input


def _check_shape(what: str, shape: Any) -> tuple[int | None, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        raise TypeError(f"{what}: shape must be a tuple (without the batch axis), got "
                        f"{shape!r}; write shape=({int(shape)},)")
    if not isinstance(shape, (tuple, list)) or not all(
            d is None or (isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d > 0)
            for d in shape):
        raise ValueError(f"{what}: shape must be a tuple of positive ints or None (without the "
                         f"batch axis), e.g. shape=(784,), got {shape!r}")
    return tuple(None if d is None else int(d) for d in shape)


@register
class InputLayer(Layer):
    """The layer behind ``nn.Input``: it holds the input's shape and format and passes values
    through (cast to that format, which is float32 unless ``dtype=`` says otherwise; the next
    layer casts to its own compute format, as in Keras)."""

    is_input_layer = True  # no op of its own: telemetry has no site for it

    def __init__(self, shape: Sequence[int | None], batch_size: int | None = None,
                 dtype: str | None = None, name: str | None = None) -> None:
        fmt = default_tensor_format() if dtype is None else resolve_format(dtype, "dtype")
        super().__init__(name=name, dtype=Policy(format_name(fmt)))
        self.input_shape = _check_shape("Input", shape)
        if batch_size is not None and not (isinstance(batch_size, (int, np.integer))
                                           and not isinstance(batch_size, bool)
                                           and batch_size > 0):
            raise ValueError(f"Input: batch_size must be None or a positive int, got "
                             f"{batch_size!r}")
        self.batch_size = None if batch_size is None else int(batch_size)
        self.input_dtype = None if dtype is None else format_name(fmt)
        self.built = True
        self._build_input_shape = (self.batch_size, *self.input_shape)
        node = Node(self, [], "input")
        self.output = SymbolicTensor(self._build_input_shape, fmt, node, 0, name=self.name)
        node.outputs.append(self.output)

    def check_input(self, x: Tensor) -> None:
        expected = (self.batch_size, *self.input_shape)
        if x.ndim != len(expected) or any(
                e is not None and d != e for d, e in zip(x.shape, expected, strict=True)):
            raise ValueError(f"input '{self.name}' expects shape {expected}, got {x.shape}")

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        return x

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.input_shape),
                "batch_size": self.batch_size, "dtype": self.input_dtype}

    def get_build_config(self) -> dict[str, Any] | None:
        return None  # the shape is in the config


def Input(shape: Sequence[int | None], batch_size: int | None = None,  # noqa: N802 (Keras)
          name: str | None = None, dtype: str | None = None) -> SymbolicTensor:
    """A symbolic input of ``shape`` (without the batch axis) for a functional model.

    Its ``.dtype`` is float32 (or ``dtype=``): the data's format, whatever the policy; the first
    layer casts it to its compute format, as Keras does.
    """
    return InputLayer(shape, batch_size=batch_size, dtype=dtype, name=name).output


def _as_tensors(what: str, value: Any) -> list[SymbolicTensor]:
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not items or not all(isinstance(t, SymbolicTensor) for t in items):
        raise TypeError(f"Model({what}=...) takes a symbolic tensor (from nn.Input or a layer "
                        f"called on one) or a list of them, got {value!r:.80}")
    return items


def _refuse_repeats(what: str, tensors: list[SymbolicTensor]) -> None:
    """Raise ValueError if one tensor is listed twice in ``Model(what=[...])``."""
    first: dict[int, int] = {}
    for i, t in enumerate(tensors):
        if id(t) in first:
            raise ValueError(f"Model({what}=...) lists the same input {t.name!r} more than "
                             f"once (positions {first[id(t)]} and {i}); each input appears once "
                             f"(to use an input twice, call two layers on it)")
        first[id(t)] = i


def _topological_nodes(outputs: list[SymbolicTensor]) -> list[Node]:
    """Every node the outputs depend on, each after the nodes of its inputs."""
    order: list[Node] = []
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(t.node, False) for t in reversed(outputs)
                                      if t.node is not None]
    while stack:
        node, expanded = stack.pop()
        if id(node) in seen:
            continue
        if expanded:
            seen.add(id(node))
            order.append(node)
            continue
        stack.append((node, True))
        stack.extend((t.node, False) for t in reversed(node.inputs)
                     if t.node is not None and id(t.node) not in seen)
    return order


def _count_given(x: Any) -> str:
    if isinstance(x, (list, tuple)):
        return f"a {type(x).__name__} of {len(x)}"
    return f"one {type(x).__name__}"


@register
class Functional(Container):
    """A model made of a graph of layer calls: ``nn.Model(inputs=..., outputs=...)``.

    Called on data (one array, or a list in ``inputs`` order or a dict keyed by input name for
    several inputs; a one-input model takes ``x`` or ``[x]`` alike, as Keras does, whether it
    was made with ``inputs=i`` or ``inputs=[i]``) it runs every layer once, in ``layers``
    order, and returns the output (a list for several outputs). It is a ``Model``:
    ``compile``, ``fit``, ``evaluate``, ``predict``, ``summary``, ``save``. ``fit`` and
    ``evaluate`` take one input and one output.
    """

    def __init__(self, inputs: Any, outputs: Any, name: str | None = None,
                 trainable: bool = True) -> None:
        super().__init__(name=name, trainable=trainable)
        self.inputs = _as_tensors("inputs", inputs)
        self.outputs = _as_tensors("outputs", outputs)
        self._list_inputs = isinstance(inputs, (list, tuple))
        self._list_outputs = isinstance(outputs, (list, tuple))
        _refuse_repeats("inputs", self.inputs)
        for t in self.inputs:
            if t.node is None or t.node.style != "input" or t.index != 0:
                raise ValueError(f"Model inputs must come straight from nn.Input; {t!r} was made "
                                 "by a layer")
        self._nodes = _topological_nodes(self.outputs)
        given = {id(t.node) for t in self.inputs}
        for node in self._nodes:
            if node.style == "input" and id(node) not in given:
                raise ValueError(
                    f"the outputs depend on input '{node.layer.name}', which is not in "
                    f"Model(inputs=...); pass it there (the graph is disconnected)")
        input_nodes = [t.node for t in self.inputs if t.node is not None]
        self._nodes = input_nodes + [n for n in self._nodes if n not in input_nodes]
        self.layers: list[Layer] = []
        check_new_layers(self, [], [n.layer for n in self._nodes])
        self.layers = [n.layer for n in self._nodes]
        self.built = True

    # --- structure --------------------------------------------------------------------------
    def build(self, input_shape: Any = None) -> None:
        """Nothing to do: a functional model is built from ``nn.Input`` (Keras's rule)."""

    def summary_rows(self) -> list[tuple[Any, str, str]]:
        """(layer, output shape, the layers it is connected to) for ``Model.summary``."""
        return [(n.layer, ", ".join(str(t.shape) for t in n.outputs),
                 ", ".join(str(t.layer_name) for t in n.inputs)) for n in self._nodes]

    # --- calling ----------------------------------------------------------------------------
    def _feed(self, x: Any) -> list[Tensor]:
        if isinstance(x, dict):
            missing = [t.name for t in self.inputs if t.name not in x]
            if missing:
                raise ValueError(f"model '{self.name}' has inputs {[t.name for t in self.inputs]}"
                                 f"; the dict lacks {missing}")
            x = [x[t.name] for t in self.inputs]
        if len(self.inputs) == 1:  # x, or [x] as Keras accepts, whichever the model was made with
            values = [single_input(x)]
            if isinstance(x, (list, tuple)) and len(x) > 1 and all(
                    isinstance(v, (np.ndarray, Tensor)) for v in x):
                values = list(x)  # several arrays for one input: refused below
        else:
            values = list(x) if isinstance(x, (list, tuple)) else [x]
        if len(values) != len(self.inputs):
            n, names = len(self.inputs), [t.name for t in self.inputs]
            expected = (f"one input {names[0]!r}: pass one array (or a one-element list)"
                        if n == 1 else f"{n} inputs {names}: pass a list of {n} arrays in "
                        "that order, or a dict keyed by those names")
            raise ValueError(f"model '{self.name}' takes {expected}; got {_count_given(x)}")
        out = []
        for t, v in zip(self.inputs, values, strict=True):
            if not isinstance(v, Tensor):
                arr = np.asarray(v)
                if arr.dtype.kind != "f":
                    raise TypeError(
                        f"input '{t.name}' expects floating-point values, got an array of dtype "
                        f"{arr.dtype}; convert it first, e.g. x.astype('float32')")
                v = Tensor(arr, fmt=t.fmt)
            out.append(F.cast(v, t.fmt))
        return out

    def forward_with_outputs(self, x: Any, training: bool | None = None
                             ) -> tuple[Any, list[Tensor]]:
        """The model's output and the output of every non-input layer (for telemetry).
        ``training=None`` leaves each layer to its own mode (``train()``/``eval()``)."""
        values: dict[int, Tensor] = {}
        for node, t, v in zip(self._nodes, self.inputs, self._feed(x), strict=False):
            node.layer.check_input(v)  # the first nodes are the inputs'
            values[id(t)] = v
        kept: list[Tensor] = []
        for node in self._nodes:
            if node.style == "input":
                continue
            out = node.call([values[id(t)] for t in node.inputs], training=training)
            outs = list(out) if isinstance(out, (list, tuple)) else [out]
            for t, v in zip(node.outputs, outs, strict=True):
                values[id(t)] = v
            kept.extend(outs)
        results = [values[id(t)] for t in self.outputs]
        return (results if self._list_outputs else results[0]), kept

    def __call__(self, x: Any, training: bool | None = None) -> Any:
        return self.forward_with_outputs(x, training=training)[0]

    # --- configuration ----------------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        index = {id(t): [n.layer.name, i] for n in self._nodes for i, t in enumerate(n.outputs)}
        layers = []
        for node in self._nodes:
            entry = serialize(node.layer)
            entry["inbound"] = {"call": node.style, "kwargs": node.kwargs,
                                "tensors": [index[id(t)] for t in node.inputs]}
            layers.append(entry)
        return {"name": self.name, "layers": layers,
                "inputs": [index[id(t)] for t in self.inputs], "list_inputs": self._list_inputs,
                "outputs": [index[id(t)] for t in self.outputs],
                "list_outputs": self._list_outputs}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Functional:
        """The model rebuilt by calling each layer on its inbound tensors again (the layers
        are built on the way; checkpoints then overwrite the weights)."""
        tensors: dict[tuple[str, int], SymbolicTensor] = {}
        for entry in config["layers"]:
            layer = deserialize({"class_name": entry["class_name"], "config": entry["config"]})
            inbound = entry["inbound"]
            style = inbound["call"]
            if style == "input":
                if not isinstance(layer, InputLayer):
                    raise ValueError(f"layer {layer.name!r} is called as an input but is a "
                                     f"{type(layer).__name__}")
                outs: list[SymbolicTensor] = [layer.output]
            else:
                args = [tensors[(str(n), int(i))] for n, i in inbound["tensors"]]
                call_args: tuple[Any, ...] = {"tensor": (args[0],) if args else (),
                                              "list": (args,), "args": tuple(args)}[style]
                out = symbolic_call(layer, call_args, inbound.get("kwargs") or {})
                outs = out if isinstance(out, list) else [out]
            for i, t in enumerate(outs):
                tensors[(layer.name, i)] = t
        inputs = [tensors[(str(n), int(i))] for n, i in config["inputs"]]
        outputs = [tensors[(str(n), int(i))] for n, i in config["outputs"]]
        return cls(inputs if config.get("list_inputs") else inputs[0],
                   outputs if config.get("list_outputs") else outputs[0],
                   name=config.get("name"))

    def get_build_config(self) -> dict[str, Any] | None:
        return None  # the graph builds every layer


Model.functional = Functional  # what nn.Model(inputs=..., outputs=...) makes
