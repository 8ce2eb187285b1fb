"""fpsim.mx against a reference written here from the OCP MX v1.0 spec and the NVFP4 recipe:
pure Python, one element at a time, exact (Fraction) arithmetic, element grids built from the
formats' fields (not from fpsim)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from helpers import all_same as same
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import float32_arrays

import fpsim
from fpsim import mx

# element formats from the spec: (exponent bits, mantissa bits, bias, max); E5M2 has inf/NaN
# in its top binade, E4M3 (OCP) only NaN at S.1111.111, the fp6/fp4 types have neither
SPEC = {
    "mxfp8_e4m3": (4, 3, 7, Fraction(448)), "mxfp8_e5m2": (5, 2, 15, Fraction(57344)),
    "mxfp6_e3m2": (3, 2, 3, Fraction(28)), "mxfp6_e2m3": (2, 3, 1, Fraction(15, 2)),
    "mxfp4_e2m1": (2, 1, 1, Fraction(6)), "nvfp4": (2, 1, 1, Fraction(6)),
}
MX_NAMES = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1", "mxint8"]


def grid(name: str) -> list[Fraction]:
    """Non-negative element values, ascending; index parity is the code's last bit."""
    if name == "mxint8":
        return [Fraction(k, 64) for k in range(128)]
    e_bits, m_bits, bias, top = SPEC[name]
    vals = [Fraction(m, 2**m_bits) * Fraction(2) ** (1 - bias) for m in range(2**m_bits)]
    for e in range(1, 2**e_bits):
        vals += [Fraction(2**m_bits + m, 2**m_bits) * Fraction(2) ** (e - bias)
                 for m in range(2**m_bits)]
    return [v for v in vals if v <= top]


E4M3_GRID = grid("mxfp8_e4m3")


def rne_saturate(v: Fraction, g: list[Fraction]) -> Fraction:
    """v rounded to nearest even on the grid g (both signs), clamped to +-max."""
    a = abs(v)
    if a >= g[-1]:
        r = g[-1]
    else:
        i = max(j for j in range(len(g)) if g[j] <= a)
        lo, hi = g[i], g[i + 1]
        r = hi if (a - lo > hi - a or (a - lo == hi - a and i % 2 == 1)) else lo
    return -r if v < 0 else r


def emax(name: str) -> int:
    return math.floor(math.log2(grid(name)[-1]))


def floor_log2(v: Fraction) -> int:
    e = v.numerator.bit_length() - v.denominator.bit_length()
    return e if Fraction(2) ** e <= v else e - 1


def ref_mx_block(xs: list[float], name: str, rule: str) -> tuple[int | None, list[float]]:
    """(shared exponent or None for a NaN block, dequantized values) of one block."""
    if any(not math.isfinite(x) for x in xs):
        return None, [math.nan] * len(xs)
    g = grid(name)
    amax = max(abs(Fraction(x)) for x in xs)
    if amax == 0:
        e = -127
    else:
        e = floor_log2(amax) - emax(name)
        if rule == "ceil" and amax > g[-1] * Fraction(2) ** e:
            e += 1
        if rule == "even":  # amax rounded to nearest even at the element's precision
            m_bits = 6 if name == "mxint8" else SPEC[name][1]
            q = Fraction(2) ** (floor_log2(amax) - m_bits)
            k, f = divmod(amax / q, 1)
            k += f > Fraction(1, 2) or (f == Fraction(1, 2) and k % 2 == 1)
            e = floor_log2(k * q) - emax(name)
        e = min(max(e, -127), 127)
    out = [float(rne_saturate(Fraction(x) / Fraction(2) ** e, g) * Fraction(2) ** e) for x in xs]
    return e, [math.copysign(o, x) if o == 0 and name != "mxint8" else o
               for o, x in zip(out, xs, strict=True)]


def ref_quantize(x: np.ndarray, name: str, rule: str = "floor") -> np.ndarray:
    """Row by row along the last axis, blocks of 32 (the last one partial)."""
    out = np.empty(x.shape, np.float64)
    for r in np.ndindex(x.shape[:-1]):
        row = [float(v) for v in x[r]]
        for lo in range(0, len(row), 32):
            out[r][lo:lo + 32] = ref_mx_block(row[lo:lo + 32], name, rule)[1]
    return out


