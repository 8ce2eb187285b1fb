"""fpsim.torch.mx in mode "stochastic" with ``rng_bits``: fpsim.mx's law, exactly.

fpsim.mx draws its random bits inside numba kernels from a seed and torch from a
``torch.Generator``, so the two cannot be fed the same draws; what is equal is checked equal
(the scales, bit for bit, in every mode; the two neighbours an element may land on, from
fpsim.mx's "down" and "up"), and the probabilities are checked exactly by feeding the torch
path every r-bit draw (``fpsim.torch.rounding._draw`` replaced), as fpsim.torch.round's law
is checked."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from torch_device import DEVICE

import fpsim

torch = pytest.importorskip("torch")
import fpsim.torch as ft  # noqa: E402
import fpsim.torch.rounding as ft_rounding  # noqa: E402

FORMATS = ["mxfp8_e4m3", "mxfp6_e2m3", "mxfp4_e2m1", "mxint8", "nvfp4"]


def block_values(fmt: str, seed: int) -> np.ndarray:
    """Three blocks of float32 values: the first holds the tensor's largest value alone (for
    NVFP4 6 * 448, so that its tensor scale is 1), the others values across a few binades,
    each block's largest being the element's max times a power of two (so NVFP4's block
    scales, like MX's, are powers of two and every quotient and product is exact); some fall
    below the element's subnormals after scaling."""
    bf = fpsim.mx.get_block_format(fmt)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, bf.block)) * np.exp2(rng.integers(-6, 3, (3, bf.block)))
    x[0] = 0.0
    x[0, 0] = 6.0 * 448.0
    x[1:, 0] = bf.element.max * np.exp2([-1, 1])
    x[1, 3] = 1e-6 * x[1, 0]
    return x.reshape(-1).astype(np.float32)


def oriented_neighbours(x: np.ndarray, fmt: str) -> tuple[np.ndarray, np.ndarray]:
    """(toward zero, away from zero) per element: fpsim.mx.quantize's "down" and "up",
    swapped where x < 0."""
    down = fpsim.mx.quantize(x, fmt, mode="down")
    up = fpsim.mx.quantize(x, fmt, mode="up")
    negative = x < 0
    return np.where(negative, up, down), np.where(negative, down, up)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("r", [1, 3, 6])
