"""Dtype policies (Keras names); the format algebra they use is ``nn.engine.formats``.

A policy says in which format a layer computes and in which format it keeps its variables:

========================  ===============  =============================================
policy name               compute_format   variable_format
========================  ===============  =============================================
``"float32"``             FP32             FP32
``"float64"``             None (float64)   None (float64)
``"mixed_float16"``       FP16             FP32 (master weights)
``"mixed_bfloat16"``      BF16             FP32
``"float16"``             FP16             FP16
``"bfloat16"``            BF16             BF16
``"mixed_<fmt>"``         get_format(fmt)  FP32 (e.g. ``"mixed_e4m3fn"``)
``"<fmt>"``               get_format(fmt)  get_format(fmt) (any other fpsim format name)
``"fp8_hybrid_delayed"``  BF16             FP32; matmul inputs quantized by a recipe
``"mixed_tf32"``          FP32             FP32; matmul inputs rounded to TF32
========================  ===============  =============================================

Recipe policies (every name in ``nn.fp8.POLICY_RECIPES``, the one table of them: per-tensor
fp8 scaling, MX and NVFP4 block scaling, TF32) carry a recipe (``policy.recipe``): the layer's
matmuls quantize their inputs by it (``nn.fp8``), everything else computes in the recipe's
compute format (bf16; fp32 for "mixed_tf32") on fp32 variables. Each Policy object owns its
recipe instance, whose per-tensor states and telemetry log are shared by the layers built
under that Policy object.

``None`` stands for the float64 carrier with no rounding at all: it exists so that gradients
can be checked against float64 central differences.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import fpsim
from fpsim import FP32, Format
from nn.engine.formats import (  # noqa: F401 (the format algebra, re-exported from its home)
    _FLOAT64_NAMES,
    FormatLike,
    at_least_fp32,
    carrier_dtype,
    contains,
    default_tensor_format,
    did_you_mean,
    format_name,
    promote,
    resolve_format,
    set_default_format_sources,
)
from nn.fp8.recipes import POLICY_RECIPES, recipe_for_policy


class Policy:
    """A dtype policy: the compute format of a layer's ops and the format of its variables.

    >>> p = Policy("mixed_float16")
    >>> p.compute_format.name, p.variable_format.name
    ('float16', 'float32')
    >>> p.compute_dtype, p.variable_dtype
    ('float16', 'float32')

    ``compute_dtype``/``variable_dtype`` are Keras's strings; ``compute_format``/
    ``variable_format`` the fpsim Format objects (None for "float64").

    Unknown names raise ``ValueError`` listing the valid forms.
    """

    def __init__(self, name: str) -> None:
        if isinstance(name, Policy):
            name = name.name
        if not isinstance(name, str):
            raise TypeError(
                f"a policy name must be a string or a Policy, got {name!r} "
                f"({type(name).__name__})"
            )
        key = name.strip().lower()
        self._name = key
        self._compute, self._variable = _parse(key)

        self._recipe = recipe_for_policy(key)
        if self._recipe is not None:
            self._compute, self._variable = self._recipe.compute_format, FP32

    @property
    def name(self) -> str:
        return self._name

    @property
    def compute_format(self) -> Format | None:
        """The format every op of a layer under this policy rounds its output to."""
        return self._compute

    @property
    def variable_format(self) -> Format | None:
        """The format variables (master weights) are stored and updated in."""
        return self._variable

    @property
    def compute_dtype(self) -> str:
        """Keras's string for the compute format: "float16", "bfloat16", "float32", ..."""
        return format_name(self._compute)

    @property
    def variable_dtype(self) -> str:
        """Keras's string for the variable format ("float32" under the mixed policies)."""
        return format_name(self._variable)

    @property
    def recipe(self) -> Any:
        """The ``nn.fp8`` recipe the layer's matmuls run under ("fp8_hybrid_delayed",
        "mxfp8", "mixed_tf32", ...), else None."""
        return self._recipe

    @property
    def quantization_mode(self) -> str | None:
        """Keras 3's quantization mode: None for nn's policies (recipe policies included);
        "float8" for ``nn.faces.keras.dtype_policies.QuantizedFloat8DTypePolicy``."""
        return None

    @property
    def is_mixed(self) -> bool:
        return self._compute != self._variable or self._recipe is not None

    def _key(self) -> tuple[object, ...]:
        recipe = None if self._recipe is None else self._recipe.config()
        return (self._compute, self._variable, recipe)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = Policy(other)
            except ValueError:
                return False
        if not isinstance(other, Policy):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        recipe = "" if self._recipe is None else f", matmuls {self._recipe!r}"
        return (
            f'<Policy "{self._name}": compute {format_name(self._compute)}, '
            f"variables {format_name(self._variable)}{recipe}>"
        )


