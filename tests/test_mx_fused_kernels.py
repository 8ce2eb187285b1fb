"""The fused float32 kernels (fpsim.kernels.mx_nvfp4: NVFP4 nearest even, values and codes;
fpsim.kernels.mx: MX nearest-even codes; fpsim.kernels.mx_stochastic: every format,
stochastic, with the full draw or rng_bits) against the general kernel
(fpsim.kernels.mx_general, which a monitored call takes), bit for bit, on the cases where a
shortcut could go wrong: scales that round to 0 or to E4M3 subnormals, blocks of NaN and inf,
partial blocks, signed zeros, values from 2^-140 to 2^120; and the decode kernel
(fpsim.kernels.mx_decode) against numpy's ``element * scale`` over every code."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import fpsim
from fpsim import mx
from fpsim.kernels import threads


def general(x: np.ndarray, name: str | mx.BlockFormat = "nvfp4", **kw: object) -> np.ndarray:
    with fpsim.monitor():  # counting: the general kernel
        return mx.quantize(x, name, **kw)


def same_bits(a: np.ndarray, b: np.ndarray) -> None:
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("seed", range(4))
def test_fused_kernel_equals_the_general_kernel_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    shape = (7, 53)  # 53: a partial block of 5 in every row
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-140, 120, shape)).astype(np.float32)
    x[0, :16] = 0.0
    x[0, 3] = -0.0
    x[1, :16] = x[1, :16] * 2.0**-100  # far below the tensor's amax: scales round to 0
    x[2, 16:32] = np.float32(3e38) * np.sign(rng.standard_normal(16))
    x[3, 5] = np.nan
    x[4, 40] = -np.inf
    same_bits(mx.quantize(x, "nvfp4"), general(x))


@pytest.mark.parametrize("shape", [(7, 64), (3, 1120), (1, 16)])  # 1120: 70 blocks a row
@pytest.mark.parametrize("seed", range(3))
def test_whole_block_nvfp4_kernels_equal_the_general_kernel_bit_for_bit(monkeypatch, shape,
                                                                         seed):
    # rows of whole blocks of 16 take the chunked kernels, nearest, stochastic and encode
    # (their chunks of 64 blocks cross rows); the one-pass kernels are made to fail, so these
    # are the ones compared
    def refuse(*args: object) -> None:
        raise AssertionError("the one-pass kernel ran")

    monkeypatch.setattr(mx, "nvfp4_quantize_f32", refuse)
    monkeypatch.setattr(mx, "nvfp4_encode_f32", refuse)
    monkeypatch.setattr(mx, "mx_stochastic_f32", refuse)
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-140, 120, shape)).astype(np.float32)
    x.reshape(-1)[:16] = 0.0
    x.reshape(-1)[3] = -0.0
    if x.size > 64:
        x.reshape(-1)[16:32] *= np.float32(2.0**-100)  # scales round to 0
        x.reshape(-1)[40] = np.nan
        x.reshape(-1)[-7] = -np.inf
        x.reshape(-1)[64:80] = np.float32(3e38)
    same_bits(mx.quantize(x, "nvfp4"), general(x))
    for rng_bits in (None, 3):
        kw = dict(mode="stochastic", rng=seed, rng_bits=rng_bits)
        same_bits(mx.quantize(x, "nvfp4", **kw), general(x, "nvfp4", **kw))
    (scales, ts), codes = mx.encode(x, "nvfp4")
    want_scales, want_ts, want_codes = general_codes(x, "nvfp4")
    assert ts == np.float32(want_ts)
    np.testing.assert_array_equal(codes, want_codes.reshape(codes.shape))
    np.testing.assert_array_equal(scales, want_scales.reshape(scales.shape))


@pytest.mark.parametrize("seed", range(3))
def test_the_tensor_amax_pass_keeps_each_blocks_amax_and_the_finite_amax(seed):
    # whole_block_amax_f32: block b's largest |x| as bits (NaN and inf above every finite
    # value), and the largest finite |x| (what the separate tensor-amax pass returns)
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(16 * 40) * 2.0 ** rng.integers(-149, 127, 16 * 40)).astype(
        np.float32)
    x[:16] = np.inf  # a block of only inf: amax inf, no finite value
    x[20] = np.nan
    x[40:48] = -0.0
    x[48:64] = np.float32(2.0**-149) * rng.integers(-3, 4, 16)  # subnormals
    x[-1] = -np.inf
    rows = x.reshape(4, -1)
    amax, top = mx._whole_block_amax(rows)
    magnitude = np.abs(x.view(np.int32) & 0x7FFFFFFF).reshape(-1, 16)
    np.testing.assert_array_equal(amax, magnitude.max(axis=1))
    finite = np.abs(x[np.isfinite(x)])
    assert top == float(finite.max()) == mx._tensor_amax(rows)


@pytest.mark.parametrize("n", [32, 40])  # whole blocks of 16; a partial one
def test_a_two_level_integer_format_keeps_the_general_kernels_values_and_codes(n):
    # the NVFP4 kernels write -0 and sign-magnitude codes; an integer element format (INT8_64
    # under E4M3 block scales) has neither, so its calls must not take them
    bf = mx.BlockFormat("e4m3_scaled_int8", mx.INT8_64, 16, fpsim.catalog.E4M3FN,
                        integer=True)
    x = np.resize(np.float32([-1e-9, -0.0, 1.0, -3.0, 0.4, -100.0]), n)
    for kw in ({}, {"mode": "stochastic", "rng": 1}, {"mode": "stochastic", "rng": 1,
                                                      "rng_bits": 3}):
        same_bits(mx.quantize(x, bf, **kw), general(x, bf, **kw))
    (scales, ts), codes = mx.encode(x, bf)
    want_scales, want_ts, want_codes = general_codes(x[None], bf)
    assert ts == np.float32(want_ts)
    np.testing.assert_array_equal(codes, want_codes[0])
    np.testing.assert_array_equal(scales, want_scales[0])


def test_e4m3_subnormal_block_scales_agree():
    x = np.full((1, 64), 1.0, np.float32)
    x[0, 0] = 2688.0  # tensor scale 1: block scales amax / 6
    x[0, 16:32] = np.float32(6 * 2.0**-8)  # scale 2^-8: an E4M3 subnormal
    x[0, 32:48] = np.float32(6 * 2.0**-10) * np.arange(1, 17)  # rounds between subnormals
    x[0, 48:] = np.float32(6 * 2.0**-11)  # half the smallest subnormal: a tie to 0
    same_bits(mx.quantize(x, "nvfp4"), general(x))


@pytest.mark.parametrize("rule", ["ceil", "floor"])
def test_other_scale_rules_keep_the_general_kernel(rule):
    x = (np.random.default_rng(9).standard_normal(512) * 30).astype(np.float32)
    same_bits(mx.quantize(x, "nvfp4", scale_rounding=rule), general(x, scale_rounding=rule))


@pytest.mark.parametrize("name", sorted(mx.BLOCK_FORMATS))
@pytest.mark.parametrize("rule", ["floor", "ceil", "even"])
def test_fused_stochastic_kernel_draws_what_the_general_kernel_draws(name, rule):
    rng = np.random.default_rng(1)
    shape = (7, 83)  # 83: partial blocks of 16 and of 32
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-140, 120, shape)).astype(np.float32)
    x[0, :32] = 0.0
    x[0, 3] = -0.0
    x[1, :32] *= np.float32(2.0**-100)
    x[3, 5] = np.nan
    x[4, 40] = -np.inf
    kw = dict(mode="stochastic", rng=5, scale_rounding=rule)
    same_bits(mx.quantize(x, name, **kw), general(x, name, **kw))


def hard(shape: tuple[int, int], seed: int) -> np.ndarray:
    """float32 values from 2^-140 to 2^120 with the cases a shortcut could miss: an all-zero
    block (with a -0), a block far below the tensor's amax, NaN, -inf, huge values."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-140, 120, shape)).astype(np.float32)
    x[0, :32] = 0.0
    x[0, 3] = -0.0
    x[1, :32] *= np.float32(2.0**-100)
    x[2, 32:48] = np.float32(3e38) * np.sign(rng.standard_normal(16))
    x[3, 5] = np.nan
    x[4, 40] = -np.inf
    return x


