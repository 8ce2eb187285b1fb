"""``Layer``: the base of every layer (name, dtype policy, weights made on the first call,
config and build config for checkpoints), plus ``serialize``/``deserialize`` through the layer
registry.

A new layer joins the registry with one decorator, ``@nn.layers.register``, where it is
defined; ``nn.load_model`` then rebuilds it from ``get_config`` and ``get_build_config`` with
no edit anywhere else.
"""

from __future__ import annotations

import contextvars
import functools
import re
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from nn import functions as F
from nn.engine import sites
from nn.engine.formats import format_name
from nn.engine.random import global_generator
from nn.engine.registry import LAYERS
from nn.engine.sites import name_scope
from nn.engine.tensor import Tensor, Variable
from nn.fp8.scope import layer_scope as fp8_layer_scope
from nn.layers.initializers import get_initializer
from nn.layers.module import Module
from nn.layers.symbolic import route_symbolic_calls
from nn.precision.autocast import is_autocast_enabled
from nn.precision.policy import Policy, as_policy

register = LAYERS.register

_NAME_COUNTS: dict[str, int] = {}


def _unique_name(base: str) -> str:
    n = _NAME_COUNTS.get(base, 0)
    _NAME_COUNTS[base] = n + 1
    return base if n == 0 else f"{base}_{n}"


# the training= of the innermost enclosing layer call that had one (None: no such call)
_CALL_TRAINING: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    "nn_call_training", default=None)


class _LayerType(type):
    """Drops a base that a later base already derives from, so that
    ``class Net(nn.Layer, nn.Model)`` (nn's older spelling) means ``class Net(nn.Model)``
    instead of failing with an inconsistent method resolution order."""

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any],
                **kwargs: Any) -> _LayerType:
        bases = tuple(b for i, b in enumerate(bases) if not any(
            issubclass(later, b) and later is not b for later in bases[i + 1:]))
        return super().__new__(mcs, name, bases, namespace, **kwargs)