def ref_nvfp4(x: np.ndarray) -> np.ndarray:
    """1-D NVFP4: fp32 tensor scale amax / (6 * 448), E4M3 block scales (RNE), E2M1 elements."""
    finite = [abs(float(v)) for v in x if math.isfinite(v)]
    amax = max(finite, default=0.0)
    ts = Fraction(float(np.float32(amax) / np.float32(2688.0))) if amax > 0 else Fraction(1)
    out = []
    for lo in range(0, len(x), 16):
        xs = [float(v) for v in x[lo:lo + 16]]
        if any(not math.isfinite(v) for v in xs):
            out += [math.nan] * len(xs)
            continue
        s = rne_saturate(max(abs(Fraction(v)) for v in xs) / (6 * ts), E4M3_GRID)
        for v in xs:
            q = rne_saturate(Fraction(v) / (s * ts), grid("nvfp4")) if s else Fraction(0)
            out.append(float(np.float32(float(q * s * ts))) if q else math.copysign(0.0, v))
    return np.array(out)


def sample(seed: int, shape=(3, 75)) -> np.ndarray:
    """Magnitudes over many binades; in the default (3, 75) shape also a zero, a block far
    below the others and an all-zero partial last block (75 = 2 * 32 + 11)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 2.0 ** rng.integers(-20, 20, shape)
    if shape == (3, 75):
        x[0, 5] = 0.0
        x[1, :32] *= 1e-6
        x[2, 64:] = 0.0
    return x.astype(np.float32)


@pytest.mark.parametrize("rule", ["floor", "ceil", "even"])
@pytest.mark.parametrize("name", MX_NAMES)
def test_mx_quantize_equals_the_spec_reference_with_partial_and_zero_blocks(name, rule):
    x = sample(1)
    want = ref_quantize(x, name, rule)
    assert same(mx.quantize(x, name, scale_rounding=rule), want)  # float32 kernel
    assert same(mx.quantize(x.astype(np.float64), name, scale_rounding=rule), want)  # numpy


@pytest.mark.parametrize("name", MX_NAMES)
def test_a_nan_or_inf_makes_the_whole_block_nan_and_its_scale_code_0xff(name):
    x = sample(2)
    x[0, 3], x[1, 40] = np.nan, -np.inf
    q = mx.quantize(x, name)
    assert np.isnan(q[0, :32]).all() and np.isnan(q[1, 32:64]).all()
    assert not np.isnan(q[0, 32:]).any() and not np.isnan(q[1, :32]).any()
    scales, _ = mx.encode(x, name)
    assert scales.shape == (3, 3) and scales[0, 0] == scales[1, 1] == 0xFF
    assert same(mx.quantize(x, name), ref_quantize(x, name))


def test_all_zero_block_gets_the_smallest_scale_and_decodes_to_signed_zero():
    x = np.float32([[0.0, -0.0, 0.0]])
    scales, codes = mx.encode(x, "mxfp8_e4m3")
    assert scales.tolist() == [[0]] and codes.tolist() == [[0, 0x80, 0]]
    assert same(mx.quantize(x, "mxfp8_e4m3"), x)


def test_floor_clips_the_spec_example_500_to_448_and_ceil_never_clips():
    x = np.float32([500.0, 1.0])
    assert mx.quantize(x, "mxfp8_e4m3").tolist() == [448.0, 1.0]
    # ceil: scale 2, 500 / 2 = 250 rounds to 256 inside E4M3's range: no clipping
    assert mx.quantize(x, "mxfp8_e4m3", scale_rounding="ceil").tolist() == [512.0, 1.0]


def test_elements_saturate_in_every_mode_e5m2_gives_57344_not_inf():
    x = np.float32([61440.0 * 1.9, 1.0])  # amax 116736: floor scale 2^1, 58368 > 57344
    for mode in fpsim.MODE_NAMES:
        q = mx.quantize(x, "mxfp8_e5m2", mode=mode, rng=0)
        assert q[0] == 57344.0 * 2 and np.isfinite(q).all(), mode


@pytest.mark.parametrize("name", [*MX_NAMES, "nvfp4"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_decode_of_encode_equals_quantize_along_any_axis(name, axis):
    x = sample(3, (40, 37))
    scales, codes = mx.encode(x, name, axis=axis)
    assert same(mx.decode(scales, codes, name, axis=axis), mx.quantize(x, name, axis=axis))
    blocks = -(-x.shape[axis] // mx.BLOCK_FORMATS[name].block)
    shape = list(x.shape)
    shape[axis] = blocks
    assert (scales[0] if name == "nvfp4" else scales).shape == tuple(shape)


def test_quantize_along_axis_0_is_quantize_of_the_transpose():
    x = sample(4, (70, 5))
    assert same(mx.quantize(x, "mxfp6_e2m3", axis=0), mx.quantize(x.T, "mxfp6_e2m3").T)


def test_mxint8_code_c_means_int8_c_over_64():
    codes = np.arange(256, dtype=np.uint8).reshape(8, 32)
    scales = np.full((8, 1), 127, np.uint8)  # 2^0
    got = mx.decode(scales, codes, "mxint8")
    assert same(got, codes.view(np.int8) / 64)
    s, c = mx.encode(np.float32([-127 / 64, 1.0, -1 / 64, 1.5]), "mxint8")  # amax < 2: 2^0
    assert s.tolist() == [127] and c.view(np.int8).tolist() == [-127, 64, -1, 96]


def test_nvfp4_equals_the_two_level_reference_and_encodes_the_tensor_scale():
    x = sample(5, (1, 75))[0] * np.float32(3)
    x[20] = np.nan
    assert same(mx.quantize(x, "nvfp4"), ref_nvfp4(x))
    (block_codes, ts), codes = mx.encode(x, "nvfp4")
    finite = np.abs(x[np.isfinite(x)])
    assert ts == np.float32(finite.max()) / np.float32(6 * 448) and block_codes.shape == (5,)
    assert block_codes[1] == 0x7F  # the NaN block's E4M3 NaN scale


@settings(max_examples=60, deadline=None)
@given(x=float32_arrays(max_size=70), name=st.sampled_from([*MX_NAMES, "nvfp4"]))
def test_hypothesis_quantize_is_the_reference_and_decode_inverts_encode(x, name):
    want = ref_nvfp4(x) if name == "nvfp4" else ref_quantize(x.reshape(1, -1), name)[0]
    assert same(mx.quantize(x, name), want)
    assert same(mx.decode(*mx.encode(x, name), name), want)


@pytest.mark.parametrize("mode", ["toward_zero", "up", "down", "nearest_away", "odd"])
def test_every_element_rounding_mode_picks_a_neighbour_in_the_element_format(mode):
    x = sample(6, (2, 64))
    q = mx.quantize(x, "mxfp4_e2m1", mode=mode)
    e = np.repeat(np.frexp(np.abs(x).reshape(2, 2, 32).max(-1))[1] - 1 - 2, 32, axis=-1)
    scaled = x.astype(np.float64) / np.ldexp(1.0, e)
    want = np.clip(fpsim.round(scaled, "e2m1fn", mode), -6, 6) * np.ldexp(1.0, e)
    assert same(q, want)


def test_stochastic_elements_are_reproducible_and_unbiased_on_average():
    x = np.full((1, 32 * 400), 1.25, np.float32)
    x[0, ::32] = 6.0  # each block's amax 6: scale 2^0, 1.25 lies between 1 and 1.5
    a = mx.quantize(x, "mxfp4_e2m1", mode="stochastic", rng=7)
    assert same(a, mx.quantize(x, "mxfp4_e2m1", mode="stochastic", rng=7))
    rest = np.delete(a[0], np.s_[::32])
    assert set(np.unique(rest)) == {1.0, 1.5} and abs(rest.mean() - 1.25) < 0.02


def test_monitor_counts_saturated_flushed_and_clipped_blocks_on_both_paths():
    x = np.float32([[500.0, 1.0, 1e-4, -470.0] + [0.0] * 28])
    for arr in (x, x.astype(np.float64)):
        with fpsim.monitor() as m:
            mx.quantize(arr, "mxfp8_e4m3", site="w")
        assert m.blocks["w"] == {"blocks": 1, "elements": 32, "saturated": 2, "flushed": 1,
                                 "clipped_blocks": 1}


def test_explain_names_amax_scale_and_which_elements_saturated_or_flushed():
    text = mx.explain(np.float32([500.0, 1.0, 1e-4]), "mxfp8_e4m3")
    assert "amax 500" in text and "scale 2^0" in text
    assert "saturated to +-448" in text and "flushed to zero" in text
    assert "NaN scale" in mx.explain(np.float32([np.inf, 1.0]), "mxfp4_e2m1")
    assert "block scale" in mx.explain(np.float32([1.0, 2.0]), "nvfp4")


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [(lambda: mx.quantize([1.0], "mxfp9"), ValueError, "unknown block format 'mxfp9'"),
     (lambda: mx.quantize([1.0], "mxint8", scale_rounding="round"), ValueError,
      "scale_rounding must be one of"),
     (lambda: mx.quantize([1.0], "mxint8", axis=2), ValueError, "axis 2 is out of range"),
     (lambda: mx.decode(np.zeros(3, np.uint8), np.zeros(40, np.uint8), "mxint8"), ValueError,
      "scales must have the codes' shape"),
     (lambda: mx.decode(np.zeros(2, np.uint8), np.zeros(40, np.uint8), "nvfp4"), TypeError,
      "nvfp4 scales are a pair"),
     (lambda: mx.explain(np.zeros(33), "mxint8"), ValueError, "1..32 elements")],
)
def test_bad_arguments_raise_naming_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("name", MX_NAMES)
def test_mx_quantize_equals_gfloats_quantize_block_on_finite_blocks(name):
    gfloat = pytest.importorskip("gfloat")
    import gfloat.formats as gf

    fi = getattr(gf, f"format_info_{name}")
    x = sample(7, (6, 32))
    x[5] = 0.0  # an all-zero block: both take the smallest scale
    got = mx.quantize(x, name)
    for row, q in zip(x, got, strict=True):
        want = gfloat.quantize_block(fi, row.astype(np.float64), gfloat.compute_scale_amax)
        assert same(q + 0.0, want + 0.0), (name, row)  # gfloat's zeros carry no sign


def test_monitor_summary_lists_the_block_counts():
    with fpsim.monitor() as m:
        mx.quantize(np.float32([500.0, 1.0, 1e-4]), "mxfp8_e4m3", site="w")
    assert "w (mxfp8_e4m3): 1 blocks, 3 elements; saturated 1, flushed 1, clipped blocks 1" in (
        m.summary())


def _splitmix64_top56(seed: int, i: int) -> int:
    """The documented draw of element i (pure Python): the top 56 bits of splitmix64 of the
    counter seed + (i + 1) * golden."""
    mask = 2**64 - 1
    z = (seed + (i + 1) * 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return (z ^ (z >> 31)) >> 8


@pytest.mark.parametrize("rng_bits", [None, 1, 3, 8])
@pytest.mark.parametrize("axis", [-1, 0])
def test_stochastic_elements_follow_the_documented_draw_element_by_element(rng_bits, axis):
    """Against a pure-Python oracle of quantize's docstring: seed = the first draw of
    default_rng(rng) in [0, 2^63); element i (flat index, axis moved last) takes the top r bits
    v of splitmix64's top 56 and rounds away from zero iff v >= 2^r - floor(f * 2^r), f its
    fraction of the spacing (the full draw: the low 51 bits, as many as E2M1 drops from a
    float64); so exactly floor(f * 2^r) of the 2^r draws round up."""
    rng = np.random.default_rng(8)
    shape = (3, 64) if axis == -1 else (64, 3)
    mag = rng.uniform(1.0, 6.0, shape).astype(np.float32)  # E2M1's normal range, scale 2^0
    x = np.where(rng.random(shape) < 0.5, -mag, mag).astype(np.float32)
    rows = np.moveaxis(x, axis, -1)  # a view: writes reach x
    rows[:, ::32] = 6.0  # every block's amax 6: the scale is 2^0, q = x
    got = np.moveaxis(mx.quantize(x, "mxfp4_e2m1", axis=axis, mode="stochastic", rng=21,
                                  rng_bits=rng_bits), axis, -1).reshape(-1)
    seed = int(np.random.default_rng(21).integers(0, 2**63, dtype=np.int64))
    dropped = 51  # float64's 52 fraction bits less E2M1's 1
    r = dropped if rng_bits is None else rng_bits
    for i, xi in enumerate(np.ascontiguousarray(rows).reshape(-1)):
        a = Fraction(abs(float(xi)))
        spacing = Fraction(1, 2) if a < 2 else Fraction(1) if a < 4 else Fraction(2)
        lower = (a // spacing) * spacing
        f = (a - lower) / spacing
        u = _splitmix64_top56(seed, i)
        v = u % 2**dropped if rng_bits is None else u >> (56 - r)
        up = f != 0 and v >= 2**r - math.floor(f * 2**r)
        want = float(lower + spacing if up else lower) * (-1.0 if xi < 0 else 1.0)
        assert got[i] == want, (i, float(xi), float(got[i]), want)
