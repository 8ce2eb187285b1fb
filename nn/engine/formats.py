"""The format algebra nn's engine and ops rely on: resolving format names, promotion, the
carrier dtype, and the format of a Tensor made without ``fmt=`` (asked of the global dtype policy
through ``set_default_format_sources``, so the engine imports no policy).

``None`` as a format means the float64 carrier, never rounded (for gradient checks).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import fpsim
from fpsim import FP32, Format
from fpsim._names import suggest

# ``None`` as a format means "float64 carrier, never rounded".
FormatLike = Format | str | None

_FLOAT64_NAMES = ("float64", "fp64", "f64", "double")


def resolve_format(fmt: FormatLike, what: str = "fmt") -> Format | None:
    """A Format (or None for the float64 carrier) from a Format, a name/alias, or None.

    >>> resolve_format("fp16").name, resolve_format("float64")
    ('float16', None)

    Anything else raises ValueError naming the argument ``what``, the value, the closest names
    and every allowed one.
    """
    if fmt is None or isinstance(fmt, Format):
        return fmt
    if isinstance(fmt, str) and fmt.strip().lower() in _FLOAT64_NAMES:
        return None
    try:
        return fpsim.get_format(fmt)
    except (ValueError, TypeError):
        if type(fmt).__name__ == "DType" and hasattr(fmt, "format"):  # nn.DType (above us)
            found: Format | None = getattr(fmt, "format")  # noqa: B009 (a property, not str's)
            return found
        names = [*fpsim.known_names(), "float64"]
        raise ValueError(
            f"{what}={fmt!r} is not a format{did_you_mean(fmt, names)}; pass a Format or one "
            f"of: {', '.join(names)}"
        ) from None


def did_you_mean(value: object, names: list[str]) -> str:
    """``" (did you mean 'fp16'?)"`` with the closest of ``names`` to ``value``, or ""."""
    hint = suggest(value, names)
    return f" ({hint})" if hint else ""


def format_name(fmt: Format | None) -> str:
    """The display name of a format; "float64" for the float64 carrier."""
    return "float64" if fmt is None else fmt.name


def carrier_dtype(fmt: Format | None) -> np.dtype:
    """The numpy dtype that carries values of ``fmt``: float64 for None, float32 otherwise."""
    return np.dtype(np.float64) if fmt is None else np.dtype(np.float32)


def contains(wide: Format | None, narrow: Format | None) -> bool:
    """True if every value of ``narrow`` is a value of ``wide`` (so widening is exact):
    ``Format.contains``, with None standing for the float64 carrier (which holds every format).
    """
    if wide is None or wide is narrow:  # identity first: ops ask this a lot
        return True
    if narrow is None:
        return False  # float64 values need rounding into any format
    return wide.contains(narrow)


def promote(a: Format | None, b: Format | None) -> Format | None:
    """nn's promotion policy over ``contains``: the format of an op on operands in ``a`` and
    ``b`` is the one containing the other, else FP32 (where fpsim's arrays raise instead).

    >>> promote(fpsim.FP16, fpsim.FP32).name, promote(fpsim.FP16, fpsim.BF16).name
    ('float32', 'float32')
    """
    if contains(a, b):
        return a
    if contains(b, a):
        return b
    return FP32


def at_least_fp32(fmt: Format | None) -> Format | None:
    """The format fp32-only work (softmax, reductions, losses) runs in: FP32, or None (float64)."""
    return None if fmt is None else FP32


_DEFAULTS: dict[str, Callable[[], Format | None]] = {"tensor": lambda: FP32,
                                                     "variable": lambda: FP32}


def set_default_format_sources(tensor: Callable[[], Format | None],
                               variable: Callable[[], Format | None]) -> None:
    """Make ``default_tensor_format`` and ``default_variable_format`` ask these
    (``nn.precision.policy`` registers the global policy's rules when it is imported)."""
    _DEFAULTS["tensor"], _DEFAULTS["variable"] = tensor, variable


def default_tensor_format() -> Format | None:
    """The format of a Tensor made without ``fmt=`` (FP32, or None under the float64 policy)."""
    return _DEFAULTS["tensor"]()


def default_variable_format() -> Format | None:
    """The format of a Variable made without ``fmt=`` (the global policy's variable format)."""
    return _DEFAULTS["variable"]()