class Layer(Module, metaclass=_LayerType):
    """Base layer: a name, a dtype policy, weights made on the first call, ``trainable_variables``.

    The PyTorch verbs (``parameters()``, ``state_dict()``, ``train()``/``eval()``, ...) come
    from ``nn.layers.module.Module``. ``layer(x)`` without ``training=`` runs in the mode set by
    ``train()``/``eval()``, and in inference mode if neither was called (Keras's default).

    Subclasses implement ``build(input_shape)`` (create weights with ``add_weight``) and
    ``call(x, training)`` on a Tensor already in the compute format; ``check_input`` may reject
    shapes with a ValueError that names the layer and both shapes. ``get_config`` returns the
    constructor arguments; the input shape of the first call is the build config, so a
    checkpoint can rebuild the weights' shapes without drawing random numbers.
    """

    def __init__(
        self, name: str | None = None, dtype: Policy | str | None = None, trainable: bool = True
    ) -> None:
        if name is not None and not (isinstance(name, str) and name):
            raise ValueError(f"{type(self).__name__}: name must be a non-empty string or None, "
                             f"got {name!r}")
        base = re.sub(r"(?<!^)(?=[A-Z])", "_", type(self).__name__).lower()
        self.name = name if name is not None else _unique_name(base)
        self.policy = as_policy(dtype)
        self.trainable = bool(trainable)
        self.built = False
        self._build_input_shape: tuple[int | None, ...] | None = None
        self._weights: list[Variable] = []
        self._weight_keys: dict[int, str] = {}

    # --- formats ----------------------------------------------------------------------------------
    @property
    def dtype_policy(self) -> Policy:
        """The layer's policy object (Keras 3's name; ``self.policy`` is the same object)."""
        return self.policy

    @property
    def compute_dtype(self) -> str:
        """Keras 3's string for the compute format ("float16" under "mixed_float16")."""
        return self.policy.compute_dtype

    @property
    def variable_dtype(self) -> str:
        """Keras 3's string for the variable format ("float32" under "mixed_float16")."""
        return self.policy.variable_dtype

    @property
    def dtype(self) -> str:
        """Keras 3's alias of ``variable_dtype``."""
        return self.policy.variable_dtype

    @property
    def compute_format(self) -> Any:
        return self.policy.compute_format

    @property
    def variable_format(self) -> Any:
        return self.policy.variable_format

    # --- weights ----------------------------------------------------------------------------------
    def add_weight(
        self, name: str, shape: tuple[int, ...], initializer: str | Callable = "zeros",
        trainable: bool = True, rng: np.random.Generator | None = None,
    ) -> Variable:
        """A Variable in the variable format, initialised (in float64, then rounded once)."""
        gen = global_generator() if rng is None else rng
        values = np.asarray(get_initializer(initializer)(tuple(shape), gen), float)
        var = Variable(values, fmt=self.variable_format, name=f"{self.name}/{name}",
                       trainable=trainable and self.trainable)
        self._weights.append(var)
        self._weight_keys[id(var)] = name
        return var

    def weight_key(self, var: Variable) -> str:
        """The name ``var`` was added under (``"kernel"``), the last part of its state-dict key."""
        key = self._weight_keys.get(id(var))
        if key is not None:
            return key
        name = var.name or f"weight{self._weights.index(var)}"
        return name.removeprefix(f"{self.name}/")

    @property
    def weights(self) -> list[Variable]:
        """This layer's variables, then those of the layers inside it (depth first), each
        once, as in Keras: the walk of ``named_variables``."""
        return [var for _, var in self.named_variables(require_built=False)]

    @property
    def variables(self) -> list[Variable]:
        return self.weights

    @property
    def trainable_variables(self) -> list[Variable]:
        """The trainable ones of ``weights`` ([] for a frozen layer, inside it too)."""
        return [var for _, var in self.named_variables(trainable_only=True, require_built=False)]

    @property
    def trainable_weights(self) -> list[Variable]:
        """Keras's other name of ``trainable_variables``."""
        return self.trainable_variables

    @property
    def non_trainable_weights(self) -> list[Variable]:
        """Keras's other name of ``non_trainable_variables``."""
        return self.non_trainable_variables

    @property
    def non_trainable_variables(self) -> list[Variable]:
        trainable = {id(v) for v in self.trainable_variables}
        return [v for v in self.weights if id(v) not in trainable]

    def get_weights(self) -> list[np.ndarray]:
        return [v.numpy() for v in self.weights]

    def set_weights(self, weights: Iterable[Any]) -> None:
        weights = list(weights)
        if len(weights) != len(self.weights):
            raise ValueError(f"layer '{self.name}' has {len(self.weights)} weights, "
                             f"got {len(weights)} arrays")
        for var, value in zip(self.weights, weights, strict=True):
            var.assign(value)

    def read(self, var: Variable) -> Tensor:
        """``var`` in the compute format (a Cast; the variable itself if the formats agree).

        Inside ``nn.autocast`` the variable itself: each op then picks its own format."""
        if is_autocast_enabled():
            return var
        t = F.cast(var, self.compute_format)
        if t is not var:
            t.grad_site = sites.weight_grad(var.name) if var.name else None
        return t

    # --- calling ----------------------------------------------------------------------------------
    def check_input(self, x: Tensor) -> None:
        """Raise a ValueError naming the layer and both shapes if ``x`` does not fit."""

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        """The layer's computation (Keras's name); a layer written PyTorch's way defines
        ``forward(x)`` instead, which runs here (the mode is ``self.training``, or the
        ``training=`` of the enclosing call, e.g. True inside ``fit``)."""
        forward = getattr(self, "forward", None)
        if forward is None:
            raise NotImplementedError(f"layer '{self.name}' ({type(self).__name__}) defines "
                                      "neither call(x, training) nor forward(x)")
        return forward(x)

    def _as_input(self, x: Any) -> Tensor:
        if not isinstance(x, Tensor):
            arr = np.asarray(x)
            if arr.dtype.kind != "f":
                raise TypeError(
                    f"layer '{self.name}' expects floating-point input, got an array of dtype "
                    f"{arr.dtype}; convert it first, e.g. x.astype('float32')"
                )
            x = Tensor(arr)
        return x if is_autocast_enabled() else F.cast(x, self.compute_format)

    def _build_once(self, input_shape: tuple[int | None, ...]) -> None:
        if not self.built:
            self.build(input_shape)
            self._mark_built(input_shape)

    def _mark_built(self, input_shape: Any) -> None:
        if not self.built:
            shape = tuple(input_shape) if input_shape is not None else ()
            self._build_input_shape = (None, *shape[1:]) if shape else None
            self.built = True

    def resolve_training(self, training: bool | None) -> bool:
        """``training`` if given, else the layer's mode (``train()``/``eval()``), else False
        (Keras's default for a call without ``training=``)."""
        if training is None:
            outer = _CALL_TRAINING.get()
            return bool(self.training) if outer is None else outer
        if not isinstance(training, (bool, np.bool_)):
            raise TypeError(f"layer '{self.name}': training must be True, False or None, got "
                            f"{training!r}")
        return bool(training)

    def __call__(self, x: Any, training: bool | None = None) -> Tensor:
        """Cast ``x`` to the compute format (not inside ``nn.autocast``), build on the first
        call, run ``call`` with ``resolve_training(training)``. An explicit ``training=`` (or
        one inherited from an enclosing call) is also the mode of every layer called inside
        that does not get its own (Keras's call context), so ``fit``'s True reaches the layers
        of a ``forward`` written without ``training``."""
        explicit = training is not None or _CALL_TRAINING.get() is not None
        training = self.resolve_training(training)
        x = self._as_input(x)
        if not self.built:
            if x.ndim < 1:
                raise ValueError(f"layer '{self.name}' needs batched input, got a scalar")
            self._build_once(x.shape)
        self.check_input(x)
        token = _CALL_TRAINING.set(training) if explicit else None
        try:
            with name_scope(self.name), fp8_layer_scope(self.policy, self):  # recipe matmuls
                y = self.call(x, training=training)
        finally:
            if token is not None:
                _CALL_TRAINING.reset(token)
        if y is not x:
            y.grad_site = sites.activation_grad(self.name)
        return y

    # --- configuration (for checkpoints) ------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        """The constructor arguments as plain JSON-able values (Keras style)."""
        return {"name": self.name, "dtype": self.policy.name}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Layer:
        return cls(**config)

    def get_build_config(self) -> dict[str, Any] | None:
        """``{"input_shape": [None, ...]}`` once built (Keras), else None."""
        if not self.built or self._build_input_shape is None:
            return None
        return {"input_shape": list(self._build_input_shape)}

    def build_from_config(self, config: dict[str, Any]) -> None:
        """Build as the first call did (``get_build_config``'s output)."""
        shape = config.get("input_shape")
        if not isinstance(shape, list) or not all(d is None or isinstance(d, int) for d in shape):
            raise ValueError(f"layer '{self.name}': build config input_shape must be a list of "
                             f"ints (None for the batch), got {shape!r}")
        self._build_once(tuple(shape))

    def state(self) -> dict[str, Any] | None:
        """Mutable non-weight state a checkpoint must restore for a bit-identical resume (e.g.
        a generator's state), as JSON-able values; None if there is none."""
        return None

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore ``state()``'s output."""
        raise ValueError(f"layer '{self.name}' ({type(self).__name__}) has no state to restore, "
                         f"got {state!r}")

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} '{self.name}' policy={self.policy.name} "
                f"compute={format_name(self.compute_format)}>")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        route_symbolic_calls(cls)  # the functional API (nn.Input) for a layer's own __call__
        if "build" in cls.__dict__:
            cls.build = _marks_built(cls.__dict__["build"])  # type: ignore[method-assign]


def _marks_built(build: Any) -> Any:
    """``build`` that also marks the layer built, as Keras 3 wraps every layer's ``build``: a
    layer built by hand (``d.build((None, 3))``, then ``set_weights``) keeps those weights on
    its first call instead of building new ones."""
    if getattr(build, "_marks_built", False):
        return build

    @functools.wraps(build)
    def wrapper(self: Layer, input_shape: Any) -> Any:
        out = build(self, input_shape)
        if type(self).build is wrapper:  # the outermost build: a subclass's super().build(...)
            self._mark_built(input_shape)  # may pass another shape (NCHW -> NHWC)
        return out

    wrapper._marks_built = True  # type: ignore[attr-defined]
    return wrapper


route_symbolic_calls(Layer)  # calling a layer on nn.Input records it (nn.layers.symbolic)


def serialize(layer: Layer) -> dict[str, Any]:
    """``{"class_name": ..., "config": ...}`` for a registered layer (weights are saved
    separately)."""
    out: dict[str, Any] = LAYERS.serialize(layer)
    return out


def deserialize(config: dict[str, Any]) -> Layer:
    """A new, unbuilt layer from ``serialize``'s output."""
    layer: Layer = LAYERS.deserialize(config)
    return layer
