"""fpsim.mx.quantize_blockwise (Float8BlockScaling: 1x128 / 128x128 tiles, power-of-two fp32
scales) against a reference written here: exact Fractions, one tile at a time, elements rounded
by fpsim.round_scalar (the pure-Python spec)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import fpsim
from fpsim import mx
from fpsim.blockwise import ACTIVATIONS, WEIGHTS


def ref_tile(tile: list[float], fmt: str) -> list[float]:
    if any(not math.isfinite(v) for v in tile):
        return [math.nan] * len(tile)
    amax = max(abs(Fraction(v)) for v in tile)
    top = Fraction(fpsim.get_format(fmt).max)
    e = 0
    if amax:
        e = -200
        while amax > top * Fraction(2) ** e:  # the smallest e with amax <= max * 2^e
            e += 1
        e = min(max(e, -126), 127)
    s = Fraction(2) ** e
    return [float(Fraction(fpsim.round_scalar(Fraction(v) / s, fmt, overflow="saturate")) * s)
            for v in tile]


def ref(x: np.ndarray, fmt: str, block: tuple[int, int]) -> np.ndarray:
    out = np.empty(x.shape)
    br, bc = block
    for i in range(0, x.shape[0], br):
        for j in range(0, x.shape[1], bc):
            t = x[i:i + br, j:j + bc]
            out[i:i + br, j:j + bc] = np.array(ref_tile([float(v) for v in t.reshape(-1)],
                                                        fmt)).reshape(t.shape)
    return out


def sample(shape, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 2.0 ** rng.integers(-12, 12, shape)).astype(np.float32)


@pytest.mark.parametrize(("block", "shape"), [(ACTIVATIONS, (6, 300)), (WEIGHTS, (130, 131)),
                                              ((3, 5), (7, 11))])
@pytest.mark.parametrize("fmt", ["e4m3fn", "e5m2"])
def test_blockwise_equals_the_tile_by_tile_reference_with_partial_tiles(block, shape, fmt):
    x = sample(shape)  # partial tiles on both edges
    x[5, 7] = 0.0
    x[-1, -1] = np.nan
    got = mx.quantize_blockwise(x, fmt, block)
    want = ref(x, fmt, block)
    assert got.dtype == np.float32
    ok = (got == want) | (np.isnan(got) & np.isnan(want))
    assert ok.all()


def test_the_power_of_two_scale_never_lets_the_tile_maximum_clip():
    x = np.float32([[500.0, 1.0, 448.0, -449.0]])
    got = mx.quantize_blockwise(x, "e4m3fn", (1, 128))
    assert mx.blockwise_scales(x, "e4m3fn", (1, 128))[0, 0] == 2.0  # 500 / 2 <= 448
    assert got[0, 0] == 512.0 and got[0, 3] == -448.0  # nearest at scale 2, no clipping
    assert np.all(np.abs(got) <= 448.0 * 2)


def test_weight_tiles_share_one_scale_per_128x128_block():
    x = np.ones((256, 256), np.float32)
    x[0, 0] = 1000.0  # only the first tile's scale grows
    s = mx.blockwise_scales(x, "e4m3fn", (128, 128))
    assert s.shape == (2, 2) and s[0, 0] == 4.0 and np.all(s.reshape(-1)[1:] == 1.0 / 256)


@pytest.mark.parametrize("block", [(0, 128), (1,), "1x128", (1.0, 128)])
def test_bad_blocks_raise_naming_the_argument(block):
    with pytest.raises(ValueError, match="block must be a pair of positive ints"):
        mx.quantize_blockwise(np.ones((2, 2)), "e4m3fn", block)


def test_one_dimensional_input_is_refused():
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        mx.blockwise_scales(np.ones(4))