def general_codes(x: np.ndarray, name: str | mx.BlockFormat, axis: int = -1, **kw: object):
    """encode through the general kernel (mx._run_blocks), as encode did before its fused
    kernels: (scale codes, tensor scale, element codes)."""
    bf = mx.get_block_format(name)
    rows = mx._rows(x, axis % x.ndim)
    codes = np.empty(rows.shape, np.uint8)
    scodes = np.empty((rows.shape[0], -(-rows.shape[1] // bf.block)), np.uint8)
    _, ts = mx._run_blocks(rows, None, codes, scodes, bf, mx.scale_rule(None, bf),
                           fpsim.rounding.get_mode(kw.get("mode", "nearest_even")), None, None,
                           False)
    return scodes, ts, codes


@pytest.mark.parametrize("name", sorted(mx.BLOCK_FORMATS))
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("seed", range(2))
def test_fused_encode_writes_the_general_kernels_codes(name, axis, seed):
    x = hard((9, 83), seed)  # 83 and 9: partial blocks of 16 and 32 along either axis
    scales, codes = mx.encode(x, name, axis=axis)
    want_scales, want_ts, want_codes = general_codes(x, name, axis)
    if mx.get_block_format(name).two_level:
        scales, ts = scales
        assert ts == np.float32(want_ts)
    np.testing.assert_array_equal(mx._rows(codes, axis % 2), want_codes)
    np.testing.assert_array_equal(mx._rows(scales, axis % 2), want_scales)


@pytest.mark.parametrize("name", sorted(mx.BLOCK_FORMATS))
def test_fused_encode_codes_every_element_value(name):
    # every finite element value of both signs, each in a block whose other element is the
    # element max (scale 1; NVFP4: tensor scale 1 and block scale 1), so each is its own
    # element: its code is what bits.to_bits (which knows nothing of blocks) gives it
    bf = mx.get_block_format(name)
    if bf.integer:
        values = np.arange(-127, 128) / 64
        want = (np.arange(-127, 128) & 0xFF).astype(np.uint8)
    else:
        mags = np.asarray(fpsim.bits.from_bits(np.arange(1 << (bf.element.bits - 1)),
                                               bf.element), np.float64)
        values = np.concatenate([mags[np.isfinite(mags)], -mags[np.isfinite(mags)]])
        want = np.asarray(fpsim.bits.to_bits(values, bf.element), np.uint8)
    x = np.zeros((values.size, 2), np.float32)
    x[:, 0] = values
    x[:, 1] = bf.element.max
    if bf.two_level:
        x[0, 1] = bf.element.max * 448  # the tensor's amax: tensor scale 1 ...
        x[1:, 1] = bf.element.max  # ... and block scale 1 elsewhere
    codes = mx.encode(x, name)[1]
    np.testing.assert_array_equal(codes[1:, 0], want[1:])
    np.testing.assert_array_equal(codes, general_codes(x, name)[2])


@pytest.mark.parametrize("name", sorted(mx.BLOCK_FORMATS))
@pytest.mark.parametrize(("rng_bits", "axis"), [(1, -1), (3, 0), (8, -1), (24, 0)])
def test_fused_stochastic_kernel_with_rng_bits_draws_what_the_general_kernel_draws(name,
                                                                                   rng_bits,
                                                                                   axis):
    x = hard((7, 83), 2)
    kw = dict(mode="stochastic", rng=11, rng_bits=rng_bits, axis=axis)
    same_bits(mx.quantize(x, name, **kw), general(x, name, **kw))


def near_smallest_subnormals(name: str, seed: int) -> np.ndarray:
    """Blocks of 32 whose amax 2^(emax + 1) - 1 ulp fixes the scale 2^0 (NVFP4: the tensor
    amax, so every other block's quotients lie near the elements' subnormals) and whose other
    values sit around the element format's smallest subnormal 2^qe (a quarter of it to four
    times it), plus (MX) blocks where x * 2^-e falls below float32's normal range."""
    bf = mx.get_block_format(name)
    elem = bf.element
    qe = elem.emin - elem.mantissa_bits
    rng = np.random.default_rng(seed)
    x = (2.0 ** rng.uniform(qe - 2, qe + 2, (8, 64)) * rng.choice([-1, 1], (8, 64)))
    x[:, ::32] = np.nextafter(np.float32(2.0 ** (elem.emax + 1)), np.float32(0))
    if not bf.two_level:  # (NVFP4's tensor scale would make every other block's scale 0)
        x[6] = rng.standard_normal(64) * 1e-38  # scaled down by 2^e > 0: float32 subnormals
        x[6, ::32] = 3e38
    return x.astype(np.float32)


@pytest.mark.parametrize("name", sorted(mx.BLOCK_FORMATS))
@pytest.mark.parametrize("rng_bits", [None, 1, 2, 7, 20, 21, 23, 24, 25, 30, 40, 55, 56])
def test_fused_stochastic_rounding_equals_the_general_kernels_for_any_random_bits(name,
                                                                                  rng_bits):
    # the fused kernel rounds an MX quotient on its float32 bits and NVFP4's on a float64
    # carrier of its own, the general kernel on the float64 carrier; the draw's bits must
    # line up for every split of rb against the s dropped bits, and below the smallest
    # subnormal
    for seed in range(2):
        for x in (near_smallest_subnormals(name, seed), hard((7, 83), seed)):
            kw = dict(mode="stochastic", rng=seed + 3, rng_bits=rng_bits)
            same_bits(mx.quantize(x, name, **kw), general(x, name, **kw))


@pytest.mark.parametrize("name", sorted(mx.BLOCK_FORMATS))
@pytest.mark.parametrize("n", [1, 15, 17, 33, 1000])
def test_fused_kernels_agree_with_the_general_kernel_on_odd_lengths(name, n):
    x = hard((5, 83), 3).reshape(-1)[:n].copy()
    same_bits(mx.quantize(x, name), general(x, name))
    kw = dict(mode="stochastic", rng=4)
    same_bits(mx.quantize(x, name, **kw), general(x, name, **kw))
    np.testing.assert_array_equal(mx.encode(x, name)[1], general_codes(x[None], name)[2][0])


def numpy_decode(scales: np.ndarray, codes: np.ndarray, name: str, ts: float = 1.0
                 ) -> np.ndarray:
    """decode as numpy computes it (1-D): each element's float64 value times its block's
    scale, rounded once to float32."""
    bf = mx.get_block_format(name)
    if bf.integer:
        elements = codes.view(np.int8).astype(np.float64) / 64
    else:
        elements = np.asarray(fpsim.bits.from_bits(codes, bf.element), np.float64)
    scale = np.asarray(fpsim.bits.from_bits(scales, bf.scale), np.float64) * ts
    with np.errstate(invalid="ignore", over="ignore"):  # (E5M2's inf times 0; beyond fp32)
        return (elements * np.repeat(scale, bf.block)[:codes.size]).astype(np.float32)


@pytest.mark.parametrize("name", sorted(mx.BLOCK_FORMATS))
def test_decode_kernel_is_element_times_scale_over_every_code(name):
    bf = mx.get_block_format(name)
    top = 256 if bf.integer else 1 << bf.element.bits
    codes = np.tile(np.arange(top, dtype=np.uint8), 40)[:top * 40 - 3]  # a partial block
    nb = -(-codes.size // bf.block)
    scale_codes = (np.arange(nb) * 7 % (128 if bf.two_level else 256)).astype(np.uint8)
    scale_codes[:2] = 0x7F if bf.two_level else 0xFF  # NaN scales: NaN blocks
    ts = np.float32(0.37) if bf.two_level else 1.0
    scales = (scale_codes, ts) if bf.two_level else scale_codes
    same_bits(mx.decode(scales, codes, name), numpy_decode(scale_codes, codes, name, ts))


def test_decode_refuses_a_code_beyond_the_element_format():
    with pytest.raises(ValueError):
        mx.decode(np.zeros(1, np.uint8), np.uint8([3, 16]), "mxfp4_e2m1")


@pytest.mark.parametrize("name", sorted(n for n, f in mx.BLOCK_FORMATS.items()
                                        if not f.two_level))
@pytest.mark.parametrize("monitored", [False, True])
def test_fused_mx_nearest_equals_the_float64_general_kernel_signed_zeros_included(name,
                                                                                 monitored):
    """float32 MX nearest even (fpsim.kernels.mx, counting or not) against float64 input of
    the same values (the general kernel), bit for bit: MXINT8 turns -0 into +0 in the kernel's
    one pass, the other formats keep the sign of zero."""
    rng = np.random.default_rng(11)
    shape = (5, 83)
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-30, 30, shape)).astype(np.float32)
    x[0, :32] = -0.0
    x[1, 3] = np.float32(-1e-30)  # rounds to -0 (MXINT8: +0)
    x[2, 7] = np.nan
    with fpsim.monitor() if monitored else contextlib.nullcontext():
        fused = mx.quantize(x, name)
    reference = mx.quantize(x.astype(np.float64), name).astype(np.float32)
    same_bits(fused, reference)
    assert not np.signbit(fused[0, :32]).any() if mx.BLOCK_FORMATS[name].integer else (
        np.signbit(fused[0, :32]).all())


@pytest.mark.parametrize("name", sorted(mx.BLOCK_FORMATS))
@pytest.mark.parametrize("kw", [{}, {"mode": "stochastic", "rng": 3},
                                {"mode": "stochastic", "rng": 3, "rng_bits": 5}],
                         ids=["nearest", "stochastic", "stochastic_rng_bits"])
@pytest.mark.parametrize("shape", [(3, 1001), (3, 1024)])  # partial blocks; whole blocks
def test_float32_kernels_give_the_same_bits_on_one_thread_and_on_two(monkeypatch, name, kw,
                                                                     shape):
    """Every float32 path (the fused kernels, encode and decode) split by whole blocks over two
    threads equals one thread bit for bit: blocks are independent and element i draws its
    random bits from its own index, whichever thread runs it (the ranges split inside rows)."""
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-20, 20, shape)).astype(np.float32)
    x[2, 1000] = 1e5  # the tensor amax in the last range: NVFP4's scale is global
    x[1, 40] = np.nan

    def run_all() -> list[np.ndarray]:
        scales, codes = mx.encode(x, name, **kw)
        parts = [*(scales if isinstance(scales, tuple) else (scales,)), codes]
        return [mx.quantize(x, name, **kw), *map(np.atleast_1d, parts),
                mx.decode(scales, codes, name)]

    monkeypatch.setattr(threads, "PARALLEL_MIN", 64)
    monkeypatch.setattr(threads, "_threads", 1)
    one = run_all()
    monkeypatch.setattr(threads, "_threads", 2)
    two = run_all()
    for a, b in zip(one, two, strict=True):
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))
