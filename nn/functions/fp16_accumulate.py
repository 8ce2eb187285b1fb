"""A fast exact emulation of fp16 accumulation in matrix products (numba).

``fp16_sequential_matmul(a, b)`` gives, bit for bit, fpsim.accumulate's "sequential" model
with an IEEE half-precision accumulator under nearest-even: ``s = 0; s = fp16(s + a[i, k] *
b[k, j])`` for k left to right. The general kernel behind fpsim.accumulate makes every
addition exact (TwoSum, round-to-odd) for any format; for fp16 that is not needed when the
inputs' significands have at most ``MAX_PRODUCT_BITS`` = 32 bits together (fp16 x fp16: 22):
the product is exact in float64 and has at most 32 significant bits, and the float64 sum of
an fp16 accumulator value and such a product is either exact or not near an fp16 rounding
boundary. (For the float64 rounding to land on an fp16 midpoint m the exact sum must be
within 2**-53 |m| of m; the accumulator's distance to m is a multiple of half an fp16 ulp, at
least 2**-12 |m|, so the product must cancel it to within 2**-53 |m|, and a product of that
size has its last bit above 2**-45 |m|: it either cancels exactly or misses by more.) So
rounding the float64 sum to fp16 once more is the correctly rounded addition. Tests compare
against fpsim.accumulate on random and extreme data. Wider inputs (fp32 x fp32) take
fpsim's general kernel.

Rounding to fp16 here, in float64 arithmetic: below 2**-14 (fp16's subnormals) adding and
subtracting ``1.5 * 2**28`` rounds to a multiple of 2**-24 (nearest-even, exact otherwise);
at 65520 and above the result is inf (the nearest-even tie at 65520 goes up to 2**16, past
fp16's max); in between, Veltkamp's split with ``2**42 + 1`` keeps the 11 leading bits,
rounded to nearest with ties to even (the tests check ties, overflow and subnormals against
fpsim). NaN and inf pass through.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from fpsim.kernels.threads import run

MAX_PRODUCT_BITS = 32  # inputs' significand bits together, for the exactness argument
FP16_OVERFLOW = 65520.0  # the smallest magnitude that rounds to inf in fp16 (nearest-even)
SUBNORMAL_LIMIT = 2.0**-14  # fp16's smallest normal
SUBNORMAL_SHIFT = 1.5 * 2.0**28  # s + this - this: s rounded to a multiple of 2**-24
SPLIT = 2.0**42 + 1.0  # Veltkamp's constant for 53 - 11 = 42: keeps 11 significant bits


@njit(inline="always")
def _round_fp16(s):  # pragma: no cover - compiled
    size = abs(s)
    if size < SUBNORMAL_LIMIT:
        return (s + SUBNORMAL_SHIFT) - SUBNORMAL_SHIFT
    if size >= FP16_OVERFLOW:  # inf stays inf; NaN fails both tests and stays NaN below
        return math.copysign(math.inf, s)
    g = SPLIT * s
    return g + (s - g)


@njit(nogil=True, cache=True)
def _matmul_rows(a, bt, out, lo, hi):  # pragma: no cover - compiled
    n_in = a.shape[1]
    for i in range(lo, hi):
        for j in range(bt.shape[0]):
            acc = 0.0
            for k in range(n_in):
                acc = _round_fp16(acc + a[i, k] * bt[j, k])
            out[i, j] = acc
    return 0


def _matmul_2d(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a64 = np.ascontiguousarray(a, dtype=np.float64)
    bt64 = np.ascontiguousarray(np.asarray(b, dtype=np.float64).T)
    out = np.empty((a64.shape[0], bt64.shape[0]), dtype=np.float64)
    run(_matmul_rows, a64.shape[0], (a64, bt64, out), (), work=out.size * a64.shape[1])
    return out


def fp16_sequential_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` (>= 2-D, leading dimensions broadcast as numpy.matmul) with an fp16
    accumulator, sequential order, nearest-even (see the module docstring). The inputs must
    hold values of formats whose significands together have at most ``MAX_PRODUCT_BITS``
    bits. Returns float64 accumulator values."""
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        raise ValueError(f"fp16_sequential_matmul: shapes {a.shape} and {b.shape} are not "
                         "aligned (need >= 2-D operands with a.shape[-1] == b.shape[-2])")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if not batch:
        return _matmul_2d(a, b)
    a3 = np.broadcast_to(a, batch + a.shape[-2:])
    b3 = np.broadcast_to(b, batch + b.shape[-2:])
    out = np.empty(batch + (a.shape[-2], b.shape[-1]), dtype=np.float64)
    for idx in np.ndindex(*batch):
        out[idx] = _matmul_2d(a3[idx], b3[idx])
    return out
