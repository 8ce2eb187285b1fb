"""nn's promotion policy wraps Format.contains (the one containment rule) and falls back to fp32."""

from __future__ import annotations

import numpy as np
import pytest

import fpsim
import nn
from nn.engine.formats import contains, promote

FTZ16 = fpsim.FP16.replace(name="fp16_ftz", subnormals=False)
FORMATS = [*fpsim.CATALOG, FTZ16, fpsim.E5M2.replace(name="e5m2_ftz", subnormals=False)]


def test_casting_a_tensor_holding_2_to_the_minus_19_into_flush_to_zero_fp16_gives_zero():
    t = nn.Tensor([2.0**-19, -(2.0**-19)])
    got = t.cast(FTZ16).numpy()
    expected = fpsim.round(np.float32([2.0**-19, -(2.0**-19)]), FTZ16)
    assert got.tolist() == expected.tolist() == [0.0, 0.0]
    assert np.signbit(got).tolist() == [False, True]
    assert nn.Tensor([2.0**-19], fmt="fp16").cast(FTZ16).numpy().tolist() == [0.0]


@pytest.mark.parametrize("a", FORMATS, ids=lambda f: f.name)
def test_nn_contains_is_format_contains(a):
    for b in FORMATS:
        assert contains(a, b) == a.contains(b), (a, b)


@pytest.mark.parametrize("a", FORMATS, ids=lambda f: f.name)
def test_nn_promotes_to_the_containing_format_else_fp32(a):
    for b in FORMATS:
        want = a if a.contains(b) else (b if b.contains(a) else fpsim.FP32)
        assert promote(a, b) is want, (a, b)


def test_the_float64_carrier_contains_every_format_and_no_format_contains_it():
    for f in FORMATS:
        assert contains(None, f) and not contains(f, None)
        assert promote(f, None) is None and promote(None, f) is None


def test_an_op_mixing_fp16_and_its_flush_to_zero_twin_computes_in_fp16():
    a, b = nn.Tensor([2.0**-19], fmt="fp16"), nn.Tensor([0.0], fmt=FTZ16)
    r = a + b
    assert r.fmt == fpsim.FP16 and r.numpy().tolist() == [2.0**-19]
