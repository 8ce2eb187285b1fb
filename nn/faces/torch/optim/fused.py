"""PyTorch's CPU multiply-add, emulated: ``fused_multiply_add(a, b, c) = a * b + c`` rounded
once to float32, as torch's vectorised kernels compute ``c.add_(b, alpha=a)`` and ``lerp``
(``vec::fmadd``: one rounding, where ``c + fp32(a * b)`` rounds twice).

How: the product of two float32 numbers (24-bit significands) is exact in float64; the sum is
rounded to odd in float64 (TwoSum gives its exact error; an inexact sum with an even last bit
moves to its neighbour on the error's side), and round-to-odd into float64 (53 >= 24 + 2 bits)
followed by nearest-even into float32 is the one correct rounding of the exact ``a * b + c``
(Boldo and Melquiond's lemma; see fpsim._validate).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def fused_multiply_add(a: Any, b: Any, c: Any) -> np.ndarray:
    """``a * b + c`` (float32 values, arrays or scalars, broadcast) rounded once to float32."""
    p = np.multiply(np.asarray(a, np.float32), np.asarray(b, np.float32),
                    dtype=np.float64)  # exact: each factor rounded to float32 first
    c64 = np.asarray(c, np.float32).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN, as in IEEE
        hi = p + c64
        bb = hi - p
        lo = (p - (hi - bb)) + (c64 - bb)  # TwoSum: hi + lo == p + c exactly
        hi = np.asarray(hi, np.float64)
        even = (hi.view(np.int64) & 1) == 0
        odd = np.nextafter(hi, np.where(lo > 0, np.inf, -np.inf))
        hi = np.where((lo != 0) & even & np.isfinite(hi), odd, hi)
        return hi.astype(np.float32)


__all__ = ["fused_multiply_add"]
