"""The fused float32 kernels (fpsim.kernels.mx_nvfp4: NVFP4 nearest even;
fpsim.kernels.mx_stochastic: every format, stochastic) against the general kernel
(fpsim.kernels.mx_general, which a monitored call takes), bit for bit, on the cases where a
shortcut could go wrong: scales that round to 0 or to E4M3 subnormals, blocks of NaN and inf,
partial blocks, signed zeros, values from 2^-140 to 2^120."""

from __future__ import annotations

import numpy as np
import pytest

import fpsim
from fpsim import mx


def general(x: np.ndarray, name: str = "nvfp4", **kw: object) -> np.ndarray:
    with fpsim.monitor():  # counting: the general kernel
        return mx.quantize(x, name, **kw)


def same_bits(a: np.ndarray, b: np.ndarray) -> None:
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("seed", range(4))
def test_fused_kernel_equals_the_general_kernel_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    shape = (7, 53)  # 53: a partial block of 5 in every row
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-140, 120, shape)).astype(np.float32)
    x[0, :16] = 0.0
    x[0, 3] = -0.0
    x[1, :16] = x[1, :16] * 2.0**-100  # far below the tensor's amax: scales round to 0
    x[2, 16:32] = np.float32(3e38) * np.sign(rng.standard_normal(16))
    x[3, 5] = np.nan
    x[4, 40] = -np.inf
    same_bits(mx.quantize(x, "nvfp4"), general(x))


def test_e4m3_subnormal_block_scales_agree():
    x = np.full((1, 64), 1.0, np.float32)
    x[0, 0] = 2688.0  # tensor scale 1: block scales amax / 6
    x[0, 16:32] = np.float32(6 * 2.0**-8)  # scale 2^-8: an E4M3 subnormal
    x[0, 32:48] = np.float32(6 * 2.0**-10) * np.arange(1, 17)  # rounds between subnormals
    x[0, 48:] = np.float32(6 * 2.0**-11)  # half the smallest subnormal: a tie to 0
    same_bits(mx.quantize(x, "nvfp4"), general(x))


@pytest.mark.parametrize("rule", ["ceil", "floor"])
def test_other_scale_rules_keep_the_general_kernel(rule):
    x = (np.random.default_rng(9).standard_normal(512) * 30).astype(np.float32)
    same_bits(mx.quantize(x, "nvfp4", scale_rounding=rule), general(x, scale_rounding=rule))


@pytest.mark.parametrize("name", sorted(mx.BLOCK_FORMATS))
@pytest.mark.parametrize("rule", ["floor", "ceil", "even"])
def test_fused_stochastic_kernel_draws_what_the_general_kernel_draws(name, rule):
    rng = np.random.default_rng(1)
    shape = (7, 83)  # 83: partial blocks of 16 and of 32
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-140, 120, shape)).astype(np.float32)
    x[0, :32] = 0.0
    x[0, 3] = -0.0
    x[1, :32] *= np.float32(2.0**-100)
    x[3, 5] = np.nan
    x[4, 40] = -np.inf
    kw = dict(mode="stochastic", rng=5, scale_rounding=rule)
    same_bits(mx.quantize(x, name, **kw), general(x, name, **kw))
