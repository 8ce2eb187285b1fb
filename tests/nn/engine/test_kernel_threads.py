"""nn's fused rounding kernels use fpsim's thread pool only for arrays of
nn.engine.kernels.PARALLEL_MIN elements or more, and give the same bits either way."""

from __future__ import annotations

import numpy as np
import pytest

import fpsim
from nn.engine import kernels as _kernels
from nn.engine.rounding import round_params


@pytest.fixture
def parallel_flags(monkeypatch):
    seen: list[bool] = []
    real = _kernels.run

    def spy(*args, **kwargs):
        seen.append(kwargs.get("parallel", True))
        return real(*args, **kwargs)

    monkeypatch.setattr(_kernels, "run", spy)
    return seen


@pytest.mark.parametrize("n", [1 << 16, _kernels.PARALLEL_MIN])
def test_nn_rounding_splits_over_threads_only_from_parallel_min_and_rounds_the_same(
        parallel_flags, n):
    x = (np.random.default_rng(0).standard_normal(n) * 1e3).astype(np.float32)
    p = round_params(fpsim.BF16)
    out = np.empty_like(x)
    _kernels.round_into(x, out, p)
    z = x.reshape(-1, 256).copy()
    _kernels.bias_act_round(z, np.zeros(256, np.float32), True, False, True, p)
    # below PARALLEL_MIN the kernels run on the calling thread, without run()
    assert parallel_flags == ([True] * 2 if n >= _kernels.PARALLEL_MIN else [])
    want = fpsim.round(x, fpsim.BF16)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(z.reshape(-1), want)
