"""``DType``: the dtype of an nn tensor names the emulated format its values lie in.

Keras and PyTorch users read ``x.dtype`` to see what precision an op ran in (the mixed-precision
guide's INCORRECT softmax prints ``float16``). nn keeps every value in a float32 carrier (float64
under the "float64" policy), so the carrier dtype says nothing about precision; ``Tensor.dtype``
is therefore a ``DType`` naming the *format*, and the carrier stays reachable as
``Tensor.carrier_dtype`` (= ``Tensor.data.dtype``).

>>> import fpsim
>>> d = DType.of(fpsim.FP16)
>>> d.name, str(d), d == "float16", d == "fp16", d == fpsim.FP16, d == "float32"
('float16', 'float16', True, True, True, False)
>>> d
DType('float16')

Equality: a DType equals another DType of the same format, that Format object, any name or
alias fpsim knows for it ("float16", "fp16", "half"), and the numpy/ml_dtypes dtype of the same
format (``np.float16``); the float64 carrier (format None) equals "float64" and ``np.float64``.
Anything that is not a format compares unequal (never raises). The hash is the hash of
``name``, so a DType and its canonical name (the string Keras would use) find the same dict entry.

There is deliberately no numpy conversion: ``np.zeros(3, dtype=x.dtype)`` raises (the carrier
is ``x.carrier_dtype``), since silently allocating float32 for an "fp16" tensor would mean
something else than it says.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fpsim import Format
from nn.engine.formats import carrier_dtype, format_name, resolve_format

_CACHE: dict[Format | None, DType] = {}


class DType:
    """The dtype of a tensor: the fpsim format its values lie in (None: the float64 carrier).

    Make one with ``DType.of(fmt)`` (``fmt``: a Format, a name, or None); instances are cached
    and immutable. Attributes: ``name`` (Keras's string: "float16", "bfloat16", "float32",
    "float8_e4m3fn", "float64"), ``format`` (the Format, or None), ``carrier`` (the numpy dtype
    holding the values), ``bits`` (the format's width) and ``is_floating`` (True).
    """

    __slots__ = ("_format",)
    _format: Format | None

    def __init__(self, fmt: Format | str | None) -> None:
        object.__setattr__(self, "_format", resolve_format(fmt, "dtype"))

    @classmethod
    def of(cls, fmt: Format | str | None) -> DType:
        """The (cached) DType of ``fmt``: a Format, a format name/alias, or None (float64)."""
        key = resolve_format(fmt, "dtype")
        found = _CACHE.get(key)
        if found is None:
            found = _CACHE[key] = cls(key)
        return found

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"DType is immutable (cannot set {name!r})")

    @property
    def format(self) -> Format | None:
        """The fpsim Format (None for the float64 carrier of the "float64" policy)."""
        return self._format

    @property
    def name(self) -> str:
        """The format's canonical name, as Keras spells dtypes ("float16", "bfloat16", ...)."""
        return format_name(self._format)

    @property
    def carrier(self) -> np.dtype:
        """The numpy dtype that holds the values: float32, or float64 for the float64 policy."""
        return carrier_dtype(self._format)

    @property
    def bits(self) -> int:
        """The width of one value in the format (64 for the float64 carrier)."""
        return 64 if self._format is None else self._format.bits

    @property
    def is_floating(self) -> bool:
        """Always True: every nn format is a floating-point format (tf.DType's attribute)."""
        return True

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DType):
            return self._format == other._format
        found, fmt = _as_format(other)
        return found and fmt == self._format

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.name)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"DType({self.name!r})"

    def __reduce__(self) -> tuple[Any, tuple[Format | None]]:
        return DType.of, (self._format,)


def _as_format(other: object) -> tuple[bool, Format | None]:
    """(True, its format) if ``other`` names a format (None: float64), else (False, None)."""
    if isinstance(other, Format):
        return True, other
    if other is None:  # np.dtype(None) is float64; None names no dtype here
        return False, None
    if isinstance(other, str):
        try:
            return True, resolve_format(other)
        except ValueError:
            return False, None
    try:
        dt = np.dtype(other)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return False, None
    if dt == np.float64:
        return True, None
    try:
        return True, resolve_format(dt.name)
    except ValueError:
        return False, None
