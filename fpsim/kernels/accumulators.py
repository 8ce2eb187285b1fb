"""The accumulator-model kernel (fpsim.accumulators): one row of exact products at a time.

A row is summed by an *inner* model, optionally chunk by chunk with each chunk's result added
into an *outer* accumulator:

- inner kind 0, IEEE: ``s = rnd(x0); s = rnd(s + xk)``, each addition correctly rounded to the
  inner format (TwoSum and round-to-odd, as fpsim.kernels.accumulate);
- inner kind 1, aligned groups: for each group of ``group`` terms, the running sum and the
  group's terms are aligned to the largest exponent among them and truncated toward zero to
  ``bits`` bits below (and including) that leading bit; the truncated terms are added exactly
  (a float64 holds them: bits + log2(group + 1) <= 53, checked by the caller) and the sum is
  rounded to the inner format;
- ``chunk`` > 0: chunks of ``chunk`` terms are summed by the inner model from zero, and each
  chunk's sum is added into the outer accumulator, rounded to the outer format every addition.

Formats and modes arrive as the general kernel's constants (``f``, ModeBits) with the float64
carrier ``c``; the kernel assumes validated arguments.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from fpsim.kernels.accumulate import _odd_sum, _round_f64, lost


@njit(inline="always")
def _aligned_add(s, x, start, end, bits, counts):
    """s + x[start:end] after every term (s too) is truncated toward zero to a multiple of
    2^(E - bits), where 2^(E - 1) <= the largest magnitude < 2^E: ``bits`` bits kept. A
    non-zero term truncated to zero is a swamped term (``counts[1]``)."""
    m = abs(s)
    for i in range(start, end):
        m = max(m, abs(x[i]))
    counts[0] += end - start
    if m == 0.0 or not math.isfinite(m):
        t = s
        for i in range(start, end):
            t += x[i]
        return t
    unit = math.ldexp(1.0, math.frexp(m)[1] - bits)
    t = math.trunc(s / unit) * unit
    for i in range(start, end):
        q = math.trunc(x[i] / unit)  # exact: integers of at most bits bits, in units
        counts[1] += np.int64(q == 0.0 and x[i] != 0.0)
        t += q * unit
    return t


@njit
def _inner(x, start, end, kind, group, bits, m_in, f_in, seed, base, c, counts):
    """The inner model's sum of x[start:end] (0.0 when empty); its additions and swamped
    terms added to ``counts``."""
    if end <= start:
        return 0.0
    if kind == 0:
        counts[0] += end - start - 1
        s = _round_f64(x[start], m_in, seed, base + start, c, f_in)
        for k in range(start + 1, end):
            t = _round_f64(_odd_sum(s, x[k]), m_in, seed, base + k, c, f_in)
            counts[1] += lost(s, x[k], t)
            s = t
        return s
    s = 0.0
    for g0 in range(start, end, group):
        s = _round_f64(_aligned_add(s, x, g0, min(end, g0 + group), bits, counts), m_in, seed,
                       base + g0, c, f_in)
    return s


@njit(nogil=True, cache=True)
def model_rows(x, out, lo, hi, kind, group, bits, m_in, f_in, chunk, m_out, f_out, seed, c):
    """out[r] = the model's sum of the float64 row x[r, :], for rows lo <= r < hi. Returns
    (additions, swamped terms) as fpsim.kernels.accumulate.accumulate_rows does: an inner or
    outer addition that lost a non-zero operand whole, or a term that aligned groups
    truncated to zero."""
    n = x.shape[1]
    counts = np.zeros(2, dtype=np.int64)
    for r in range(lo, hi):
        base = r * 2 * n
        if chunk <= 0:
            out[r] = _inner(x[r], 0, n, kind, group, bits, m_in, f_in, seed, base, c, counts)
            continue
        total = 0.0
        for c0 in range(0, n, chunk):
            part = _inner(x[r], c0, min(n, c0 + chunk), kind, group, bits, m_in, f_in, seed,
                          base, c, counts)
            if c0 == 0:
                total = _round_f64(part, m_out, seed, base + n + c0, c, f_out)
            else:
                t = _round_f64(_odd_sum(total, part), m_out, seed, base + n + c0, c, f_out)
                counts[0] += 1
                counts[1] += lost(total, part, t)
                total = t
        out[r] = total
    return counts
