"""fpsim.torch.mx equals fpsim.mx bit for bit: quantize, encode and decode, every block
format (NVFP4 included), every scale rule, every deterministic element mode, NaN / inf /
all-zero / partial blocks, either axis."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import DETERMINISTIC_MODES
from torch_device import DEVICE

import fpsim
from fpsim.kernels.mx import SCALE_RULES

torch = pytest.importorskip("torch")
import fpsim.torch as ft  # noqa: E402

BLOCK_FORMATS = list(fpsim.mx.BLOCK_FORMATS)


def blocks_input(dtype: type, seed: int = 0) -> np.ndarray:
    """(5, 70) values: magnitudes across many binades, a NaN block, an inf block, an all-zero
    block, signed zeros, values past every element max; 70 = two full blocks of 32 and a
    partial one (four of 16 and a partial one for NVFP4)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((5, 70)) * np.exp2(rng.integers(-30, 30, (5, 70)))
    x[1, :] = rng.standard_normal(70) * 1e-3
    x[1, 3] = np.nan
    x[2, 40] = -np.inf
    x[3, :32] = 0.0
    x[3, 5] = -0.0
    x[4, :16] = [500, 465, 464, 7, 6.5, 1e5, 61440, -28, 3.3, 1e-9, -1e-40, 127 / 64, 2, 0, 1, -1]
    return x.astype(dtype)


def as_tensor(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x)).to(DEVICE)


def assert_equal_bits(got: torch.Tensor, want: np.ndarray) -> None:
    g = got.cpu().numpy()
    assert g.dtype == want.dtype and g.shape == want.shape
    nan = np.isnan(want) if want.dtype.kind == "f" else np.zeros(want.shape, bool)
    np.testing.assert_array_equal(np.isnan(g) if g.dtype.kind == "f" else nan, nan)
    np.testing.assert_array_equal(g[~nan].view(f"u{g.itemsize}"),
                                  want[~nan].view(f"u{want.itemsize}"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("rule", SCALE_RULES)
@pytest.mark.parametrize("fmt", BLOCK_FORMATS)
def test_mx_quantize_equals_fpsim_mx_for_every_rule_and_axis(fmt, rule, dtype):
    x = blocks_input(dtype)
    for axis in (-1, 0):
        for mode in DETERMINISTIC_MODES:
            want = fpsim.mx.quantize(x, fmt, axis=axis, scale_rounding=rule, mode=mode)
            got = ft.mx.quantize(as_tensor(x), fmt, axis=axis, scale_rounding=rule, mode=mode)
            assert_equal_bits(got, want)


@pytest.mark.parametrize("rule", SCALE_RULES)
@pytest.mark.parametrize("fmt", BLOCK_FORMATS)
def test_mx_encode_and_decode_equal_fpsim_mx(fmt, rule):
    x = blocks_input(np.float32, seed=1)
    for axis in (-1, 0):
        want_scales, want_codes = fpsim.mx.encode(x, fmt, axis=axis, scale_rounding=rule)
        got_scales, got_codes = ft.mx.encode(as_tensor(x), fmt, axis=axis, scale_rounding=rule)
        assert_equal_bits(got_codes, want_codes)
        if fmt == "nvfp4":
            assert_equal_bits(got_scales[0], want_scales[0])
            assert got_scales[1].item() == float(want_scales[1])
            assert got_scales[1].dtype == torch.float32
        else:
            assert_equal_bits(got_scales, want_scales)
        decoded = ft.mx.decode(got_scales, got_codes, fmt, axis=axis)
        assert_equal_bits(decoded, fpsim.mx.decode(want_scales, want_codes, fmt, axis=axis))
        assert_equal_bits(decoded, fpsim.mx.quantize(x, fmt, axis=axis, scale_rounding=rule))


@pytest.mark.parametrize("fmt", BLOCK_FORMATS)
@settings(max_examples=20)
@given(bits=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=100))
def test_mx_quantize_equals_fpsim_mx_on_random_bit_patterns(fmt, bits):
    x = np.array(bits, dtype=np.uint32).view(np.float32)
    assert_equal_bits(ft.mx.quantize(as_tensor(x), fmt), fpsim.mx.quantize(x, fmt))


def test_mx_stochastic_elements_land_on_neighbours_and_reproduce_per_seed():
    x = blocks_input(np.float32)[[0, 1, 4]]
    lo = fpsim.mx.quantize(x, "mxfp4_e2m1", mode="toward_zero")
    hi = fpsim.mx.quantize(x, "mxfp4_e2m1", mode="nearest_away")
    runs = [ft.mx.quantize(as_tensor(x), "mxfp4_e2m1", mode="stochastic",
                           generator=torch.Generator(DEVICE).manual_seed(s)) for s in (5, 5)]
    assert torch.equal(runs[0].nan_to_num(), runs[1].nan_to_num())
    g = runs[0].cpu().numpy()
    down = fpsim.mx.quantize(x, "mxfp4_e2m1", mode="down")
    up = fpsim.mx.quantize(x, "mxfp4_e2m1", mode="up")
    ok = (g == down) | (g == up) | np.isnan(g) & np.isnan(lo) & np.isnan(hi)
    assert ok.all()


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "nvfp4"])
def test_mx_monitor_records_fpsim_mx_block_counts(fmt):
    """The oracle is fpsim.mx's reference path (float64 input takes it): its float32 kernel
    counts a scaled value that underflows float32 (x = -1e-40 here) as zero, not flushed."""
    x = blocks_input(np.float32)
    with fpsim.monitor() as want:
        fpsim.mx.quantize(x.astype(np.float64), fmt, site="w")
    with fpsim.monitor() as got:
        ft.mx.quantize(as_tensor(x), fmt, site="w")
    assert got.blocks == want.blocks and got.blocks["w"]["saturated"] > 0


def test_mx_bad_arguments_raise_fpsim_mx_errors():
    t = torch.ones(4)
    with pytest.raises(ValueError, match="block format"):
        ft.mx.quantize(t, "mxfp9")
    with pytest.raises(ValueError, match="scale_rounding"):
        ft.mx.quantize(t, "mxfp8_e4m3", scale_rounding="up")
    with pytest.raises(ValueError, match="out of range"):
        ft.mx.quantize(t, "mxfp8_e4m3", axis=1)
    with pytest.raises(TypeError, match="uint8"):
        ft.mx.decode(torch.zeros(1, dtype=torch.uint8), torch.zeros(4), "mxfp8_e4m3")


@pytest.mark.parametrize("bad", [
    ("nvfp4", lambda s, t: ((s | 0x80, t), "sign bit")),
    ("nvfp4", lambda s, t: ((s, -t), "tensor_scale")),
    ("nvfp4", lambda s, t: ((s, float("inf")), "tensor_scale")),
    ("mxfp8_e4m3", lambda s, t: (s.to(torch.int32) + 300, "uint8")),
])
def test_decode_refuses_the_scales_fpsim_mx_decode_refuses(bad):
    """A sign-bit NVFP4 block scale, a non-positive or infinite tensor scale and scale codes
    that are not uint8 are refused, as by fpsim.mx.decode (no sign flipped, no code wrapped)."""
    fmt, spoil = bad
    x = torch.linspace(-3, 3, 64)
    scales, codes = ft.mx.encode(x, fmt)
    block, tensor = scales if isinstance(scales, tuple) else (scales, None)
    spoiled, words = spoil(block, tensor)
    with pytest.raises((TypeError, ValueError), match=words):
        ft.mx.decode(spoiled, codes, fmt)
