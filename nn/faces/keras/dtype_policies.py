"""``keras.dtype_policies``: Keras 3's policy classes over ``nn.Policy``
(keras/src/dtype_policies/dtype_policy.py and dtype_policy_map.py, Keras 3.x).

Each class is an ``nn.Policy`` (so every nn layer takes it as ``dtype=``), with Keras 3's
constructor, ``get_config``/``from_config``, ``quantization_mode``, ``repr`` and equality:

- ``DTypePolicy(name=None)``: None means the global policy's name
  (``keras.config.dtype_policy()``); ``FloatDTypePolicy`` is an alias of it;
- equality as Keras 3: a policy equals a policy of the same kind and name, never a string
  (``DTypePolicy("float16") == "float16"`` is False; ``nn.Policy`` keeps its equality with
  policy names, tf.keras-era nn code relies on it);
- ``QuantizedDTypePolicy(mode, source_name=None)``: Keras 3's quantized policies; of its modes
  nn runs "float8" only (``QuantizedFloat8DTypePolicy``), the others raise naming it;
- ``QuantizedFloat8DTypePolicy(mode="float8", source_name=None, amax_history_length=1024)``:
  Keras 3's float8 training, which ``keras.layers.Dense`` runs as Keras 3 does, step for step
  and rounding for rounding (``nn.faces.keras.float8``: E4M3 inputs and kernel, E5M2
  output gradient, Keras's delayed scale update); it carries no ``nn.fp8`` recipe;
- ``DTypePolicyMap(default_policy=None, policy_map=None)``: layer paths (exact, else one
  ``re.fullmatch`` pattern) -> policies.

>>> DTypePolicy("mixed_float16")
<DTypePolicy "mixed_float16">
>>> DTypePolicy("float16") == "float16", DTypePolicy("float16") == DTypePolicy("float16")
(False, True)
"""

from __future__ import annotations

import re
from collections.abc import Iterator, MutableMapping
from typing import Any

from fpsim import FP32
from nn.engine.registry import Registry
from nn.precision.policy import Policy, global_policy

QUANTIZATION_MODES = ("int8", "float8", "int4", "ternary", "gptq", "awq")  # Keras 3's
KERAS_AMAX_HISTORY_LENGTH = 1024  # QuantizedFloat8DTypePolicy's default (theirs)


class DTypePolicy(Policy):
    """Keras 3's ``DTypePolicy(name=None)`` (module docstring): an ``nn.Policy`` with Keras 3's
    equality, repr and config. ``compute_dtype``/``variable_dtype`` are strings."""

    loss_scale_rules = "keras3"
    """``compile`` of a model whose layers hold this policy scales the loss by Keras 3's rules
    (``nn.precision.loss_scale_keras3``)."""

    def __init__(self, name: str | None = None) -> None:
        if name is None:
            name = global_policy().name
        if not isinstance(name, str):
            raise TypeError(f"DTypePolicy: 'name' must be a string, such as 'mixed_float16'. "
                            f"Received: name={name!r} (of type {type(name).__name__})")
        super().__init__(name)
        self._quantization_mode: str | None = None

    @property
    def quantization_mode(self) -> str | None:
        """The quantization mode ("float8"), None for a float policy."""
        return self._quantization_mode

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> DTypePolicy:
        return cls(**config)

    def _same_kind(self, other: object) -> bool:
        if type(self) in (DTypePolicy, FloatDTypePolicy):
            return type(other) in (DTypePolicy, FloatDTypePolicy)
        return type(other) is type(self)

    def __eq__(self, other: object) -> bool:
        return self._same_kind(other) and self.name == other.name  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((DTypePolicy, self.name))

    def __repr__(self) -> str:
        cls = "DTypePolicy" if type(self) is FloatDTypePolicy else type(self).__name__
        return f'<{cls} "{self.name}">'


class FloatDTypePolicy(DTypePolicy):
    """Keras 3's alias of ``DTypePolicy``."""


