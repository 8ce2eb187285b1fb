"""numba kernels for the convolution ops (nn.functions.conv); kernels only, no validation.

No ``fastmath``: the sums must be the IEEE additions the numpy version makes, in its order.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(nogil=True, cache=True)
def col2im_add(g, full, sh, sw):
    """``full[n, y*sh + i, x*sw + j, c] += g[n, y, x, i, j, c]`` for every window cell.

    ``g`` is ``(N, OH, OW, kh, kw, C)`` and C-contiguous; ``full`` the (padded) image,
    ``(N, Hp, Wp, C)``. The window offsets ``(i, j)`` form the outer loops, row-major, so that
    each pixel receives its contributions in the order of the numpy loop
    ``for i, j: full[:, i::sh, j::sw] += g[:, :, :, i, j]`` (bit-identical sums): inside one
    offset every pixel gets at most one contribution.
    """
    n, oh, ow, kh, kw, c = g.shape
    for i in range(kh):
        for j in range(kw):
            for b in range(n):
                for y in range(oh):
                    r = y * sh + i
                    for x in range(ow):
                        q = x * sw + j
                        for ch in range(c):
                            full[b, r, q, ch] += g[b, y, x, i, j, ch]


@njit(nogil=True, cache=True, error_model="numpy")
def max_pool_window_grads(xp, out, g, sh, sw, one, v):
    """``v[n, y, x, i, j, c] = (g / count) * hit`` for each cell of each max-pooling window:
    ``hit`` is 1 where the cell ``xp[n, y*sh + i, x*sw + j, c]`` equals the window's maximum
    ``out[n, y, x, c]`` (else 0) and ``count`` the window's hits, all in the carrier of ``one``
    (a 1 of xp's dtype), so the division and product are numpy's. ``error_model="numpy"``: a
    window without hits (a NaN maximum) divides by zero to inf or NaN, as numpy does. The
    channel loop is innermost (contiguous, vectorized)."""
    n, oh, ow, kh, kw, c = v.shape
    zero = one - one
    count = np.empty(c, dtype=v.dtype)
    share = np.empty(c, dtype=v.dtype)
    for b in range(n):
        for y in range(oh):
            for x in range(ow):
                count[:] = zero
                for i in range(kh):
                    for j in range(kw):
                        for ch in range(c):
                            hit = xp[b, y * sh + i, x * sw + j, ch] == out[b, y, x, ch]
                            count[ch] += one if hit else zero
                for ch in range(c):
                    share[ch] = g[b, y, x, ch] / count[ch]
                for i in range(kh):
                    for j in range(kw):
                        for ch in range(c):
                            hit = xp[b, y * sh + i, x * sw + j, ch] == out[b, y, x, ch]
                            v[b, y, x, i, j, ch] = share[ch] * (one if hit else zero)
