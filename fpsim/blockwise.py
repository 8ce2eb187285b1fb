"""Float8 block scaling with power-of-two fp32 scales, on 2-D blocks (DeepSeek-V3, section
3.3; Transformer Engine's Float8BlockScaling recipe).

Each tile of ``block = (rows, cols)`` elements over the last two axes (1x128 for activations
and gradients, 128x128 for weights in both sources) has one scale, ``scale_inv = 2^e`` with
``e`` the smallest integer such that ``amax <= fmt.max * 2^e``: the fp32 scale
``fmt.max / amax`` rounded down to a power of two (Transformer Engine's ``power_2_scale``), so
the tile's largest element never clips. ``e`` is clamped to float32's normal exponents
-126..127. Elements are ``x / 2^e`` (exact) rounded to ``fmt`` under ``mode``, saturating;
values are ``element * 2^e`` (exact in float64), rounded once to x's dtype. Partial tiles at the
edges are their own tiles; a tile holding NaN or inf is NaN throughout (its scale NaN); an
all-zero tile has scale 1.

>>> import numpy as np
>>> x = np.float32([[500.0, 1.0, -3.3]])
>>> quantize_blockwise(x, "e4m3fn", block=(1, 128))
array([[512.  ,   1.  ,  -3.25]], dtype=float32)
"""

from __future__ import annotations

import numpy as np

from fpsim.catalog import get_format
from fpsim.formats import Format
from fpsim.quantize import as_float_array
from fpsim.quantize import round as _round
from fpsim.rounding import RoundingMode, get_mode

ACTIVATIONS = (1, 128)  # DeepSeek-V3 / Transformer Engine: 1x128 tiles of activations
WEIGHTS = (128, 128)  # ... and 128x128 blocks of weights
_EMIN, _EMAX = -126, 127  # float32's normal exponents: the scale is a normal fp32


def _check_block(block: object) -> tuple[int, int]:
    ok = (isinstance(block, tuple) and len(block) == 2 and all(
        isinstance(b, (int, np.integer)) and not isinstance(b, bool) and b >= 1 for b in block))
    if not ok:
        raise ValueError(f"block must be a pair of positive ints (rows, cols), e.g. (1, 128) or "
                         f"(128, 128), got {block!r}")
    return int(block[0]), int(block[1])  # type: ignore[index]


def _tiles(x: np.ndarray, block: tuple[int, int]) -> np.ndarray:
    """x (..., R, C) padded with zeros to whole tiles, as (..., R/br, br, C/bc, bc)."""
    br, bc = block
    *lead, r, c = x.shape
    pr, pc = -(-r // br) * br, -(-c // bc) * bc
    pad = np.zeros((*lead, pr, pc), dtype=np.float64)
    pad[..., :r, :c] = x
    return pad.reshape(*lead, pr // br, br, pc // bc, bc)


def blockwise_scales(x: object, fmt: Format | str = "e4m3fn", block: tuple[int, int] = WEIGHTS
                     ) -> np.ndarray:
    """The tiles' scales ``scale_inv = 2^e`` (float32; NaN for a tile with NaN or inf), shape
    ``(..., ceil(R / rows), ceil(C / cols))``."""
    arr = as_float_array(x)
    if arr.ndim < 2:
        raise ValueError(f"x must have at least 2 dimensions (tiles span the last two), got "
                         f"shape {arr.shape}")
    fmt = get_format(fmt)
    t = _tiles(arr, _check_block(block))
    amax = np.max(np.abs(t), axis=(-3, -1))  # NaN or inf when the tile holds one
    bad = ~np.isfinite(amax)
    safe = np.where(bad | (amax == 0), 1.0, amax)
    # 2^(ex - 1) <= amax < 2^ex and 2^emax <= max < 2^(emax + 1): e is e0 or e0 + 1, decided
    # exactly (max * 2^e0 is exact in float64)
    e0 = np.frexp(safe)[1].astype(np.int64) - 1 - fmt.emax
    e = e0 + (safe > fmt.max * np.ldexp(1.0, e0))
    e = np.where(amax == 0, 0, np.clip(e, _EMIN, _EMAX))
    return np.where(bad, np.float32(np.nan), np.ldexp(np.float32(1), e).astype(np.float32))


def quantize_blockwise(
    x: object, fmt: Format | str = "e4m3fn", block: tuple[int, int] = WEIGHTS, *,
    mode: str | RoundingMode = "nearest_even", rng: object = None,
) -> np.ndarray:
    """``x`` quantized to ``fmt`` in tiles of ``block`` with power-of-two fp32 scales and
    dequantized, in x's dtype (see the module docstring for every rule)."""
    arr = as_float_array(x)
    fmt = get_format(fmt)
    block = _check_block(block)
    scale = blockwise_scales(arr, fmt, block).astype(np.float64)
    t = _tiles(arr, block)
    s = scale[..., :, None, :, None]
    with np.errstate(invalid="ignore"):
        elements = np.asarray(_round(t / np.where(np.isnan(s), 1.0, s), fmt, get_mode(mode),
                                     rng=rng, overflow="saturate"), np.float64)
        values = np.where(np.isnan(s), np.nan, elements * s)
    *lead, r, c = arr.shape
    pr, pc = values.shape[-4] * block[0], values.shape[-2] * block[1]
    out = values.reshape(*lead, pr, pc)[..., :r, :c]
    return np.ascontiguousarray(out).astype(arr.dtype)