def test_mx_rng_bits_round_an_element_up_for_exactly_floor_f_times_2_to_the_r_draws(
        fmt: str, r: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same three blocks as 2^r rows; row k gets the draw k in its top r bits (arbitrary
    low bits, which must not matter). Per element, exactly floor(f * 2^r) rows go away from
    zero, f the element's dropped fraction between fpsim.mx's two neighbours."""
    x = block_values(fmt, seed=r)
    rows = np.tile(x, (2**r, 1))
    low = torch.Generator().manual_seed(r)

    def draws(shape: torch.Size, device: torch.device, generator: object) -> torch.Tensor:
        assert shape[0] == 2**r  # (rows, blocks, block): no padding at this length
        v = torch.arange(2**r, dtype=torch.int64).reshape(-1, *[1] * (len(shape) - 1))
        noise = torch.randint(0, 2**(56 - r), tuple(shape), generator=low)
        return ((v << (56 - r)) | noise).to(device)

    monkeypatch.setattr(ft_rounding, "_draw", draws)
    got = ft.mx.quantize(torch.from_numpy(rows).to(DEVICE), fmt, mode="stochastic",
                         rng_bits=r).cpu().numpy()
    toward, away = oriented_neighbours(x, fmt)
    for j, value in enumerate(x):
        column = got[:, j]
        if toward[j] == away[j]:  # a value the block can hold stays itself
            assert np.all(column == toward[j])
            continue
        f = (Fraction(float(value)) - Fraction(float(toward[j]))) / (
            Fraction(float(away[j])) - Fraction(float(toward[j])))
        ups = int(np.count_nonzero(column == away[j]))
        assert ups + int(np.count_nonzero(column == toward[j])) == 2**r
        assert ups == math.floor(f * 2**r), (fmt, value, f)


@pytest.mark.parametrize("fmt", FORMATS)
def test_mx_rng_bits_scales_equal_fpsim_mx_and_elements_land_on_its_neighbours(
        fmt: str) -> None:
    x = np.stack([block_values(fmt, seed) for seed in range(4)])
    x[1, 5] = np.nan  # its block NaN throughout, as fpsim.mx's
    block = fpsim.mx.get_block_format(fmt).block
    t = torch.from_numpy(x).to(DEVICE)

    def run(seed: int) -> torch.Tensor:
        return ft.mx.quantize(t, fmt, mode="stochastic", rng_bits=3,
                              generator=torch.Generator(DEVICE).manual_seed(seed))

    want_scales, _ = fpsim.mx.encode(x, fmt, mode="stochastic", rng_bits=3, rng=7)
    got_scales, _ = ft.mx.encode(t, fmt, mode="stochastic", rng_bits=3,
                                 generator=torch.Generator(DEVICE).manual_seed(7))
    if isinstance(want_scales, tuple):  # NVFP4: (block scale codes, tensor scale)
        assert float(got_scales[1]) == float(want_scales[1])
        want_scales, got_scales = want_scales[0], got_scales[0]
    np.testing.assert_array_equal(got_scales.cpu().numpy(), want_scales)
    got = run(11).cpu().numpy()
    np.testing.assert_array_equal(got, run(11).cpu().numpy())  # reproducible per seed
    toward, away = oriented_neighbours(x, fmt)
    nan = np.isnan(fpsim.mx.quantize(x, fmt, mode="stochastic", rng_bits=3, rng=7))
    assert np.array_equal(np.isnan(got), nan)
    assert nan[1, :block].all() and not nan[1, block:].any() and not nan[0].any()
    assert np.all((got == toward) | (got == away) | nan)


@pytest.mark.parametrize("r", [2, None])
def test_mx_rng_bits_go_up_as_often_as_fpsim_mx_does(r: int | None) -> None:
    """e4m3 elements at scale 1 (the block's largest is 448): 1 + 0.3 ulp goes up with
    probability floor(0.3 * 2^r) / 2^r = 1/4 with r = 2, 0.3 with every bit; both paths within
    5 standard errors of it (the draws are two-valued: a standard error <= 0.5 / sqrt(n))."""
    n = 32 * 4096
    x = np.full(n, 1 + 0.3 * 2.0**-3, np.float32)
    x[::32] = 448.0
    p = 0.25 if r == 2 else 0.3
    bound = 5 * 0.5 / math.sqrt(n)
    got = ft.mx.quantize(torch.from_numpy(x).to(DEVICE), "mxfp8_e4m3", mode="stochastic",
                         rng_bits=r, generator=torch.Generator(DEVICE).manual_seed(1))
    want = fpsim.mx.quantize(x, "mxfp8_e4m3", mode="stochastic", rng_bits=r, rng=1)
    inner = x != 448.0
    for values in (got.cpu().numpy(), want):
        assert set(np.unique(values[inner])) == {1.0, 1.125}
        assert abs(np.mean(values[inner] == 1.125) - p) < bound


def test_mx_rng_bits_that_cannot_reach_f_never_round_up_in_either_path() -> None:
    """f = 1/4 with one random bit: floor(1/2) / 2 = 0, so every element goes down, in torch
    and in fpsim.mx alike (bit for bit, whatever the draws)."""
    x = np.tile(np.float32([6.0, 4.5, -4.5, 4.5]), 64)  # mxfp4: scale 1, 4.5 between 4 and 6
    want = fpsim.mx.quantize(x, "mxfp4_e2m1", mode="stochastic", rng_bits=1, rng=3)
    got = ft.mx.quantize(torch.from_numpy(x).to(DEVICE), "mxfp4_e2m1", mode="stochastic",
                         rng_bits=1).cpu().numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, np.tile(np.float32([6.0, 4.0, -4.0, 4.0]), 64))


def test_mx_rng_bits_and_generator_are_checked_as_fpsim_checks_them() -> None:
    t = torch.ones(32)
    with pytest.raises(ValueError, match="rng_bits must be None"):
        ft.mx.quantize(t, "mxfp8_e4m3", mode="stochastic", rng_bits=0)
    with pytest.raises(ValueError, match="applies to mode='stochastic' only"):
        ft.mx.encode(t, "mxfp8_e4m3", rng_bits=4)
    with pytest.raises(TypeError, match="generator must be a torch.Generator or None, got int"):
        ft.mx.quantize(t, "mxfp8_e4m3", mode="stochastic", generator=3)  # type: ignore[arg-type]