KERAS_FORMS = ("float32", "float64", "mixed_float16", "mixed_bfloat16", "float16", "bfloat16")
"""The policy names spelled out in the table above (the other forms are built from fpsim's
format names and ``nn.fp8.POLICY_RECIPES``)."""


def _parse(key: str) -> tuple[Format | None, Format | None]:
    if key in _FLOAT64_NAMES:
        return None, None

    if key in POLICY_RECIPES:
        return None, None  # (the recipe sets both)
    try:
        if key.startswith("mixed_"):
            return fpsim.get_format(key[len("mixed_"):]), FP32
        fmt = fpsim.get_format(key)
        return fmt, fmt
    except ValueError:
        forms = [*KERAS_FORMS, *(f"mixed_{n}" for n in fpsim.known_names()), *POLICY_RECIPES]
        hint = did_you_mean(key, list(dict.fromkeys(forms)))
        raise ValueError(
            f"unknown policy {key!r}{hint}; valid forms: "
            f"{', '.join(repr(f) for f in KERAS_FORMS)}, 'mixed_<format>' or '<format>' where "
            f"<format> is one of: {', '.join(fpsim.known_names())}; or a recipe policy: "
            f"{', '.join(POLICY_RECIPES)}"
        ) from None


# Which policy applies where (Keras's split): ``set_global_policy`` sets one process-wide default,
# seen by every thread; ``policy_scope`` overrides it in the current thread / asyncio task only
# (a ContextVar), so a scope held open in one thread never changes the layers another one builds.
_GLOBAL: Policy = Policy("float32")
_SCOPED: contextvars.ContextVar[Policy | None] = contextvars.ContextVar(
    "nn_policy_scope", default=None
)


def as_policy(policy: Policy | str | None) -> Policy:
    """A Policy from a Policy, a policy name, or None (the current global policy)."""
    if policy is None:
        return global_policy()
    return policy if isinstance(policy, Policy) else Policy(policy)


def global_policy() -> Policy:
    """The policy layers created now without ``dtype=`` will use (initially "float32"): the
    innermost ``policy_scope`` of this thread, else the process-wide policy."""
    scoped = _SCOPED.get()
    return _GLOBAL if scoped is None else scoped


def set_global_policy(policy: Policy | str | None) -> None:
    """Set the process-wide policy (None resets it to "float32"), as ``keras.mixed_precision``
    does. Every thread sees it, except inside a ``policy_scope``, which takes precedence."""
    global _GLOBAL
    _GLOBAL = Policy("float32") if policy is None else as_policy(policy)


@contextlib.contextmanager
def policy_scope(policy: Policy | str) -> Iterator[Policy]:
    """Use ``policy`` as the global policy inside a ``with`` block, in this thread (or asyncio
    task) only, and restore the previous one afterwards.

    Like ``set_global_policy``, it decides the policy of the layers *created* inside the block;
    a layer created before keeps its own policy, so calling an existing model inside the block
    computes exactly as outside it. To run an existing model's matmuls in fp16 or bf16 (PyTorch's
    ``torch.autocast``), use ``nn.autocast``; to change a model's precision, rebuild it.

    >>> with policy_scope("mixed_float16") as p:
    ...     p.compute_format.name
    'float16'
    """
    scoped = as_policy(policy)
    token = _SCOPED.set(scoped)
    try:
        yield scoped
    finally:
        _SCOPED.reset(token)


def _policy_tensor_format() -> Format | None:
    """The format of a Tensor made without ``fmt=``: FP32, or float64 under the float64 policy."""
    return None if global_policy().compute_format is None else FP32


set_default_format_sources(_policy_tensor_format, lambda: global_policy().variable_format)
