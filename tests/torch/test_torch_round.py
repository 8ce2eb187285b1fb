"""fpsim.torch.round equals fpsim.round bit for bit: every code, midpoint and neighbour of the
<= 16-bit catalog formats, random bit patterns of every catalog format, every mode, float16 /
bfloat16 / float32 / float64 input, the subnormals and overflow overrides."""

from __future__ import annotations

import itertools
import math
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import sample_points
from strategies import DETERMINISTIC_MODES, SMALL_CATALOG, float32_arrays
from torch_device import DEVICE

import fpsim
from fpsim.formats import OVERFLOW_KINDS

torch = pytest.importorskip("torch")
import fpsim.torch as ft  # noqa: E402
from fpsim.torch import rounding as tr  # noqa: E402

_INT = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}
ALL_FORMATS = list(fpsim.CATALOG)


def as_tensor(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x)).to(DEVICE)


def assert_same_bits(got: torch.Tensor, want: np.ndarray, nan_payloads: bool = True) -> None:
    """got's bits equal want's (NaN payloads and signs aside when nan_payloads is False)."""
    got_np = got.cpu().numpy()
    assert got_np.dtype == want.dtype and got_np.shape == want.shape
    g, w = got_np.view(_INT[want.dtype]), want.view(_INT[want.dtype])
    if not nan_payloads:
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got_np), nan)
        g, w = g[~nan], w[~nan]
    bad = np.flatnonzero(g != w)
    assert bad.size == 0, (f"{bad.size} mismatches, first inputs at {bad[:5]}: got "
                           f"{got_np.reshape(-1)[bad[:5]]}, want {want.reshape(-1)[bad[:5]]}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("mode", DETERMINISTIC_MODES)
@pytest.mark.parametrize("fmt", SMALL_CATALOG, ids=lambda f: f.name)
def test_round_equals_fpsim_round_on_every_code_midpoint_and_neighbour(fmt, mode, dtype):
    x = sample_points(fmt, dtype)
    want = fpsim.round(x, fmt, mode)
    got = ft.round(as_tensor(x), fmt, mode)
    assert got.dtype == torch.from_numpy(x).dtype and got.device.type == DEVICE
    assert_same_bits(got, want)


@pytest.mark.parametrize("fmt", list(tr.NATIVE_CASTS), ids=lambda f: f.name)
def test_torch_cast_path_under_every_overflow_policy_equals_fpsim_round(fmt):
    """float32 nearest-even takes torch's cast, its overflow fixed to the policy: every code,
    midpoint and neighbour, NaN payloads included; the table's policy is the cast's own (where
    it names none, the cast agrees wherever nothing overflows, and gives max or NaN where it
    does: an H200's CUDA cast gave NaN for float8_e4m3fn's overflows and infinities)."""
    x = sample_points(fmt, np.float32)
    dtype, own = tr.NATIVE_CASTS[fmt]
    cast = as_tensor(x).to(dtype).float()
    if own is None:
        saturated = fpsim.round(x, fmt, overflow="saturate")
        over = (np.abs(saturated) == fmt.max) & (np.abs(x) > fmt.max)  # inf included
        got = cast.cpu().numpy()
        assert np.all(np.isnan(got[over]) | (got[over] == saturated[over]))
        assert_same_bits(cast[torch.from_numpy(~over).to(cast.device)],
                         saturated[~over], nan_payloads=False)
    else:
        assert_same_bits(cast, fpsim.round(x, fmt, overflow=own), nan_payloads=False)
    for policy in OVERFLOW_KINDS:
        if policy == "inf" and not fmt.inf or policy == "nan" and not fmt.has_nan:
            continue
        assert_same_bits(ft.round(as_tensor(x), fmt, overflow=policy),
                         fpsim.round(x, fmt, overflow=policy))


@pytest.mark.parametrize("fmt", [f for f, fast in tr._DECODES.items() if fast],
                         ids=lambda f: f.name)
def test_fp8_codes_decoded_through_float16_bits_equal_fpsim_round(fmt):
    """On the CPU, a float32 tensor with no NaN and nothing past the overflow threshold takes
    torch's fp8 cast and the float16 decoding of its codes (_decode_fp8): every finite code,
    midpoint and neighbour in range, both zeros, in one tensor, bit for bit fpsim.round."""
    x = sample_points(fmt, np.float32)
    threshold = float(tr._nearest_even_constants(fmt, True, fmt.overflow).THRESHOLD)
    x = np.concatenate([x[np.abs(x) < threshold], np.float32([0.0, -0.0])])
    assert_same_bits(ft.round(torch.from_numpy(x), fmt), fpsim.round(x, fmt))
    q = torch.from_numpy(x).to(tr.NATIVE_CASTS[fmt][0])  # and every code torch's cast gives
    assert torch.equal(tr._decode_fp8(q, fmt), q.to(torch.float32))


@pytest.mark.parametrize("fmt", [f for f in SMALL_CATALOG if f.zero], ids=lambda f: f.name)
def test_integer_path_equals_fpsim_round_where_float32_nearest_even_bypasses_it(fmt):
    """The integer path serves every call that counts events (counting=True takes it);
    float32 nearest-even calls take a float32 path otherwise, so check it on them too."""
    x = sample_points(fmt, np.float32)
    got = tr.round_checked(as_tensor(x), fmt, fpsim.RoundingMode.NEAREST_EVEN, None,
                           fmt.subnormals, fmt.overflow, None, counting=True)
    assert_same_bits(got, fpsim.round(x, fmt))


@pytest.mark.parametrize("fmt", SMALL_CATALOG, ids=lambda f: f.name)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_input_gives_fpsim_rounds_value_in_its_own_dtype(dtype, fmt):
    """Every float16 / bfloat16 bit pattern: the result is fpsim.round's value of the same
    number, cast to the input's dtype (torch's cast; exact where fmt's values fit it)."""
    t = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(
        getattr(torch, dtype)).to(DEVICE)
    for mode in DETERMINISTIC_MODES:
        want = fpsim.round(t.cpu().double().numpy(), fmt, mode)
        got = ft.round(t, fmt, mode)
        assert got.dtype == t.dtype
        expected = torch.from_numpy(want).to(t.dtype)
        np.testing.assert_array_equal(got.cpu().isnan().numpy(), expected.isnan().numpy())
        keep = ~expected.isnan()
        assert torch.equal(got.cpu()[keep].view(torch.int16), expected[keep].view(torch.int16))


bit_patterns32 = st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=200).map(
    lambda xs: np.array(xs, dtype=np.uint32).view(np.float32))
