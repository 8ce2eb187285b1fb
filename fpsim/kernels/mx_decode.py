"""The block decoding kernel: element and scale codes (uint8) to float32 values, every MX
format and NVFP4.

Each value is ``element * scale`` in float64, rounded once to float32, with both factors
looked up in 256-entry float64 tables (every uint8 code's value; fpsim.mx builds them): the
element table (NaN and inf codes give NaN and inf) and the scale table (already times NVFP4's
tensor scale; a NaN scale code gives NaN, so its whole block decodes to NaN). Both products are
exact in float64 (a few significant bits times at most 28), so this is fpsim.mx's reference
decode, element for element. Kernels assume validated input (fpsim.mx checks the codes).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fpsim.kernels.mx import block_span, first_block


@njit(nogil=True, cache=True)
def mx_decode(ecodes, scodes, dst, lo, hi, n, block, elements, scales):
    """dst[i] = float32(elements[ecodes[i]] * scales[scodes[b]]) for the blocks lo..hi-1
    (ecodes, dst: 1-D views of C rows of n codes and values; scodes: one code per block)."""
    nb = (n + block - 1) // block
    r, c = first_block(lo, nb)
    for b in range(lo, hi):
        start, end, r, c = block_span(r, c, n, block, nb)
        s = scales[scodes[b]]
        for i in range(start, end):
            j = np.uint64(i)
            dst[j] = np.float32(elements[ecodes[j]] * s)
