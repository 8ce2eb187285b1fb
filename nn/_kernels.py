"""numba kernels for nn's hot elementwise paths, each fused with the rounding to a format.

Kernels only: no validation, no API logic (nn.autograd.round_params packs the format, and the
ops in nn.functions decide when a kernel applies). No ``fastmath`` anywhere: the rounding
relies on exact IEEE float32 arithmetic, NaN and inf.

Rounding to nearest-even of a float32 ``x`` into a format with M mantissa bits, smallest
normal ``2^emin`` (>= float32's) and subnormals, in two regions of ``|x|``:

- normal region, ``|x| >= 2^emin``: the magnitude bits ``a`` of a float32 are monotone in the
  value and linear within a binade, so dropping ``d = 23 - M`` low bits with ties-to-even is
  integer arithmetic on ``a``; a carry out of the mantissa correctly bumps the exponent::

      a = 0|EEEEEEEE|MMMMMMMMMM|ddddddddddddd
                    |  M kept |  d dropped  |
      rounded = (a + 2^(d-1) - 1 + kept_lsb) & ~(2^d - 1)

- subnormal region, ``|x| < 2^emin``: the quantum is the fixed ``2^q``, ``q = emin - M``. Adding
  ``C = 2^(q+23)`` puts ``|x|`` in the float32 binade whose ulp is exactly ``2^q``, so the float32
  addition itself rounds to nearest-even on the quantum grid and ``(|x| + C) - C`` is exact.

A rounded magnitude above the format's max becomes OVF (inf, NaN or max: the format's overflow
policy); inf input also becomes OVF and NaN stays NaN.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

ABS_MASK = 0x7FFFFFFF
SIGN_MASK = 0x80000000
INF_BITS = 0x7F800000

# The kernels are single-threaded: measured on the 2-core machine they run at ~1 ns/element,
# and prange versions were slower there (their threads compete with BLAS's).


@njit(inline="always")
def _round_value(v, p):
    """The float32 ``v`` rounded to nearest-even in the format described by ``p`` (M < 23).

    Both regions are computed and one is selected, without branches: gradients straddle the
    subnormal boundary at random, and a mispredicted branch costs more than the other path.
    """
    M, MIN_NORMAL_BITS, C_SUB, MAX_BITS, OVF_BITS, NO_NEG_ZERO = p
    u = np.int64(np.float32(v).view(np.uint32))
    a = u & ABS_MASK
    sign = u & SIGN_MASK
    # subnormal region: the float32 addition rounds |v| on the 2^q grid; put the sign back
    sub = np.int64(np.float32((abs(v) + C_SUB) - C_SUB).view(np.uint32))
    sub = sub | (sign if (sub != 0 or NO_NEG_ZERO == 0) else 0)
    # normal region (and inf): ties-to-even on the magnitude bits, then the overflow policy
    d = 23 - M
    rb = (a + ((1 << d) >> 1) - 1 + ((a >> d) & 1)) & ~((1 << d) - 1)
    rb = OVF_BITS if rb > MAX_BITS else rb
    res = sub if a < MIN_NORMAL_BITS else (sign | rb)
    res = u if a > INF_BITS else res  # NaN stays NaN
    return np.uint32(res).view(np.float32)


@njit(cache=True)
def round_into(x, out, p):
    """out = x rounded to the format p (flat float32 arrays; out may be x)."""
    for i in range(x.size):
        out[i] = _round_value(x[i], p)


@njit(cache=True)
def bias_act_round(z, b, has_bias, relu, do_round, p):
    """In place, one pass over a 2-D float32 z: z = relu?(round(z + b)).

    relu(round(v)) == round(relu(v)) because rounding is monotone and odd, so the activation
    may follow the rounding. (Helpers here take scalars only: passing arrays to an inlined
    helper costs reference counting per element.)
    """
    for r in range(z.shape[0]):
        for j in range(z.shape[1]):
            v = z[r, j] + b[j] if has_bias else z[r, j]
            if do_round:
                v = _round_value(v, p)
            if relu and v <= 0:  # relu(NaN) stays NaN, as numpy.maximum(NaN, 0) does
                v = np.float32(0.0)
            z[r, j] = v


@njit(cache=True)
def relu_grad(g, y, out):
    """out = g where y > 0 else 0 (flat arrays). Exact: selecting a value never rounds."""
    for i in range(g.size):
        out[i] = g[i] if y[i] > 0 else 0


@njit(cache=True)
def erf(x, out):
    """out = erf(x) elementwise (flat arrays), in the carrier's precision."""
    for i in range(x.size):
        out[i] = math.erf(x[i])
