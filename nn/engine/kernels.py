"""numba kernels for nn's hot elementwise paths, each fused with the rounding to a format.

Kernels only: no validation, no API logic (nn.engine.rounding.round_params packs the format, and the
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


@njit(nogil=True, cache=True, inline="always")
def _block_sum(a, lo, n, acc):
    # n <= 128; acc: scratch for the eight running sums (an array: they share a vector register)
    if n < 8:
        res = np.float32(0.0)
        for i in range(lo, lo + n):
            res += a[np.uint64(i)]
        return res
    for j in range(8):
        acc[j] = a[np.uint64(lo + j)]
    end = lo + n - n % 8
    for i in range(lo + 8, end, 8):
        for j in range(8):
            acc[j] += a[np.uint64(i + j)]
    res = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
    for i in range(end, lo + n):
        res += a[np.uint64(i)]
    return res


@njit(nogil=True, cache=True)
def _split_sum(a, lo, n, acc):
    if n <= 128:
        return _block_sum(a, lo, n, acc)
    n2 = n // 2
    n2 -= n2 % 8
    return _split_sum(a, lo, n2, acc) + _split_sum(a, lo + n2, n - n2, acc)


@njit(nogil=True, cache=True, inline="always")
def row_sum(a, lo, n, acc):
    """np.sum(a[lo:lo + n]) of a flat float32 array, in numpy's order (see above); ``acc`` is
    a float32 scratch array of 8. (Only rows above 128 take the recursive split, which numba
    cannot inline.)"""
    return np.float32(0.0) + (_block_sum(a, lo, n, acc) if n <= 128 else _split_sum(a, lo, n, acc))


@njit(nogil=True, cache=True)
def shift_by_row_max(a, out, n, maxima, zero_if_infinite):
    """out = a - m and maxima[r] = m for each row r of ``n`` elements of flat float32 arrays,
    m the row's max. A row whose max is infinite gets m = 0 if ``zero_if_infinite`` (as
    logsumexp's shift does), else the kernel returns False (out unspecified): inf - inf would
    make NaNs, whose payloads numpy and this kernel may pick differently, and the caller falls
    back to numpy. A NaN element is skipped by this max but not by numpy's; it reaches the
    row's sum, where row_sums and divide_by_row_sum report it.

    The max is exact; its sign of zero may differ from numpy's, which the softmax cannot see
    (a - (+0) and a - (-0) differ only in the sign of a zero, and exp(+-0) = 1)."""
    lanes = np.empty(8, a.dtype)
    for r in range(a.size // n):
        lo, hi = r * n, r * n + n
        m = a[np.uint64(lo)]
        i = lo
        if n >= 8:  # eight running maxima, then the tail
            for j in range(8):
                lanes[j] = a[np.uint64(lo + j)]
            end = hi - n % 8
            for i in range(lo + 8, end, 8):
                for j in range(8):
                    v = a[np.uint64(i + j)]
                    lanes[j] = v if v > lanes[j] else lanes[j]
            for j in range(8):
                m = lanes[j] if lanes[j] > m else m
            i = end
        for k in range(i, hi):
            v = a[np.uint64(k)]
            m = v if v > m else m
        if not m - m == 0:
            if not zero_if_infinite:
                return False
            m = np.float32(0.0)
        maxima[r] = m
        for k in range(lo, hi):
            out[np.uint64(k)] = a[np.uint64(k)] - m
    return True


@njit(nogil=True, cache=True)
def row_sums(e, n, sums):
    """sums[r] = np.sum(row r) for each row of ``n`` elements of a flat float32 array. False
    (sums partly written) if a row sums to NaN, the trace of a NaN element."""
    acc = np.empty(8, e.dtype)
    for r in range(e.size // n):
        s = row_sum(e, r * n, n, acc)
        if s != s:
            return False
        sums[r] = s
    return True


def sum_last_axis(a: np.ndarray) -> np.ndarray | None:
    """``np.sum(a, axis=-1, keepdims=True)`` bit for bit, for a C-contiguous float32 ``a`` with a
    non-empty last axis (the caller checks); None where a row sums to NaN (whose payload numpy
    might pick differently: the caller uses numpy then)."""
    out = np.empty((*a.shape[:-1], 1), np.float32)
    return out if row_sums(a.reshape(-1), a.shape[-1], out.reshape(-1)) else None


@njit(nogil=True, cache=True)
def divide_by_row_sum(e, n):
    """e /= np.sum(row) for each row of ``n`` elements of a flat float32 array, in place.
    False (e partly divided) if a row sums to NaN, the trace of a NaN element."""
    acc = np.empty(8, e.dtype)
    for r in range(e.size // n):
        lo = r * n
        s = row_sum(e, lo, n, acc)
        if s != s:
            return False
        for k in range(lo, lo + n):
            e[np.uint64(k)] = e[np.uint64(k)] / s
    return True


@njit(nogil=True, cache=True)
def softmax_grad(s, g, out, n):
    """out = s * (g - sum(g * s)) for each row of ``n`` elements of flat float32 arrays, each
    step one IEEE float32 operation in the order Softmax.backward's ops take; out holds g * s
    first. False (out unspecified) if a NaN arises anywhere -- it reaches the row's outputs --
    since its payload may differ from numpy's; the caller falls back to numpy."""
    acc = np.empty(8, s.dtype)
    nan = False
    for r in range(s.size // n):
        lo, hi = r * n, r * n + n
        for k in range(lo, hi):
            j = np.uint64(k)
            out[j] = g[j] * s[j]
        t = row_sum(out, lo, n, acc)
        for k in range(lo, hi):
            j = np.uint64(k)
            v = s[j] * (g[j] - t)
            nan |= v != v
            out[j] = v
    return not nan


@njit(nogil=True, cache=True)
def scatter_add_rows(full, idx, g):
    """full[idx[i]] += g[i] for i = 0, 1, ... in turn (2-D arrays): np.add.at's order, one IEEE
    addition per element, so repeated indices sum exactly as np.add.at sums them."""
    for i in range(idx.size):
        r = idx[i]
        for j in range(g.shape[1]):
            full[r, j] += g[i, j]
