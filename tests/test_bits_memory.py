"""The array paths of fpsim.bits stay within 2x of the input's memory besides their result.

numpy reports its allocations to tracemalloc, so the peak it measures includes every temporary.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import fpsim

N = 2**22


# one worker runs this module, so its module fixture is set up once
# (the fixture rounds a large array)
pytestmark = pytest.mark.xdist_group("bits_memory")


@pytest.fixture(scope="module")
def fp16_values() -> np.ndarray:
    x = np.random.default_rng(0).standard_normal(N).astype(np.float32) * 1000
    return fpsim.round(x, "fp16")


def _extra_memory(call) -> tuple[int, int]:
    """(peak bytes allocated during the call minus the result's bytes, result bytes)."""
    tracemalloc.start()
    try:
        result = call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    parts = result if isinstance(result, tuple) else (result,)
    size = sum(np.asarray(p).nbytes for p in parts)
    return peak - size, size


@pytest.mark.parametrize("name, call", [
    ("to_bits fp16", lambda x: fpsim.to_bits(x, "fp16")),
    ("to_bits fp32", lambda x: fpsim.to_bits(x, "fp32")),
    ("classify", lambda x: fpsim.classify(x, "fp16")),
    ("decompose", lambda x: fpsim.decompose(x, "fp16")),
])
def test_encoding_paths_use_at_most_twice_the_input_besides_the_result(fp16_values, name, call):
    extra, _ = _extra_memory(lambda: call(fp16_values))
    assert extra <= 2 * fp16_values.nbytes, f"{name}: {extra / fp16_values.nbytes:.2f}x"


@pytest.mark.parametrize("fmt", ["fp16", "e4m3fn"])
def test_from_bits_uses_at_most_twice_the_input_besides_the_result(fmt):
    f = fpsim.get_format(fmt)
    codes = np.random.default_rng(1).integers(0, 2**f.bits, N).astype(fpsim.bits.code_dtype(f))
    extra, size = _extra_memory(lambda: fpsim.from_bits(codes, fmt))
    assert size == 4 * N
    assert extra <= 2 * codes.nbytes, f"{extra / codes.nbytes:.2f}x"


def test_chunked_paths_agree_with_one_element_at_a_time_across_chunk_borders():
    chunk = fpsim.bits._CHUNK
    x = fpsim.round(np.random.default_rng(2).standard_normal(chunk + 5).astype(np.float32), "fp16")
    x[chunk - 1], x[chunk] = np.inf, 2**-24
    codes = fpsim.to_bits(x, "fp16")
    for i in (0, chunk - 1, chunk, chunk + 4):
        assert codes[i] == fpsim.to_bits(x[i], "fp16")
        assert fpsim.classify(x, "fp16")[i] == fpsim.classify(x[i], "fp16")
    np.testing.assert_array_equal(codes, np.float16(x).view(np.uint16))
    np.testing.assert_array_equal(fpsim.from_bits(codes, "fp16"), x)
    d = fpsim.decompose(x[:-1].reshape(2, -1)[:, :3], "fp16")
    assert d.sign.shape == (2, 3) and d.cls.shape == (2, 3)


def test_a_bad_value_in_a_later_chunk_is_named():
    x = np.zeros(fpsim.bits._CHUNK * 2 + 3, np.float32)
    x[-1] = 0.1
    with pytest.raises(ValueError, match=r"0\.10000000149011612 is not a value of float16"):
        fpsim.to_bits(x, "fp16")