bit_patterns64 = st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=200).map(
    lambda xs: np.array(xs, dtype=np.uint64).view(np.float64))


@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=lambda f: f.name)
@settings(max_examples=25)
@given(x32=bit_patterns32, x64=bit_patterns64, mixed=float32_arrays())
def test_round_equals_fpsim_round_on_random_bit_patterns(fmt, x32, x64, mixed):
    for x, mode in itertools.product((x32, x64, mixed), DETERMINISTIC_MODES):
        got = ft.round(as_tensor(x), fmt, mode)
        assert_same_bits(got, fpsim.round(x, fmt, mode))


OPTIONS = [
    ("float16", {"subnormals": False}),
    ("bfloat16", {"subnormals": False}),
    ("float8_e4m3fn", {"subnormals": False}),
    ("float8_e4m3fn", {"overflow": "saturate"}),
    ("float8_e5m2", {"overflow": "saturate"}),
    ("float8_e5m2", {"overflow": "nan"}),
    ("float16", {"overflow": "saturate", "subnormals": False}),
    ("float8_e4m3fnuz", {"overflow": "saturate"}),
    ("float6_e2m3fn", {"subnormals": False}),
    ("binary8p4se", {"overflow": "saturate"}),
    ("binary8p1ue", {"overflow": "saturate"}),
    ("float8_e8m0fnu", {"overflow": "saturate"}),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("mode", DETERMINISTIC_MODES)
@pytest.mark.parametrize("name,options", OPTIONS, ids=lambda o: str(o))
def test_subnormals_and_overflow_overrides_equal_fpsim_round(name, options, mode, dtype):
    fmt = fpsim.get_format(name)
    x = sample_points(fmt, dtype) if fmt.bits <= 16 else None
    if x is None:
        x = np.concatenate([sample_points(fpsim.E4M3FN, dtype), np.ldexp(1.0, np.arange(
            -160, 140)).astype(dtype)])
    got = ft.round(as_tensor(x), fmt, mode, **options)
    assert_same_bits(got, fpsim.round(x, fmt, mode, **options))


def test_float64_input_is_rounded_once_from_its_own_bits():
    """float64 input is rounded from its own bits: 1 + 2^-24 + 2^-40 goes up in float32, and
    a detour through float32 would take the tie to the even 1.0."""
    x = torch.tensor([1 + 2.0**-24 + 2.0**-40, 1 + 2.0**-24], dtype=torch.float64, device=DEVICE)
    got = ft.round(x, "float32").cpu().tolist()
    assert got == [1 + 2.0**-23, 1.0]


# --- stochastic rounding --------------------------------------------------------------------
def _neighbours(x: np.ndarray, fmt: str) -> tuple[np.ndarray, np.ndarray]:
    return fpsim.round(x, fmt, "down"), fpsim.round(x, fmt, "up")


@pytest.mark.parametrize("fmt", ["float16", "bfloat16", "float8_e4m3fn", "float4_e2m1fn",
                                 "float8_e8m0fnu", "binary8p1ue"])
def test_stochastic_rounding_lands_on_a_neighbour(fmt):
    x = sample_points(fpsim.get_format(fmt), np.float32) if fpsim.get_format(fmt).bits <= 8 \
        else np.random.default_rng(0).standard_normal(5000).astype(np.float32) * 100
    x = x[np.isfinite(x) & (np.abs(x) <= fpsim.get_format(fmt).max)]
    if not fpsim.get_format(fmt).signed:
        x = np.abs(x)[np.abs(x) > 0]
    lo, hi = _neighbours(x, fmt)
    got = ft.round(as_tensor(x), fmt, "stochastic",
                   generator=torch.Generator(DEVICE).manual_seed(1)).cpu().numpy()
    assert np.all((got == lo) | (got == hi) | (np.isnan(got) & np.isnan(lo)))
    exact = x[lo == hi]
    np.testing.assert_array_equal(ft.round(as_tensor(exact), fmt, "stochastic").cpu().numpy(),
                                  fpsim.round(exact, fmt))


def test_stochastic_rounding_is_reproducible_per_seed():
    x = as_tensor(np.random.default_rng(1).standard_normal(10000).astype(np.float32))
    a, b, c = (ft.round(x, "e4m3fn", "stochastic",
                        generator=torch.Generator(DEVICE).manual_seed(s)) for s in (7, 7, 8))
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize("fmt,value", [("bfloat16", 1 + 2.0**-9), ("float16", 2.0**-24 * 0.3),
                                       ("float8_e4m3fn", 300.0), ("float16", -1 - 2.0**-12)])
def test_stochastic_rounding_is_unbiased(fmt, value):
    """P(up) is the distance fraction: the mean of n draws is within 5 standard errors of x
    (the draws are two-valued, so the standard error is at most ulp/(2 sqrt(n)))."""
    n = 200_000
    x = torch.full((n,), value, dtype=torch.float64, device=DEVICE)
    got = ft.round(x, fmt, "stochastic", generator=torch.Generator(DEVICE).manual_seed(3))
    lo, hi = _neighbours(np.float64(value), fmt)
    assert set(got.unique().cpu().tolist()) == {float(lo), float(hi)}
    bound = 5 * (hi - lo) / (2 * math.sqrt(n))
    assert abs(got.mean().item() - value) < bound


@pytest.mark.parametrize("fmt", ["float16", "bfloat16", "float8_e4m3fn", "float4_e2m1fn"])
@pytest.mark.parametrize("r", [1, 3, 6])
def test_rng_bits_round_up_for_exactly_floor_f_times_2_to_the_r_of_the_draws(fmt, r):
    """With r random bits the draw v is one of 2^r values; over all of them (each carried in
    56 random bits with arbitrary low bits, which must not matter) exactly floor(f * 2^r) go up,
    f the dropped fraction of the last place (fpsim.rounding.check_rng_bits' law), for values
    whose f has fewer, as many and more bits than r, subnormal and below the subnormals."""
    from fractions import Fraction

    from fpsim import _kernels
    from fpsim.rounding import RoundingMode
    from fpsim.torch.rounding import _constants, round_bits

    form = fpsim.get_format(fmt)
    tiny = form.smallest_subnormal
    xs = np.array([1 + 2.0**-12, 1 + 3 * 2.0**-13, 1.1, -1.3, 0.3 * tiny, -0.7 * tiny,
                   tiny * 1.5, form.smallest_normal * 1.9, 2.5, 3.3], np.float32)
    c, f = _constants(form, torch.float32, True, "inf")
    m = _kernels.mode_bits(RoundingMode.STOCHASTIC, r)
    v = torch.arange(2**r, dtype=torch.int64)
    low = torch.randint(0, 2**(56 - r), (2**r,), generator=torch.Generator().manual_seed(r))
    u = (v << (56 - r)) | low
    for x in xs:
        bits = torch.tensor([x], dtype=torch.float32).view(torch.int32).to(torch.int64)
        res, _ = round_bits(bits.expand(2**r), m, u, c, f)
        got = res.to(torch.int32).view(torch.float32).numpy()
        lo, hi = (float(fpsim.round(np.float32(x), form, mode)) for mode in ("down", "up"))
        lo, hi = (lo, hi) if x > 0 else (hi, lo)  # (toward zero, away from zero)
        if lo == hi:  # a value of the format stays itself
            assert np.all(got == x)
            continue
        frac = (Fraction(float(x)) - Fraction(lo)) / (Fraction(hi) - Fraction(lo))
        ups = int(np.count_nonzero(got == hi))
        assert ups + int(np.count_nonzero(got == lo)) == 2**r
        assert ups == int(frac * 2**r), (x, frac)


def test_rng_bits_draws_are_reproducible_per_seed_and_r_bits_bias_toward_zero():
    x = torch.full((100_000,), 1 + 0.3 * 2.0**-10, dtype=torch.float64)  # f = 0.3 in fp16
    def draw(seed: int, r: int | None) -> torch.Tensor:
        return ft.round(x, "fp16", "stochastic", rng_bits=r,
                        generator=torch.Generator().manual_seed(seed))
    assert torch.equal(draw(5, 2), draw(5, 2)) and not torch.equal(draw(5, 2), draw(6, 2))
    # r = 2: P(up) = floor(0.3 * 4) / 4 = 1/4; the full draw: 0.3 (5 standard errors apart)
    ups = ((draw(5, 2) > 1.0).double().mean().item(), (draw(5, None) > 1.0).double().mean().item())
    bound = 5 * 0.5 / math.sqrt(len(x))
    assert abs(ups[0] - 0.25) < bound and abs(ups[1] - 0.3) < bound


def test_rng_bits_on_an_exponent_only_format_follow_the_same_law():
    x = torch.full((100_000,), 1.3, dtype=torch.float64)  # e8m0: between 1 and 2, f = 0.3
    got = ft.round(x, "e8m0fnu", "stochastic", rng_bits=1,
                   generator=torch.Generator().manual_seed(2))
    assert set(got.unique().tolist()) == {1.0}  # floor(0.3 * 2) / 2 = 0: never up
    got = ft.round(x, "e8m0fnu", "stochastic", rng_bits=3,
                   generator=torch.Generator().manual_seed(2))
    assert abs((got == 2.0).double().mean().item() - 0.25) < 5 * 0.5 / math.sqrt(len(x))


def test_rng_bits_is_checked_as_fpsim_checks_it():
    t = torch.ones(3)
    with pytest.raises(ValueError, match="rng_bits must be None"):
        ft.round(t, "fp16", "stochastic", rng_bits=0)
    with pytest.raises(ValueError, match="applies to mode='stochastic' only"):
        ft.round(t, "fp16", rng_bits=4)


# --- the contract's edges ---------------------------------------------------------------------
def test_round_keeps_device_and_dtype_and_shape():
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        t = torch.linspace(-3, 3, 24, device=DEVICE).to(dtype).reshape(2, 3, 4)
        r = ft.round(t, "e4m3fn", "toward_zero")
        assert (r.dtype, r.shape, r.device) == (dtype, t.shape, t.device)


def test_round_works_on_non_contiguous_views():
    t = torch.linspace(-500, 500, 64, device=DEVICE).reshape(8, 8).t()
    want = fpsim.round(t.cpu().numpy().copy(), "e5m2", "up")
    np.testing.assert_array_equal(ft.round(t, "e5m2", "up").cpu().numpy(), want)


@pytest.mark.parametrize("bad,error,text", [
    ([1.0], TypeError, "must be a torch.Tensor"),
    ("int", TypeError, "float16, bfloat16, float32 or float64"),
])
def test_bad_input_names_the_argument(bad, error, text):
    t = torch.ones(3, dtype=torch.int32) if bad == "int" else bad
    with pytest.raises(error, match=text):
        ft.round(t, "fp16")


def test_bad_names_and_options_raise_fpsims_errors():
    t = torch.ones(3)
    with pytest.raises(ValueError, match="rounding mode"):
        ft.round(t, "fp16", "nearest")
    with pytest.raises(ValueError, match="format"):
        ft.round(t, "fp17")
    with pytest.raises(ValueError, match="overflow='inf' needs a format with inf"):
        ft.round(t, "e4m3fn", overflow="inf")
    with pytest.raises(TypeError, match="generator"):
        ft.round(t, "fp16", "stochastic", generator=3)


@pytest.mark.skipif(os.environ.get("FPSIM_TORCH_COMPILE") != "1",
                    reason="compiles with Inductor (tens of seconds): set FPSIM_TORCH_COMPILE=1")
@pytest.mark.parametrize("fmt,mode", [("e4m3fn", "toward_zero"), ("fp16", "odd"),
                                      ("e2m1fn", "nearest_even")])
def test_round_under_torch_compile_equals_fpsim_round(fmt, mode):
    x = np.random.default_rng(2).standard_normal(4096).astype(np.float32) * 100
    compiled = torch.compile(lambda t: ft.round(t, fmt, mode))
    assert_same_bits(compiled(as_tensor(x)), fpsim.round(x, fmt, mode))
