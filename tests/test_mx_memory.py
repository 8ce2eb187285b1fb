"""Every fpsim.mx path stays within 2x of the input's memory (issues 26, 27): tracemalloc sees
numpy's allocations, so its peak includes every temporary and the result (the kernels allocate
no array of the input's size themselves: they write into arrays numpy allocated)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import fpsim
from fpsim import mx
from fpsim.kernels import lazy

N = 1 << 20


@pytest.fixture(scope="module")
def x32() -> np.ndarray:
    fpsim.warmup()  # kernels loaded first: the law is about their paths
    lazy.wait()
    return (np.random.default_rng(0).standard_normal(N) * 100).astype(np.float32)


CALLS = {
    "quantize": lambda x, f: mx.quantize(x, f),
    "quantize stochastic": lambda x, f: mx.quantize(x, f, mode="stochastic", rng=1),
    "quantize rng_bits": lambda x, f: mx.quantize(x, f, mode="stochastic", rng=1, rng_bits=8),
    "quantize toward_zero": lambda x, f: mx.quantize(x, f, mode="toward_zero"),
    "quantize axis 0": lambda x, f: mx.quantize(x.reshape(-1, 1024), f, axis=0),
    "encode": lambda x, f: mx.encode(x, f),
    "encode axis 0": lambda x, f: mx.encode(x.reshape(-1, 1024), f, axis=0),
}


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("name", ["mxfp8_e4m3", "mxfp4_e2m1", "mxint8", "nvfp4"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_mx_path_peaks_within_twice_the_input(x32, call, name, dtype):
    x = x32.astype(dtype)
    CALLS[call](x[:2048], name)  # anything loaded on first use, loaded
    tracemalloc.start()
    try:
        CALLS[call](x, name)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 2 * x.nbytes, f"{call} {name}: peak {peak / x.nbytes:.2f}x the input"


@pytest.mark.parametrize("name", ["mxfp8_e4m3", "mxint8", "nvfp4"])
@pytest.mark.parametrize("axis", [0, -1])
def test_decode_allocates_only_its_output(x32, name, axis):
    x = x32.reshape(-1, 1024)
    scales, codes = mx.encode(x, name, axis=axis)
    mx.decode(*mx.encode(x[:4], name, axis=axis), name, axis=axis)  # loaded on first use
    tracemalloc.start()
    try:
        out = mx.decode(scales, codes, name, axis=axis)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # the float32 output, the scales' copy with the blocked axis last (axis 0), the tables
    assert peak <= out.nbytes + x.nbytes // 8 + (1 << 16), f"peak {peak / out.nbytes:.2f}x"
