"""The PyTorch face of every layer and model (``nn.Layer`` mixes this in): ``parameters()``,
``named_parameters()``, ``state_dict()`` / ``load_state_dict()``, ``train()`` / ``eval()``,
``children()``, ``modules()``, ``zero_grad()``.

Keys: a weight's key is the path of positions and attribute names from the model down to it,
then the weight's own name, joined by dots, as in PyTorch: ``"0.weight"`` for the first layer of
a ``Sequential``, ``"fc1.weight"`` for an attribute ``self.fc1`` of a custom model, ``"0.kernel"``
for a ``Dense``. No key contains a layer's automatic name (``dense_3``), so a state dict loads
into a freshly built model of the same architecture. A layer that defines PyTorch's
``get_extra_state()`` / ``set_extra_state(state)`` (``te.Linear``: its fp8 state) adds the key
``"<path>._extra_state"`` with that value.

Mode: ``training`` is None until ``train()`` or ``eval()`` sets it (on the layer and everything
inside it). Calling a layer or model without ``training=`` uses that mode, and a layer whose
mode was never set runs in inference mode, as a Keras layer called without ``training=`` does.
So a PyTorch loop calls ``model.train()`` (dropout on) and ``model.eval()`` (dropout off), as
PyTorch code does; an explicit ``training=`` argument always wins (``fit`` passes True).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from nn.engine.checks import device
from nn.engine.tensor import Variable

if TYPE_CHECKING:
    from nn.layers.base import Layer

# PyTorch's state_dict key of a module's own non-tensor state (``get_extra_state``)
EXTRA_STATE = "_extra_state"


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict`` returns (PyTorch's ``_IncompatibleKeys``)."""

    missing_keys: list[str]
    unexpected_keys: list[str]


def _holds_layers(value: Any) -> bool:
    """True for a layer, and for a list, tuple or dict that holds one (at any depth) or is
    empty (it may be filled later, as ``Sequential.layers`` is)."""
    if isinstance(value, Module):
        return True
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return not value or any(_holds_layers(item) for item in value)
    return False


def _layers_in(key: str, value: Any) -> Iterator[tuple[str, Module]]:
    """(key, layer) for ``value`` and every layer in it: lists and tuples by position, dicts by
    their keys, nested at any depth (``"blocks.0"``, ``"heads.query"``)."""
    if isinstance(value, Module):
        yield key, value
        return
    items = value.items() if isinstance(value, dict) else (
        enumerate(value) if isinstance(value, (list, tuple)) else ())
    for k, item in items:
        yield from _layers_in(f"{key}.{k}" if key else str(k), item)


