"""nn's rounding kernel gives the same bits in place (its one-array loop) as into a new array."""

from __future__ import annotations

import numpy as np
import pytest

import fpsim
from nn.engine import kernels as _kernels
from nn.engine.rounding import round_params


@pytest.mark.parametrize("fmt", [fpsim.FP16, fpsim.BF16, fpsim.E4M3FN])
def test_rounding_in_place_equals_rounding_into_a_fresh_array(fmt):
    p = round_params(fmt)
    if p is None:
        pytest.skip(f"no float32 kernel for {fmt.name}")
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(70_000) * 10.0 ** rng.integers(-8, 6, 70_000),
                        [np.inf, -np.inf, np.nan, 0.0, -0.0, 65520.0]]).astype(np.float32)
    fresh = np.empty_like(x)
    _kernels.round_into(x, fresh, p)
    inplace = x.copy()
    _kernels.round_into(inplace, inplace, p)
    np.testing.assert_array_equal(inplace.view(np.uint32), fresh.view(np.uint32))
    np.testing.assert_array_equal(fresh, fpsim.round(x, fmt))
