"""numba kernels for nn's hot elementwise paths, each fused with the rounding to a format.

Kernels only: no validation, no API logic (nn.rounding.round_params packs the format, and the
ops in nn.functions decide when a kernel applies). The rounding is fpsim's float32
nearest-even kernel (``fpsim.kernels.fast_f32.round_nearest_even_f32_value``), inlined here so
that bias, activation and rounding happen in one pass. No ``fastmath`` anywhere: the rounding
relies on exact IEEE float32 arithmetic, NaN and inf.

The two rounding kernels split a large array over fpsim's thread pool (fpsim.kernels.threads:
no OpenMP, fork-safe); each numba function works on a range ``[lo, hi)`` and releases the GIL.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from fpsim.kernels.constants import NearestEvenF32
from fpsim.kernels.fast_f32 import round_nearest_even_f32_value as _round_value
from fpsim.kernels.threads import run

# nn's kernels split an array over fpsim's thread pool only from this many elements: below it
# the hand-off costs more than it saves, most of all while BLAS's own threads hold the cores
# (64-256-256-10 at batch 256, 2^16-element activations: a step 12% faster single-threaded).
PARALLEL_MIN = 1 << 20

# Stands in for p when do_round is False (never read then; one type, so one compiled kernel).
_UNUSED = NearestEvenF32(np.uint32(0), np.float32(0), np.float32(0), np.float32(0),
                         np.float32(0), False)


@njit(nogil=True, cache=True)
def _round_into_range(x, out, lo, hi, p):
    for i in range(lo, hi):
        j = np.uint64(i)  # an unsigned index: no wraparound check, so the loop vectorizes
        out[j] = _round_value(x[j], p)


@njit(nogil=True, cache=True)
def _round_inplace_range(x, lo, hi, p):
    for i in range(lo, hi):
        j = np.uint64(i)
        x[j] = _round_value(x[j], p)


def round_into(x: np.ndarray, out: np.ndarray, p: NearestEvenF32,
               in_place: bool | None = None) -> None:
    """out = x rounded to the format p (flat float32 arrays; out may be x, or a view of the
    same memory). ``in_place``: whether out is x's memory, if the caller knows (finding out
    costs a microsecond or two, a few percent of a small model's step over its 16 calls)."""
    if in_place is None:
        in_place = out.ctypes.data == x.ctypes.data
    n = x.size
    if in_place:  # one array, since an aliased pair runs ~50x slower (no vectorizing)
        if n < PARALLEL_MIN:  # (the calling thread: no need for run()'s block bookkeeping)
            _round_inplace_range(x, 0, n, p)
        else:
            run(_round_inplace_range, n, (x,), (p,))
    elif n < PARALLEL_MIN:
        _round_into_range(x, out, 0, n, p)
    else:
        run(_round_into_range, n, (x, out), (p,))


@njit(nogil=True, cache=True)
def _bias_act_round_rows(z, lo, hi, b, has_bias, relu, do_round, p):
    for r in range(lo, hi):
        for j in range(z.shape[1]):
            v = z[r, j] + b[j] if has_bias else z[r, j]
            if do_round:
                v = _round_value(v, p)
            if relu and v <= 0:  # relu(NaN) stays NaN, as numpy.maximum(NaN, 0) does
                v = np.float32(0.0)
            z[r, j] = v


def bias_act_round(z: np.ndarray, b: np.ndarray, has_bias: bool, relu: bool, do_round: bool,
                   p: NearestEvenF32 | None) -> None:
    """In place, one pass over a 2-D float32 z: z = relu?(round(z + b)).

    relu(round(v)) == round(relu(v)) because rounding is monotone and odd, so the activation
    may follow the rounding. (Helpers here take scalars only: passing arrays to an inlined
    helper costs reference counting per element.)
    """
    p = p if do_round else _UNUSED
    if z.size < PARALLEL_MIN:
        _bias_act_round_rows(z, 0, z.shape[0], b, has_bias, relu, do_round, p)
    else:
        run(_bias_act_round_rows, z.shape[0], (z,), (b, has_bias, relu, do_round, p),
            work=z.size)


@njit(nogil=True, cache=True)
def relu_grad(g, y, out):
    """out = g where y > 0 else 0 (flat arrays). Exact: selecting a value never rounds."""
    for i in range(g.size):
        out[i] = g[i] if y[i] > 0 else 0


@njit(nogil=True, cache=True)
def erf(x, out):
    """out = erf(x) elementwise (flat arrays), in the carrier's precision."""
    for i in range(x.size):
        out[i] = math.erf(x[i])
