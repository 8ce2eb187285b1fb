"""The named formats and ``get_format``, which turns a name, alias, dtype or Format into a Format.

Names follow ml_dtypes. Each constant's defaults reproduce ml_dtypes' float32 -> format
conversion bit for bit (overflow to inf where the format has inf, to NaN where it has NaN but
no inf, saturation where it has neither).
"""

from __future__ import annotations

import numpy as np

from fpsim._names import unknown_name
from fpsim.formats import Format

FP32 = Format("float32", 8, 23)
TF32 = Format("tf32", 8, 10)
FP16 = Format("float16", 5, 10)
BF16 = Format("bfloat16", 8, 7)
E4M3FN = Format("float8_e4m3fn", 4, 3, inf=False, nan="fn")
E5M2 = Format("float8_e5m2", 5, 2)
E4M3 = Format("float8_e4m3", 4, 3)
E3M4 = Format("float8_e3m4", 3, 4)
E4M3FNUZ = Format("float8_e4m3fnuz", 4, 3, bias=8, inf=False, nan="fnuz")
E5M2FNUZ = Format("float8_e5m2fnuz", 5, 2, bias=16, inf=False, nan="fnuz")
E4M3B11FNUZ = Format("float8_e4m3b11fnuz", 4, 3, bias=11, inf=False, nan="fnuz")
E2M3FN = Format("float6_e2m3fn", 2, 3, inf=False, nan="none")
E3M2FN = Format("float6_e3m2fn", 3, 2, inf=False, nan="none")
E2M1FN = Format("float4_e2m1fn", 2, 1, inf=False, nan="none")

CATALOG: tuple[Format, ...] = (
    FP32, TF32, FP16, BF16, E4M3FN, E5M2, E4M3, E3M4,
    E4M3FNUZ, E5M2FNUZ, E4M3B11FNUZ, E2M3FN, E3M2FN, E2M1FN,
)

_ALIASES: dict[str, Format] = {
    "fp32": FP32, "f32": FP32, "single": FP32,
    "fp16": FP16, "f16": FP16, "half": FP16,
    "bf16": BF16,
    "e4m3fn": E4M3FN, "fp8_e4m3": E4M3FN, "fp8_e4m3fn": E4M3FN,
    "e5m2": E5M2, "fp8_e5m2": E5M2,
    "e4m3": E4M3, "e3m4": E3M4,
    "e4m3fnuz": E4M3FNUZ, "e5m2fnuz": E5M2FNUZ, "e4m3b11fnuz": E4M3B11FNUZ,
    "e2m3fn": E2M3FN, "fp6_e2m3": E2M3FN,
    "e3m2fn": E3M2FN, "fp6_e3m2": E3M2FN,
    "e2m1fn": E2M1FN, "fp4_e2m1": E2M1FN, "fp4": E2M1FN,
}
_BY_NAME: dict[str, Format] = {f.name: f for f in CATALOG} | _ALIASES


def known_names() -> list[str]:
    """Every name and alias get_format accepts, sorted."""
    return sorted(_BY_NAME)


def get_format(x: object) -> Format:
    """Look up a format by Format, name or alias (case-insensitive), or numpy/ml_dtypes dtype.

    >>> get_format("half") is FP16, get_format(np.float16) is FP16
    (True, True)
    """
    if isinstance(x, Format):
        return x
    if isinstance(x, str):
        key = x.strip().lower()
        if key in _BY_NAME:
            return _BY_NAME[key]
        raise ValueError(unknown_name("format", x, known_names()))
    try:
        dtype = np.dtype(x)  # type: ignore[call-overload]
    except TypeError:
        raise ValueError(
            f"cannot make a format from {x!r} (a {type(x).__name__}); pass a Format, a name "
            f"({', '.join(known_names())}) or a numpy/ml_dtypes dtype"
        ) from None
    if dtype.name in _BY_NAME:
        return _BY_NAME[dtype.name]
    raise ValueError(
        f"dtype {dtype.name} has no fpsim format (values must fit float32); "
        f"known names: {', '.join(known_names())}"
    )
