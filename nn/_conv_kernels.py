"""numba kernels for the convolution ops (nn.functions.conv); kernels only, no validation.

No ``fastmath``: the sums must be the IEEE additions the numpy version makes, in its order.
"""

from __future__ import annotations

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
