"""nn.fp8.BlockScaling's scale_rounding: passed to fpsim.mx.quantize; None keeps each
format's default (and the recipe's saved config)."""

from __future__ import annotations

import numpy as np
import pytest

import fpsim
import nn
from nn.fp8 import BlockScaling


@pytest.mark.parametrize("rule", ["floor", "ceil", "even"])
@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "nvfp4"])
def test_block_scaling_quantizes_both_operands_with_its_scale_rounding(rule, fmt):
    rng = np.random.default_rng(0)
    # block maxima between 448 * 2^e and 2^(e + 9): "floor" clips them, "ceil" does not
    a = (rng.standard_normal((4, 64)) * 100).astype(np.float32)
    b = (rng.standard_normal((64, 3)) * 100).astype(np.float32)
    a[:, 0], b[0, :] = 500.0, 500.0
    with nn.fp8_autocast(BlockScaling(fmt, scale_rounding=rule)):
        out = nn.Tensor(a) @ nn.Tensor(b)
    def oracle(r):  # float64 products of the quantized operands (fp32 sums differ by ~1e-7)
        qa = fpsim.mx.quantize(a, fmt, axis=-1, scale_rounding=r).astype(np.float64)
        qb = fpsim.mx.quantize(b, fmt, axis=-2, scale_rounding=r).astype(np.float64)
        return qa @ qb

    np.testing.assert_allclose(out.data, oracle(rule), rtol=1e-5)
    others = [oracle(r) for r in ("floor", "ceil", "even") if r != rule]
    assert any(not np.allclose(o, oracle(rule), rtol=1e-3) for o in others)  # the rule shows


def test_ceil_keeps_the_block_maximum_that_floor_clips():
    a = np.float32([[500.0] + [1.0] * 31])
    with nn.fp8_autocast(BlockScaling("mxfp8_e4m3", scale_rounding="ceil")):
        up = (nn.Tensor(a) @ nn.Tensor(np.eye(32, dtype=np.float32))).data
    with nn.fp8_autocast(BlockScaling("mxfp8_e4m3")):
        spec = (nn.Tensor(a) @ nn.Tensor(np.eye(32, dtype=np.float32))).data
    assert up[0, 0] == 512.0 and spec[0, 0] == 448.0  # E4M3 at scale 2: 500 -> 256 * 2


def test_the_default_scale_rounding_leaves_config_and_repr_as_they_were():
    assert BlockScaling("mxfp4_e2m1").config() == ("BlockScaling", "mxfp4_e2m1", "mxfp4_e2m1")
    assert repr(BlockScaling("nvfp4")) == "BlockScaling('nvfp4', backward='nvfp4')"
    ceil = BlockScaling("nvfp4", scale_rounding="ceil")
    assert ceil.config()[-1] == "ceil" and "scale_rounding='ceil'" in repr(ceil)


def test_an_unknown_scale_rounding_is_refused_on_construction():
    with pytest.raises(ValueError, match="scale_rounding must be one of .* got 'up'"):
        BlockScaling("mxfp8_e4m3", scale_rounding="up")
