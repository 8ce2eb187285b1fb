"""``keras.layers.Layer``: nn's ``Layer`` with Keras 3's dtype-policy rules, the one base of
every layer ``nn.faces.keras.layers`` exports (keras/src/layers/layer.py, Keras 3.x).

- ``dtype_policy`` is always a ``keras.DTypePolicy`` (a policy name, an ``nn.Policy`` or None
  given as ``dtype=`` becomes one, through ``keras.dtype_policies.get``), which never equals
  a string; ``compute_dtype``/``variable_dtype`` are strings;
- a ``DTypePolicyMap`` given as ``dtype=`` stays the layer's ``dtype_policy``; the layer
  computes under ``map[layer.path]`` (exact key, else one regex, else the map's default), and
  ``layer.dtype_policy = p`` then stores ``p`` in the map under the layer's path, as Keras 3;
- ``path``: None until the layer first computes (its build, its first call, or the first
  read of ``compute_format``/``variable_format``), then ``"<enclosing scopes>/<name>"``: the
  names of the layers whose call (or build) is running, outermost first, then its own. A
  layer of a ``keras.Sequential`` built or called through the model is
  ``"sequential/dense"``; a layer called by the functional API before the model exists is
  ``"dense"``; a layer called in a subclassed model's ``call`` is ``"my_model/dense"`` -- all
  as in Keras 3. Our choice where the trees differ: nn has no separate variable scopes, so a
  path is fixed by the first call or build, never by assignment to a parent (a layer built
  on its own and then put in a model keeps the path it had);
- names are Keras's: the class name in snake case ("conv2d", "layer_normalization",
  "dense_1", ...);
- a quantized policy (``"float8_from_float32"``) on a layer that cannot run it raises, naming
  the layer that can (``keras.layers.Dense``).

>>> from nn.faces import keras
>>> norm = keras.layers.LayerNormalization(dtype="mixed_float16")
>>> norm.name, norm.dtype_policy, norm.dtype_policy == "mixed_float16", norm.compute_dtype
('layer_normalization...', <DTypePolicy "mixed_float16">, False, 'float16')
"""

from __future__ import annotations

import functools
import re
from typing import Any

from nn.engine.sites import current_scope, scoped
from nn.faces.keras.dtype_policies import DTypePolicy, DTypePolicyMap, get
from nn.layers import Layer as _NnLayer
from nn.layers.base import _unique_name


def keras_name(cls: type) -> str:
    """Keras 3's automatic layer name base (``utils.naming.to_snake_case``): "conv2d",
    "multi_head_attention"; the face's ``KerasDense`` is Keras's ``Dense``."""
    name = cls.__name__
    if cls.__module__.startswith("nn.faces.keras."):
        name = name.removeprefix("Keras")
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


