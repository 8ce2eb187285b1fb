"""numba kernels for nn's hot elementwise paths, each fused with the rounding to a format.

Kernels only: no validation, no API logic (nn.autograd.round_params packs the format, and the
ops in nn.functions decide when a kernel applies). The rounding is fpsim's float32
nearest-even kernel (``fpsim._kernels.round_nearest_even_f32_value``), inlined here so that
bias, activation and rounding happen in one pass. No ``fastmath`` anywhere: the rounding relies
on exact IEEE float32 arithmetic, NaN and inf.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from fpsim._kernels import round_nearest_even_f32_value as _round_value

# The kernels are single-threaded: measured on the 2-core machine they run at ~1 ns/element,
# and prange versions were slower there (their threads compete with BLAS's).


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
