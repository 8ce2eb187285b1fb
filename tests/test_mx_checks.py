"""fpsim.mx refuses what it cannot mean and saturates what it can: BlockFormat's fields, decode's
scale codes, NVFP4's tensor scale beyond float32, and the chunked reference path."""

from __future__ import annotations

import numpy as np
import pytest

from fpsim import mx
from fpsim.catalog import E4M3FN, E8M0FNU, FP16
from fpsim.kernels import threads

F32_MAX = np.float32(np.finfo(np.float32).max)


def test_nvfp4_saturates_values_beyond_float32_instead_of_giving_nan():
    got = mx.quantize(np.float64([1e300, 1.0, -1e300]), "nvfp4")
    # oracle: tensor scale float32(max) / float32(6 * 448), block scale saturated at 448,
    # elements saturated at +-6 (1.0 is far below half the smallest step: 0)
    ts = float(F32_MAX / np.float32(6 * 448))
    assert got[0] == 6 * 448 * ts and got[2] == -6 * 448 * ts
    assert got[1] == 0.0
    assert np.all(np.isfinite(got))


def test_nvfp4_encode_of_a_huge_value_decodes_to_quantize():
    x = np.float64([1e300, 3e38, -2.0])
    scales, codes = mx.encode(x, "nvfp4")
    assert np.isfinite(scales[1]) and scales[1] > 0
    assert np.array_equal(mx.decode(scales, codes, "nvfp4"),
                          mx.quantize(x, "nvfp4").astype(np.float32))


@pytest.mark.parametrize("code", [300, 127.5, -1])
def test_decode_refuses_a_scale_code_that_is_not_a_uint8_code(code):
    with pytest.raises(TypeError, match=f"scales must be uint8 codes.*{code} is not a code"):
        mx.decode(np.array([code]), np.zeros(4, np.uint8), "mxfp8_e4m3")


def test_decode_refuses_a_sign_bit_nvfp4_block_scale():
    with pytest.raises(ValueError, match="sign bit clear.*got code 184"):
        mx.decode((np.uint8([0x38]) | np.uint8(0x80), np.float32(1.0)), np.zeros(4, np.uint8),
                  "nvfp4")


@pytest.mark.parametrize("ts", [-1.0, 0.0, np.inf, np.nan, "1"])
def test_decode_refuses_a_tensor_scale_that_is_not_positive_and_finite(ts):
    with pytest.raises(ValueError, match="nvfp4 tensor_scale must be a positive finite"):
        mx.decode((np.uint8([0x38]), ts), np.zeros(4, np.uint8), "nvfp4")


def test_decode_still_reads_the_nan_scale_codes():
    assert np.isnan(mx.decode(np.uint8([0xFF]), np.zeros(2, np.uint8), "mxfp4_e2m1")).all()
    assert np.isnan(mx.decode((np.uint8([0x7F]), np.float32(1)), np.zeros(2, np.uint8),
                              "nvfp4")).all()


@pytest.mark.parametrize(("fields", "error", "match"), [
    ({"block": -1}, ValueError, "block must be an int from 1 to 65536, got -1"),
    ({"block": 0}, ValueError, "block must be an int from 1 to 65536, got 0"),
    ({"block": -3}, ValueError, "got -3"),
    ({"block": True}, ValueError, "got True"),
    ({"block": 2.0}, ValueError, "got 2.0"),
    ({"block": 1 << 20}, ValueError, "got 1048576"),
    ({"scale": FP16}, ValueError, "scale must be E8M0FNU .* or E4M3FN"),
    ({"element": "e4m3fn"}, TypeError, "element must be a fpsim Format"),
    ({"integer": 1}, TypeError, "integer must be a bool"),
    ({"integer": True}, ValueError, "integer=True needs the element format INT8_64"),
    ({"name": ""}, TypeError, "name must be a non-empty str"),
])
def test_block_format_validates_every_field_on_construction(fields, error, match):
    args = {"name": "mine", "element": E4M3FN, "block": 32, "scale": E8M0FNU} | fields
    with pytest.raises(error, match=match):
        mx.BlockFormat(**args)


def test_a_valid_custom_block_format_quantizes_like_the_catalog_one():
    mine = mx.BlockFormat("mine", E4M3FN, np.int64(32), E8M0FNU)
    assert mine.block == 32 and type(mine.block) is int
    x = np.random.default_rng(0).standard_normal(100).astype(np.float32)
    assert np.array_equal(mx.quantize(x, mine), mx.quantize(x, "mxfp8_e4m3"))


@pytest.mark.parametrize("name", ["nvfp4", "mxfp6_e2m3", "mxint8"])
@pytest.mark.parametrize("mode", ["nearest_even", "toward_zero"])
@pytest.mark.parametrize("shape", [(3, 1000), (5000,)])
def test_blocks_split_over_threads_equal_one_block_range(monkeypatch, name, mode, shape):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-8, 8, shape)).astype(np.float64)
    x.reshape(-1)[-7] = 1e4  # the tensor amax in the last range: NVFP4's scale is global
    x.reshape(-1)[40] = np.nan
    whole = mx.quantize(x, name, mode=mode), mx.encode(x, name, mode=mode)
    monkeypatch.setattr(threads, "PARALLEL_MIN", 64)  # the kernels' block ranges split
    monkeypatch.setattr(threads, "_threads", 3)
    pieces = mx.quantize(x, name, mode=mode), mx.encode(x, name, mode=mode)
    np.testing.assert_array_equal(whole[0], pieces[0])
    def parts(encoded):
        scales, codes = encoded
        return [*(scales if isinstance(scales, tuple) else (scales,)), codes]

    for a, b in zip(parts(whole[1]), parts(pieces[1]), strict=True):
        np.testing.assert_array_equal(a, b)


def test_nvfp4_of_values_so_tiny_the_tensor_scale_underflows_keeps_them_exact():
    """amax / (6 * 448) is 0 in float32 below about 4e-42: the tensor scale is raised to
    2^-149 instead of dividing by zero; these subnormals are then E2M1 multiples of it."""
    x = np.array([1, 2, 3, 0x80000005], np.uint32).view(np.float32)
    np.testing.assert_array_equal(mx.quantize(x, "nvfp4"), x)
    assert mx.tensor_scale_of(float(x[0]), mx.get_block_format("nvfp4")) == 2.0**-149