class QuantizedDTypePolicy(DTypePolicy):
    """Keras 3's ``QuantizedDTypePolicy(mode, source_name=None)``: name
    ``"<mode>_from_<source_name>"``, dtypes of ``source_name`` (None: the global policy's).
    nn runs the "float8" mode only, through ``QuantizedFloat8DTypePolicy``."""

    def __init__(self, mode: str, source_name: str | None = None) -> None:
        if source_name is None:
            source_name = global_policy().name
        if mode not in QUANTIZATION_MODES:
            raise ValueError(f"Invalid quantization mode. Expected one of "
                             f"{QUANTIZATION_MODES}. Received: mode={mode!r}")
        if mode != "float8" or type(self) is QuantizedDTypePolicy:
            raise ValueError(f"quantization mode {mode!r} is not emulated by nn's Keras 3 "
                             "face; the one it runs is float8 training: "
                             "QuantizedFloat8DTypePolicy('float8', source_name) or "
                             "layer.quantize('float8'); nn.fp8's recipe policies cover other "
                             "narrow formats (e.g. dtype='mxfp8', 'nvfp4')")
        DTypePolicy.__init__(self, source_name)
        self._source_name = source_name
        self._quantization_mode = mode
        self._name = f"{mode}_from_{source_name}"

    def get_config(self) -> dict[str, Any]:
        return {"mode": self._quantization_mode, "source_name": self._source_name}

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, QuantizedDTypePolicy) and type(other) is type(self)
                and self.name == other.name and self._key() == other._key())

    def __hash__(self) -> int:
        return hash((type(self), self.name))


class QuantizedFloat8DTypePolicy(QuantizedDTypePolicy):
    """Keras 3's float8 training policy: ``keras.layers.Dense`` under it runs Keras 3's float8
    matmul (``nn.faces.keras.float8``); everything computes in the source policy's compute
    format, variables in its variable format (the scaling state in float32).

    >>> p = QuantizedFloat8DTypePolicy("float8", "float32")
    >>> p.name, p.quantization_mode, p.amax_history_length, p.compute_dtype, p.recipe
    ('float8_from_float32', 'float8', 1024, 'float32', None)
    """

    default_amax_history_length = KERAS_AMAX_HISTORY_LENGTH

    def __init__(self, mode: str, source_name: str | None = None,
                 amax_history_length: int = KERAS_AMAX_HISTORY_LENGTH) -> None:
        if isinstance(amax_history_length, bool) or not isinstance(amax_history_length, int):
            raise TypeError(f"`amax_history_length` must be an integer. Received: "
                            f"amax_history_length={amax_history_length!r}")
        super().__init__(mode, source_name)
        self._amax_history_length = amax_history_length
        if self._variable is None:
            raise ValueError(f"QuantizedFloat8DTypePolicy: source_name {source_name!r} has no "
                             "float format to quantize from; use float32, mixed_bfloat16, ...")
        if self._compute is None:
            self._compute = FP32

    @property
    def amax_history_length(self) -> int:
        """The amax history window of the delayed scaling (Keras 3's default 1024)."""
        return self._amax_history_length

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "amax_history_length": self.amax_history_length}


