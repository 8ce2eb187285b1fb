"""nn's rounding tells its kernel when the output is the input's memory (in_place), and the
kernel finds out itself when told nothing; either way the bits are fpsim.round's."""

from __future__ import annotations

import numpy as np

import fpsim
from nn.engine import kernels as _kernels
from nn.engine.rounding import round_array, round_params


def _x() -> np.ndarray:
    return (np.random.default_rng(3).standard_normal(3000) * 1e3).astype(np.float32)


def test_round_into_rounds_in_place_whether_told_or_left_to_find_out():
    p = round_params(fpsim.BF16)
    want = fpsim.round(_x(), fpsim.BF16)
    for hint in (True, None):
        x = _x()
        _kernels.round_into(x, x.reshape(-1), p, in_place=hint)
        np.testing.assert_array_equal(x, want)


def test_round_array_rounds_into_out_and_leaves_a_non_contiguous_input_alone():
    want = fpsim.round(_x(), fpsim.FP16)
    x = _x()
    assert round_array(x, fpsim.FP16, out=x) is x
    np.testing.assert_array_equal(x, want)
    wide = np.repeat(_x()[:, None], 2, axis=1)  # x[:, 0] is a strided view
    before = wide.copy()
    got = round_array(wide[:, 0], fpsim.FP16)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(wide, before)
    fresh = _x()
    got = round_array(fresh, fpsim.FP16)
    assert got is not fresh
    np.testing.assert_array_equal(fresh, _x())
    np.testing.assert_array_equal(got, want)