class Module:
    """The layer tree, and PyTorch's module verbs over it.

    The tree: an attribute that holds a layer, or a list, tuple or dict of layers, is tracked
    when it is assigned (as Keras 3's ``Layer.__setattr__`` does); ``named_children`` reads
    the tracked attributes in assignment order. Every question about what is inside a layer
    (``weights``, ``trainable_variables``, ``parameters()``, ``state_dict``, ``summary``,
    ``fit``, checkpoints, fp8 recipes, telemetry) walks this one tree.
    """

    training: bool | None = None  # set by train() / eval(); None: never set (see the docstring)
    trainable: bool = True
    CHILD_LIST = "layers"  # a container's own list of layers: its children keyed "0", "1", ...

    if TYPE_CHECKING:  # provided by nn.Layer
        name: str
        built: bool
        _weights: list[Variable]

        def weight_key(self, var: Variable) -> str: ...

    def __setattr__(self, name: str, value: Any) -> None:
        if _holds_layers(value):
            tracked = self.__dict__.setdefault("_tracked", [])
            if name not in tracked:
                tracked.append(name)
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        tracked = self.__dict__.get("_tracked", [])
        if name in tracked:
            tracked.remove(name)
        object.__delattr__(self, name)

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        """Create the weights for inputs of ``input_shape`` (batch first, may be None)."""

    # --- the tree -------------------------------------------------------------------------------
    def named_children(self) -> Iterator[tuple[str, Layer]]:
        """The layers directly inside, each once, in the order their attributes were assigned:
        ``"fc1"`` for ``self.fc1``, ``"blocks.0"`` for ``self.blocks[0]``, ``"heads.q"`` for
        ``self.heads["q"]``; a container's own ``layers`` list by position (``"0"``, ``"1"``)."""
        seen = {id(self)}
        for name in list(self.__dict__.get("_tracked", ())):
            key = "" if name == self.CHILD_LIST else name
            for child_key, child in _layers_in(key, getattr(self, name, None)):
                if id(child) not in seen:
                    seen.add(id(child))
                    yield child_key, child  # type: ignore[misc]

    def children(self) -> Iterator[Layer]:
        for _, child in self.named_children():
            yield child

    def named_modules(self, prefix: str = "", memo: set[int] | None = None
                      ) -> Iterator[tuple[str, Module]]:
        """This layer (key ``prefix``) and every layer inside it, depth first, each once."""
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for key, child in self.named_children():
            yield from child.named_modules(f"{prefix}.{key}" if prefix else key, memo)

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    # --- weights ------------------------------------------------------------------------------
    def _walk(self, prefix: str, memo: set[int], trainable_only: bool
              ) -> Iterator[tuple[str, Module]]:
        if id(self) in memo or (trainable_only and not self.trainable):
            return  # a frozen layer holds no trainable variable, nor do the layers inside it
        memo.add(id(self))
        yield prefix, self
        for key, child in self.named_children():
            yield from child._walk(f"{prefix}.{key}" if prefix else key, memo, trainable_only)

    def named_variables(self, trainable_only: bool = False, require_built: bool = True
                        ) -> Iterator[tuple[str, Variable]]:
        """(key, variable) for this layer's variables and those of every layer inside it, depth
        first, each once: the one walk behind ``weights``, ``trainable_variables``,
        ``parameters()`` and ``state_dict()``. ``require_built``: a layer that makes its
        weights from its first input raises until it has them."""
        seen: set[int] = set()
        for prefix, module in self._walk("", set(), trainable_only):
            if require_built:
                module._require_built()
            for var in module._weights:
                if id(var) in seen or (trainable_only and not var.trainable):
                    continue
                seen.add(id(var))
                key = module.weight_key(var)
                yield (f"{prefix}.{key}" if prefix else key), var

    def _require_built(self) -> None:
        if not self.built and type(self).build is not Module.build:
            raise ValueError(
                f"layer '{self.name}' ({type(self).__name__}) has no weights yet: they are made "
                "from the first input's shape; call the model on a batch once (model(x)), build "
                "it, or use nn.Linear(in_features, out_features), whose weights exist at once")

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Variable]]:
        """(key, variable) for every trainable variable, keys as in the module docstring."""
        for key, var in self.named_variables(trainable_only=True):
            yield (f"{prefix}.{key}" if prefix else key), var

    def parameters(self) -> Iterator[Variable]:
        """The trainable variables (an iterator, as in PyTorch): ``nn.SGD(model.parameters())``."""
        for _, var in self.named_parameters():
            yield var

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the ``.grad`` of every parameter (``set_to_none=False``: zero it in place)."""
        clear_grads(self.parameters(), set_to_none)

    # --- state dict -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Every variable (trainable or not) as a copy of its values, by key; and, as in
        PyTorch, ``"<path>._extra_state"`` (``"_extra_state"`` for this layer) holding
        ``get_extra_state()`` of each layer that defines it (a ``te.Linear``'s fp8 state)."""
        state: dict[str, Any] = {key: var.numpy() for key, var in self.named_variables()}
        state.update({key: module.get_extra_state()
                      for key, module in self._extra_state_modules().items()})
        return state

    def _extra_state_modules(self) -> dict[str, Any]:
        """``{"<path>._extra_state": layer}`` for each layer defining ``get_extra_state``."""
        return {(f"{path}.{EXTRA_STATE}" if path else EXTRA_STATE): module
                for path, module in self.named_modules()
                if callable(getattr(module, "get_extra_state", None))}

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True
                        ) -> IncompatibleKeys:
        """Copy ``state_dict``'s arrays into the variables of the same keys (each value is
        rounded to its variable's format).

        Everything is checked before anything changes: a shape mismatch always raises;
        with ``strict=True`` (the default) missing and unexpected keys raise too, all of them
        listed in one RuntimeError, as in PyTorch. Returns the missing and unexpected keys.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"load_state_dict expects a mapping of key -> array (what "
                            f"state_dict() returns), got {type(state_dict).__name__}")
        extra = self._extra_state_modules()
        own: dict[str, Any] = {**dict(self.named_variables()), **extra}
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors: list[str] = []
        if strict and missing:
            errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing))
        if strict and unexpected:
            errors.append("Unexpected key(s) in state_dict: "
                          + ", ".join(f'"{k}"' for k in unexpected))
        values: list[tuple[Variable, np.ndarray]] = []
        for key, var in own.items():
            if key not in state_dict or key in extra:
                continue
            value = state_dict[key]
            arr = np.asarray(getattr(value, "data", value) if not isinstance(value, np.ndarray)
                             else value)
            if arr.dtype.kind not in "biuf":
                errors.append(f"value for {key} must be numbers, got dtype {arr.dtype}")
            elif arr.shape != var.shape:
                errors.append(f"size mismatch for {key}: copying a param with shape {arr.shape} "
                              f"from checkpoint, the shape in current model is {var.shape}")
            else:
                values.append((var, arr))
        if not errors:
            errors = self._load_extra_states(
                {key: (module, state_dict[key]) for key, module in extra.items()
                 if key in state_dict})
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__} "
                               f"'{self.name}':\n\t" + "\n\t".join(errors))
        for var, arr in values:
            var.assign(arr)
        return IncompatibleKeys(missing, unexpected)

    @staticmethod
    def _load_extra_states(entries: dict[str, tuple[Any, Any]]) -> list[str]:
        """``set_extra_state`` of each layer; on a bad value every layer set so far gets its
        state back and the error (naming the key) is returned."""
        done: list[tuple[Any, Any]] = []
        for key, (module, value) in entries.items():
            before = module.get_extra_state()
            try:
                module.set_extra_state(value)
            except (TypeError, ValueError) as e:
                for earlier, held in reversed(done):
                    earlier.set_extra_state(held)
                return [f"value for {key}: {e}"]
            done.append((module, before))
        return []

    # --- mode and device ------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode on this layer and every layer inside it; returns self."""
        if not isinstance(mode, (bool, np.bool_)):
            raise ValueError(f"train(mode): mode must be True or False, got {mode!r}")
        for module in self.modules():
            module.training = bool(mode)
        return self

    def eval(self) -> Module:
        """``train(False)``: inference mode (dropout off); returns self."""
        return self.train(False)

    def to(self, device_name: str) -> Module:
        """Accepts "cpu" (the only device: fpsim emulates on the CPU) and returns self."""
        device("device", device_name)
        return self

    def cpu(self) -> Module:
        return self


def clear_grads(params: Any, set_to_none: bool = True) -> None:
    """Clear each param's ``.grad``: to None, or (``set_to_none=False``) zeros in place."""
    if not isinstance(set_to_none, (bool, np.bool_)):
        raise TypeError(f"zero_grad: set_to_none must be True or False, got {set_to_none!r}")
    for p in params:
        if set_to_none or p.grad is None:
            p.grad = None
        else:
            p.grad.data[...] = 0
