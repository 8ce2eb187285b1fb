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


# --- softmax and embedding-gradient kernels (float32 only; bit for bit numpy's composition) ----
#
# Row sums follow numpy's float32 pairwise summation (``np.sum`` along a contiguous axis, numpy's
# ``pairwise_sum``): under 8 elements one running sum; up to 128, eight interleaved running sums
# combined as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the tail one by one; above
# 128, the two halves (the first a multiple of 8 long) summed apart and added; the reduction
# starts from 0, so the row total is 0 + that sum (-0.0 rows give +0.0, as np.sum does).
# nn.functions.activations pins every kernel here against the numpy composition, bit for bit.


@njit(nogil=True, cache=True)
def _pairwise_sum(a, lo, n):
    if n < 8:
        res = np.float32(0.0)
        for i in range(lo, lo + n):
            res += a[i]
        return res
    if n <= 128:
        r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
        r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
        i = lo + 8
        end = lo + n - n % 8
        while i < end:
            r0 += a[i]
            r1 += a[i + 1]
            r2 += a[i + 2]
            r3 += a[i + 3]
            r4 += a[i + 4]
            r5 += a[i + 5]
            r6 += a[i + 6]
            r7 += a[i + 7]
            i += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < lo + n:
            res += a[i]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise_sum(a, lo, n2) + _pairwise_sum(a, lo + n2, n - n2)


@njit(nogil=True, cache=True)
def row_sum(a, lo, n):
    """np.sum(a[lo:lo + n]) for a flat float32 array, in numpy's order (see above)."""
    return np.float32(0.0) + _pairwise_sum(a, lo, n)


@njit(nogil=True, cache=True)
def shift_by_row_max(a, out):
    """out[r] = a[r] - max(a[r]) for each row of 2-D float32 arrays; False (out unspecified)
    if a row holds a NaN or an infinite max: then NaNs arise, whose payloads numpy and this
    kernel may pick differently, and the caller falls back to numpy.

    The max is exact; its sign of zero may differ from numpy's, which the softmax cannot see
    (a - (+0) and a - (-0) differ only in the sign of a zero, and exp(+-0) = 1)."""
    for r in range(a.shape[0]):
        m = a[r, 0]
        nan = m != m
        for j in range(1, a.shape[1]):
            v = a[r, j]
            nan |= v != v
            m = v if v > m else m
        if nan or not m - m == 0:
            return False
        for j in range(a.shape[1]):
            out[r, j] = a[r, j] - m
    return True


@njit(nogil=True, cache=True)
def divide_by_row_sum(e):
    """e[r] /= np.sum(e[r]) for each row of a 2-D float32 array, in place."""
    n = e.shape[1]
    flat = e.reshape(-1)
    for r in range(e.shape[0]):
        s = row_sum(flat, r * n, n)
        for j in range(n):
            e[r, j] = e[r, j] / s


@njit(nogil=True, cache=True)
def softmax_grad(s, g, out):
    """out = s * (g - sum(g * s)) row by row (2-D float32 arrays), each step one IEEE float32
    operation in the order Softmax.backward's ops take; out holds g * s first. False (out
    unspecified) if a NaN arises anywhere -- it reaches the row's outputs -- since its payload
    may differ from numpy's; the caller falls back to numpy."""
    n = s.shape[1]
    flat = out.reshape(-1)
    nan = False
    for r in range(s.shape[0]):
        for j in range(n):
            out[r, j] = g[r, j] * s[r, j]
        t = row_sum(flat, r * n, n)
        for j in range(n):
            v = s[r, j] * (g[r, j] - t)
            nan |= v != v
            out[r, j] = v
    return not nan


@njit(nogil=True, cache=True)
def scatter_add_rows(full, idx, g):
    """full[idx[i]] += g[i] for i = 0, 1, ... in turn (2-D arrays): np.add.at's order, one IEEE
    addition per element, so repeated indices sum exactly as np.add.at sums them."""
    for i in range(idx.size):
        r = idx[i]
        for j in range(g.shape[1]):
            full[r, j] += g[i, j]