class DTypePolicyMap(DTypePolicy, MutableMapping):
    """Keras 3's ``DTypePolicyMap(default_policy=None, policy_map=None)``: a dict of layer
    paths to policies; ``map[path]`` is the policy of the exact key, else of the one key that
    ``re.fullmatch``-es the path (two: a ValueError), else ``default_policy`` (None: the
    global policy, read when asked). Its own dtypes are the default policy's."""

    def __init__(self, default_policy: Any = None, policy_map: dict[str, Any] | None = None
                 ) -> None:
        if isinstance(default_policy, DTypePolicyMap):
            raise ValueError("`default_policy` cannot be a `DTypePolicyMap`.")
        if policy_map is not None and not isinstance(policy_map, dict):
            raise TypeError(f"If specified, `policy_map` must be a dict. Received: "
                            f"policy_map={policy_map!r} of type {type(policy_map).__name__}")
        self._default_policy_arg = default_policy
        default = self.default_policy
        DTypePolicy.__init__(self, default.name)
        self._policy_map: dict[str, DTypePolicy] = {}
        for key, policy in (policy_map or {}).items():
            self[key] = policy

    @property
    def default_policy(self) -> DTypePolicy:
        return get(self._default_policy_arg)

    @property
    def name(self) -> str:
        return f"map_{self.default_policy.name}"

    @property
    def compute_dtype(self) -> str:
        return self.default_policy.compute_dtype

    @property
    def variable_dtype(self) -> str:
        return self.default_policy.variable_dtype

    @property
    def quantization_mode(self) -> str | None:
        return self.default_policy.quantization_mode

    def _unrouted(self) -> ValueError:
        return ValueError("a DTypePolicyMap is routed by the layers of nn.faces.keras.layers "
                          "only (each looks itself up by its path); an nn layer given one "
                          "would silently use its default: give nn layers a policy "
                          "(dtype='mixed_float16') or use keras.layers.* from nn.faces.keras")

    @property
    def compute_format(self) -> Any:
        """Refused: a map has no format of its own; the layer holding it reads
        ``map[layer.path]`` (``nn.faces.keras.base_layer``)."""
        raise self._unrouted()

    @property
    def variable_format(self) -> Any:
        """Refused, as ``compute_format``."""
        raise self._unrouted()

    @property
    def recipe(self) -> Any:
        """Refused, as ``compute_format``."""
        raise self._unrouted()

    def __getitem__(self, key: str) -> DTypePolicy:
        if key in self._policy_map:
            return self._policy_map[key]
        matches = [p for p in self._policy_map if re.fullmatch(p, key)]
        if len(matches) > 1:
            raise ValueError(f"Path {key!r} matches multiple dtype policy specification keys: "
                             f"{matches}. Please make sure each path only matches at most one "
                             "dtype policy specification key in the DTypePolicyMap.")
        return self._policy_map[matches[0]] if matches else self.default_policy

    def __setitem__(self, key: str, policy: Any) -> None:
        if key in self._policy_map:
            raise ValueError(f"{key} already exist in the DTypePolicyMap with value "
                             f"{self._policy_map[key]}. Please make sure to not use "
                             "duplicated keys.")
        self._policy_map[key] = get(policy)

    def __delitem__(self, key: str) -> None:
        del self._policy_map[key]

    def __contains__(self, key: object) -> bool:
        return key in self._policy_map

    def __iter__(self) -> Iterator[str]:
        return iter(self._policy_map)

    def __len__(self) -> int:
        return len(self._policy_map)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    def get_config(self) -> dict[str, Any]:
        return {"default_policy": self._default_policy_arg,
                "policy_map": {k: serialize(v) for k, v in self._policy_map.items()}}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> DTypePolicyMap:
        policy_map = {k: deserialize(v) for k, v in (config.get("policy_map") or {}).items()}
        return cls(config.get("default_policy"), policy_map)

    def __repr__(self) -> str:
        mapping = [(k, v.name) for k, v in self._policy_map.items()]
        return (f"<DTypePolicyMap at {hex(id(self))} default_policy="
                f"{self.default_policy.name}, mapping={mapping}>")


ALL_OBJECTS = Registry("dtype policy")  # Keras's {"class_name", "config"} layout
for _cls in (DTypePolicy, FloatDTypePolicy, QuantizedDTypePolicy, QuantizedFloat8DTypePolicy,
             DTypePolicyMap):
    ALL_OBJECTS.register(_cls)
del _cls
serialize = ALL_OBJECTS.serialize
deserialize = ALL_OBJECTS.deserialize


def get(identifier: Any) -> DTypePolicy:
    """Keras 3's ``dtype_policies.get``: None (the global policy), a policy, a policy name
    (``"float8_from_float32"`` gives the quantized one) or ``serialize``'s output."""
    if identifier is None:
        return as_keras_policy(global_policy())
    if isinstance(identifier, DTypePolicy):
        return identifier
    if isinstance(identifier, Policy):
        return as_keras_policy(identifier)
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        if identifier.startswith(QUANTIZATION_MODES) and "_from_" in identifier:
            mode, source = identifier.split("_from_", 1)
            if mode == "float8":
                return QuantizedFloat8DTypePolicy(mode, source)
            return QuantizedDTypePolicy(mode, source)
        return DTypePolicy(identifier)
    raise ValueError(f"Cannot interpret `dtype_policy` identifier: {identifier!r} (a policy "
                     "name, a DTypePolicy, a serialized policy dict or None)")


def as_keras_policy(policy: Policy) -> DTypePolicy:
    """The Keras 3 class for an ``nn.Policy`` (the same object if it already is one)."""
    if isinstance(policy, DTypePolicy):
        return policy
    return DTypePolicy(policy.name)


__all__ = ["DTypePolicy", "DTypePolicyMap", "FloatDTypePolicy", "QuantizedDTypePolicy",
           "QuantizedFloat8DTypePolicy", "deserialize", "get", "serialize"]
