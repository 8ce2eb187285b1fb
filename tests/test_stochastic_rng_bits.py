"""Stochastic rounding with few random bits (``rng_bits=r``): the value goes up with probability
floor(f * 2^r) / 2^r for the dropped fraction f of the last place (Fitzgibbon and Felix, ARITH
2025), in the kernels, their numpy stand-in, the pure-Python spec, exponent-only formats and
fpsim.mx. None keeps the full-precision draw."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import fpsim
from fpsim import _kernels, mx
from fpsim.quantize import format_constants
from fpsim.rounding import RoundingMode

N = 1 << 16


def closed_form(f: Fraction, r: int | None) -> Fraction:
    return f if r is None else Fraction(math.floor(f * 2**r), 2**r)


# (format, x, its last place 2^q): f = (x - floor) / 2^q
CASES = [
    ("bf16", 1 + 2**-9 + 2**-11 + 2**-14, 2**-7),  # f = 0.3203125: cut at every r < 7
    ("fp16", 3 * 2**-27, 2**-24),  # below fp16's smallest subnormal: f = 3/8 of 2^-24
    ("e4m3fn", 1.0 + 0.125 * 0.7, 0.125),  # f = 0.7 (a float64 fraction)
    ("e5m2", -(2.0 + 0.5 * 0.9), 0.5),  # negative, f = 0.9
]


@pytest.mark.parametrize(("fmt", "x", "ulp"), CASES)
@pytest.mark.parametrize("r", [1, 2, 3, 5, 8, None])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_r_bit_rounding_goes_up_with_probability_floor_f_2r_over_2r(fmt, x, ulp, r, dtype):
    """The mean of N draws lies within 5 standard deviations of the closed form."""
    x = float(dtype(x))
    down = fpsim.round_scalar(x, fmt, "toward_zero")
    f = (abs(Fraction(x)) - abs(Fraction(down))) / Fraction(ulp)
    p = closed_form(f, r)
    got = fpsim.round(np.full(N, x, dtype), fmt, "stochastic", rng=1, rng_bits=r)
    assert set(np.unique(got)) <= {down, down + math.copysign(ulp, x)}
    up = np.mean(got != down)
    sd = math.sqrt(max(float(p * (1 - p)), 1e-12) / N)
    assert abs(up - float(p)) <= 5 * sd + 1e-12, (up, float(p), float(f))


def test_the_bias_of_r_bits_is_minus_the_cut_fraction_of_an_ulp():
    """E[round(x)] - x = -(f - floor(f 2^r) / 2^r) * ulp: r = 2 on f = 0.3203125 of bf16's ulp
    2^-7 goes up a quarter of the time, a bias of -0.0703125 ulp, which the full draw lacks."""
    fmt, x, ulp = CASES[0]
    y = fpsim.round(np.full(4 * N, x), fmt, "stochastic", rng=2, rng_bits=2)
    bias = (np.mean(y) - x) / ulp
    assert abs(bias - (-0.0703125)) < 5 * math.sqrt(0.25 * 0.75 / (4 * N))
    full = fpsim.round(np.full(4 * N, x), fmt, "stochastic", rng=2)
    assert abs((np.mean(full) - x) / ulp) < 5 * math.sqrt(0.33 * 0.67 / (4 * N))


@pytest.mark.parametrize("r", [1, 3, 7, 13])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["bf16", "fp16", "e4m3fn", "e2m1fn"])
def test_the_kernel_and_its_numpy_stand_in_draw_the_same_bits(r, dtype, fmt):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(5000) * 2.0 ** rng.integers(-30, 10, 5000)).astype(dtype)
    iv = np.int32 if dtype == np.float32 else np.int64
    src = x.view(iv)
    a, b = np.empty_like(src), np.empty_like(src)
    fm = fpsim.get_format(fmt)
    c = _kernels.carrier_constants(np.dtype(dtype))
    f = format_constants(fm, np.dtype(dtype), True, "inf" if fm.inf else "saturate")
    m = _kernels.mode_bits(RoundingMode.STOCHASTIC, r)
    _kernels.round_range(src, a, 0, src.size, m, 12345, c, f)
    _kernels.portable.round_range(src, b, 0, src.size, m, 12345, c, f)
    assert np.array_equal(a, b)


def test_rng_bits_56_is_the_full_draw_and_a_seed_gives_one_result():
    x = np.random.default_rng(4).standard_normal(3000).astype(np.float32)
    full = fpsim.round(x, "e4m3fn", "stochastic", rng=9)
    assert np.array_equal(full, fpsim.round(x, "e4m3fn", "stochastic", rng=9, rng_bits=56))
    three = fpsim.round(x, "e4m3fn", "stochastic", rng=9, rng_bits=3)
    assert np.array_equal(three, fpsim.round(x, "e4m3fn", "stochastic", rng=9, rng_bits=3))
    assert not np.array_equal(three, fpsim.round(x, "e4m3fn", "stochastic", rng=10, rng_bits=3))


@pytest.mark.parametrize("r", [1, 2, 4])
def test_the_spec_compares_the_draw_with_the_fraction_cut_to_r_bits(r):
    x = 1 + 2**-9 + 2**-11 + 2**-14  # bf16: f = 41/128
    p = closed_form(Fraction(41, 128), r)
    for j in range(2**r + 1):
        u = Fraction(j, 2**r + 1)
        got = fpsim.round_scalar(x, "bf16", "stochastic", u=u, rng_bits=r)
        assert got == (1 + 2**-7 if u < p else 1.0)


@pytest.mark.parametrize("r", [1, 2, None])
def test_exponent_only_formats_use_the_same_law(r):
    x = 1.3  # e8m0: between 1 and 2, f = 0.3
    got = fpsim.round(np.full(N, x), "e8m0fnu", "stochastic", rng=5, rng_bits=r)
    p = float(closed_form(Fraction(x) - 1, r))
    assert abs(np.mean(got == 2.0) - p) <= 5 * math.sqrt(max(p * (1 - p), 1e-12) / N) + 1e-12


@pytest.mark.parametrize("name", ["mxfp8_e4m3", "nvfp4"])
def test_mx_stochastic_elements_take_rng_bits(name):
    # a block whose largest element fixes the scale at 1 (E4M3: 2^8 <= 300 < 2^9 gives e = 0;
    # NVFP4: tensor and block scales chosen by the same amax); the others' fraction is known
    x = np.full(32, 1 + 0.125 * 0.7)
    x[0] = 300.0 if name == "mxfp8_e4m3" else 6.0
    reps = np.tile(x, (2048, 1))
    one = mx.quantize(reps, name, mode="stochastic", rng=3, rng_bits=1)[:, 1:]
    again = mx.quantize(reps, name, mode="stochastic", rng=3, rng_bits=1)[:, 1:]
    assert np.array_equal(one, again)
    if name == "mxfp8_e4m3":  # f = 0.7 of E4M3's step 1/8 at 1: one bit goes up half the time
        assert abs(np.mean(one > 1.0875) - 0.5) < 5 * math.sqrt(0.25 / one.size)
    codes = mx.encode(reps[:4], name, mode="stochastic", rng=3, rng_bits=2)[1]
    assert codes.dtype == np.uint8


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"rng_bits": 0}, "rng_bits must be None .* or an int from 1 to 56, got 0"),
    ({"rng_bits": 57}, "got 57"),
    ({"rng_bits": 2.0}, "got 2.0"),
    ({"rng_bits": True}, "got True"),
    ({"rng_bits": 4, "mode": "nearest_even"}, "rng_bits applies to mode='stochastic' only"),
])
def test_bad_rng_bits_raise_naming_the_argument(kwargs, match):
    mode = kwargs.pop("mode", "stochastic")
    with pytest.raises(ValueError, match=match):
        fpsim.round(np.ones(3), "bf16", mode, **kwargs)
    with pytest.raises(ValueError, match=match):
        fpsim.round_scalar(1.5, "bf16", mode, u=0.5, **kwargs)
    with pytest.raises(ValueError, match=match):
        mx.quantize(np.ones(3), "mxfp8_e4m3", mode=mode, **kwargs)