class Layer(_NnLayer):
    """Keras 3's ``Layer`` over nn's (the module docstring's rules); subclass it as in
    Keras 3 (``build``, ``call``, ``add_weight``)."""

    supports_quantization: tuple[str, ...] = ()  # the modes a subclass runs ("float8")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("name") is None:
            kwargs["name"] = _unique_name(keras_name(type(self)))
        self.__dict__["_path"] = None
        super().__init__(*args, **kwargs)

    # --- the policy ------------------------------------------------------------------------
    @property  # type: ignore[override]
    def policy(self) -> DTypePolicy:
        """The policy this layer computes under: ``dtype_policy``, or the entry of the
        ``DTypePolicyMap`` it holds for ``path``; a map without a path yet raises (nn would
        otherwise compute, or decide, under the map's default)."""
        held: DTypePolicy = self.__dict__["_dtype_policy"]
        if isinstance(held, DTypePolicyMap) and self.__dict__["_path"] is None:
            raise ValueError(
                f"layer '{self.name}' holds a DTypePolicyMap but has no path yet: nn gives a "
                "layer its path ('sequential/dense') when it is built or first called; build "
                "the model first (model.build(input_shape), or call it on a batch) before "
                "compile, fit or summary")
        policy = self._keras_policy()
        self._check_quantization(policy)  # (a map's entry, too)
        return policy

    @policy.setter
    def policy(self, value: Any) -> None:
        policy = get(value)
        self._check_quantization(policy)
        held = self.__dict__.get("_dtype_policy")
        path = self.__dict__["_path"]
        if isinstance(held, DTypePolicyMap) and path:
            if path in held:
                del held[path]
            held[path] = policy
        else:
            self.__dict__["_dtype_policy"] = policy

    def _fix_path(self) -> None:
        """Fix ``path`` where the layer first computes: its build, its first call, or the
        first read of a format it computes in."""
        if self.__dict__["_path"] is None:
            self.__dict__["_path"] = scoped(current_scope(), self.name)

    @property
    def compute_format(self) -> Any:
        self._fix_path()
        return self.policy.compute_format

    @property
    def variable_format(self) -> Any:
        self._fix_path()
        return self.policy.variable_format

    def _as_input(self, x: Any) -> Any:
        self._fix_path()  # (a call starts here, inside the caller's name scope)
        return super()._as_input(x)

    def __repr__(self) -> str:
        policy = self._keras_policy()
        return (f"<{type(self).__name__} '{self.name}' policy={policy.name} "
                f"compute={policy.compute_dtype}>")

    @property
    def dtype_policy(self) -> DTypePolicy:
        """The policy given (a ``DTypePolicyMap`` itself, if one was)."""
        held: DTypePolicy = self.__dict__["_dtype_policy"]
        return held

    @dtype_policy.setter
    def dtype_policy(self, value: Any) -> None:
        """Keras 3's setter: into the map under ``path`` if a map is held, else replacing the
        policy; a quantized policy set on a built layer quantizes it."""
        self.policy = value
        if self.built and self._keras_policy().quantization_mode is not None:
            self._quantized_by_policy()

    def _quantized_by_policy(self) -> None:
        """Make what a quantized policy needs (a subclass that supports one)."""

    @property
    def path(self) -> str | None:
        """``"<enclosing layer names>/<name>"`` once the layer has computed or been built."""
        path: str | None = self.__dict__["_path"]
        return path

    def _keras_policy(self) -> DTypePolicy:
        held: DTypePolicy = self.__dict__["_dtype_policy"]
        path = self.__dict__["_path"]
        if isinstance(held, DTypePolicyMap) and path:
            return held[path]
        return held

    @property
    def compute_dtype(self) -> str:
        return self._keras_policy().compute_dtype

    @property
    def variable_dtype(self) -> str:
        return self._keras_policy().variable_dtype

    @property
    def dtype(self) -> str:
        return self.variable_dtype

    @property
    def quantization_mode(self) -> str | None:
        return self._keras_policy().quantization_mode

    def _check_quantization(self, policy: DTypePolicy) -> None:
        mode = policy.quantization_mode
        if mode is not None and mode not in self.supports_quantization:
            raise ValueError(f"layer '{self.name}' ({type(self).__name__}) cannot run the "
                             f"quantized policy {policy.name!r}: in nn's Keras 3 face only "
                             "keras.layers.Dense runs a quantization mode, 'float8' "
                             "(Dense(..., dtype='float8_from_float32') or "
                             "layer.quantize('float8'))")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        build = cls.__dict__.get("build")
        if build is not None and not getattr(build, "_fixes_path", False):
            cls.build = _fixes_path(build)  # type: ignore[method-assign]
        super().__init_subclass__(**kwargs)  # (nn's _marks_built wraps this one)


def _fixes_path(build: Any) -> Any:
    """``build`` that first fixes the layer's path (Keras 3's ``build_wrapper``), so that the
    weights it makes are in ``map[path]``'s variable format."""

    @functools.wraps(build, updated=())
    def wrapper(self: Layer, *args: Any, **kwargs: Any) -> Any:
        self._fix_path()
        return build(self, *args, **kwargs)

    wrapper._fixes_path = True  # type: ignore[attr-defined]
    return wrapper


__all__ = ["Layer", "keras_name"]
