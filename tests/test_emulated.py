"""EmulatedArray: arithmetic rounded once to the format, promotion, numpy interop.

Oracles: numpy float16 and ml_dtypes arithmetic (they compute in float32 and round once, which
is correctly rounded for + - * / sqrt at <= 11-bit precision: 24 >= 2p + 2); exact rationals.
"""

from __future__ import annotations

import math
import operator

import ml_dtypes
import numpy as np
import pytest
from helpers import all_same as same
from hypothesis import given
from hypothesis import strategies as st
from strategies import representable

import fpsim
from fpsim.emulated import EmulatedArray

ML_DTYPE = {
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
}
OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def sample_codes(dtype: type, n: int, seed: int) -> np.ndarray:
    """n random codes of a 16-bit or 8-bit ml_dtype (every class: zeros, subnormals, inf, NaN)."""
    itemsize = np.dtype(dtype).itemsize
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 2 ** (8 * itemsize), n).astype(np.uint16 if itemsize == 2 else np.uint8)
    return codes.view(dtype)


@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", list(OPS))
def test_binary_ops_equal_reference_arithmetic_on_every_pair_of_a_sample(fmt: str, op: str):
    ref = sample_codes(ML_DTYPE[fmt], 300, seed=len(fmt) + len(op))
    x, y = ref[:, None], ref[None, :]
    with np.errstate(all="ignore"):
        expected = OPS[op](x, y)
    got = OPS[op](fpsim.array(x.astype(np.float32), fmt), fpsim.array(y.astype(np.float32), fmt))
    assert got.format is fpsim.get_format(fmt)
    assert same(got.numpy(), expected.astype(np.float32))


@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("op", list(OPS))
def test_binary_ops_equal_ml_dtypes_on_every_pair_of_fp8_codes(fmt: str, op: str):
    codes = np.arange(256, dtype=np.uint8).view(ML_DTYPE[fmt])
    x, y = codes[:, None], codes[None, :]
    with np.errstate(all="ignore"):
        expected = OPS[op](x, y)
    got = OPS[op](fpsim.array(x.astype(np.float32), fmt), fpsim.array(y.astype(np.float32), fmt))
    assert same(got.numpy(), expected.astype(np.float32))


@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
@given(data=st.data(), op=st.sampled_from(list(OPS)))
def test_binary_ops_equal_reference_arithmetic_on_drawn_values(fmt: str, data, op: str):
    f = fpsim.get_format(fmt)
    a = data.draw(representable(f, specials=True))
    b = data.draw(representable(f, specials=True))
    with np.errstate(all="ignore"):
        expected = OPS[op](ML_DTYPE[fmt](a), ML_DTYPE[fmt](b))
    got = OPS[op](fpsim.array(a, fmt), fpsim.array(b, fmt))
    assert same(got.numpy(), np.float32(expected))


def test_seed_demo_256_squared_overflows_fp16_to_inf():
    assert fpsim.array(256, "fp16") ** 2 == np.inf
    assert repr(fpsim.array([256], "fp16") ** 2) == "EmulatedArray([inf], format=float16)"


def test_seed_demo_1e_5_squared_underflows_fp16_to_zero():
    r = fpsim.array(1e-5, "fp16") ** 2
    assert float(r) == 0.0 and r.format is fpsim.FP16


@given(x=representable(fpsim.FP16))
def test_power_minus_one_is_the_correctly_rounded_reciprocal(x: float):
    with np.errstate(all="ignore"):
        expected = np.float16(1) / np.float16(x)  # float32 division rounded once
    assert same((fpsim.array(x, "fp16") ** -1).numpy(), np.float32(expected))


@given(x=representable(fpsim.BF16))
def test_power_one_half_is_the_correctly_rounded_square_root(x: float):
    with np.errstate(all="ignore"):
        expected = np.sqrt(ml_dtypes.bfloat16(x))
    got = fpsim.array(x, "bf16") ** 0.5
    assert same(got.numpy(), np.float32(expected))
    assert same(np.sqrt(fpsim.array(x, "bf16")).numpy(), np.float32(expected))


def test_power_with_non_integer_exponent_is_float64_pow_rounded_once():
    x = np.array([2.0, 3.0, 0.5, 10.0, -2.0])
    got = fpsim.array(x, "fp16") ** 1.5
    with np.errstate(invalid="ignore"):
        expected = [fpsim.round_scalar(math.pow(v, 1.5) if v > 0 else math.nan, "fp16")
                    for v in x]
    assert same(got.numpy(), np.array(expected))


def test_python_scalars_and_plain_arrays_are_first_rounded_to_the_format():
    a = fpsim.array([1.0, 1000.0], "fp16")
    expected = np.float16([1.0, 1000.0]) + np.float16(1e-4)
    assert same((a + 1e-4).numpy(), expected)
    assert same((1e-4 + a).numpy(), expected)
    assert same((a + np.array([1e-4, 1e-4])).numpy(), expected)
    assert same((np.array([1e-4, 1e-4]) + a).numpy(), expected)
    # e2m1fn holds 2 and 3 but not 2.5: the operand 2.5 is cast to 2 (ties to even) first
    assert float(fpsim.array(1.0, "e2m1fn") * 2.5) == 2.0


def test_broadcasting_follows_numpy():
    a = fpsim.array(np.arange(3.0).reshape(3, 1), "bf16")
    b = fpsim.array(np.arange(4.0), "bf16")
    c = a * b
    assert c.shape == (3, 4)
    assert same(c.numpy(), np.arange(3.0).reshape(3, 1) * np.arange(4.0))


@pytest.mark.parametrize(
    ("f1", "f2", "expected"),
    [("fp16", "fp32", "float32"), ("e5m2", "fp16", "float16"), ("e4m3fn", "bf16", "bfloat16"),
     ("bf16", "tf32", "tf32"), ("fp16", "fp16", "float16")],
)
def test_promotion_picks_the_format_holding_the_other(f1: str, f2: str, expected: str):
    r = fpsim.array(1.5, f1) + fpsim.array(2.0, f2)
    r2 = fpsim.array(2.0, f2) + fpsim.array(1.5, f1)
    assert r.format.name == r2.format.name == expected


@pytest.mark.parametrize(("f1", "f2"), [("fp16", "bf16"), ("e4m3fn", "e5m2"), ("e4m3", "e4m3fn")])
def test_mixing_formats_where_neither_holds_the_other_raises_type_error(f1: str, f2: str):
    with pytest.raises(TypeError, match="astype"):
        fpsim.array(1.0, f1) + fpsim.array(1.0, f2)
    r = fpsim.array(1.0, f1).astype("fp32") + fpsim.array(1.0, f2)
    assert r.format is fpsim.FP32 and float(r) == 2.0


def _all_values(fmt: fpsim.Format) -> np.ndarray:
    """Every value of a <= 16-bit format, decoded from its fields (as the strategy does)."""
    m, top = fmt.mantissa_bits, fmt.max_exponent_field
    e, mm = np.meshgrid(np.arange(top + 1), np.arange(2**m), indexing="ij")
    v = np.where(e == 0, mm * 2.0 ** (fmt.emin - m), (2**m + mm) * 2.0 ** (e - fmt.bias - m))
    v = v[v <= fmt.max]
    specials = ([np.inf] if fmt.inf else []) + ([np.nan] if fmt.has_nan else [])
    return np.concatenate([v, -v if fmt.signed else v[:0], specials]).astype(np.float32)


SMALL = [f for f in fpsim.CATALOG if f.bits <= 16 and f.subnormals]


@pytest.mark.parametrize("b", SMALL, ids=lambda f: f.name)
def test_contains_is_true_exactly_when_every_value_survives_the_cast(b: fpsim.Format):
    values = _all_values(b)
    for a in fpsim.CATALOG:
        r = fpsim.round(values, a)
        survives = bool(np.all((r == values) | (np.isnan(r) & np.isnan(values))))  # -0 == 0
        assert a.contains(b) == survives, (a.name, b.name)


@pytest.mark.parametrize(
    ("ufunc", "ref"),
    [(np.exp, np.exp), (np.log, np.log), (np.sqrt, np.sqrt), (np.tanh, np.tanh),
     (np.abs, np.abs), (np.negative, np.negative), (np.floor, np.floor)],
)
def test_unary_ufuncs_are_float64_results_rounded_once(ufunc, ref):
    x = sample_codes(np.float16, 2000, seed=7).astype(np.float64)
    with np.errstate(all="ignore"):
        expected = ref(x).astype(np.float16)  # numpy's float64 -> float16 cast rounds once
        got = ufunc(fpsim.array(x, "fp16"))
    assert isinstance(got, EmulatedArray) and got.format is fpsim.FP16
    assert same(got.numpy(), expected)


def test_binary_ufuncs_and_comparisons():
    a = fpsim.array([1.0, -2.0, np.nan, 3.0], "fp16")
    b = fpsim.array([2.0, -3.0, 1.0, 3.0], "fp16")
    assert same(np.maximum(a, b).numpy(), np.maximum(a.numpy(), b.numpy()))
    assert same(np.minimum(a, 0.5).numpy(), np.float32([0.5, -2.0, np.nan, 0.5]))
    lt = a < b
    assert isinstance(lt, np.ndarray) and lt.dtype == bool
    assert lt.tolist() == [True, False, False, False]
    assert (a == b).tolist() == [False, False, False, True]
    assert np.isnan(a).tolist() == [False, False, True, False]
    assert same(abs(-a).numpy(), np.abs(a.numpy()))


def test_ldexp_takes_an_integer_exponent_as_is():
    r = np.ldexp(fpsim.array([1.5, 1.5], "e4m3fn"), np.array([5, 9]))
    assert same(r.numpy(), np.float32([48.0, np.nan]))  # 768 overflows e4m3fn (max 448) to NaN


def test_indexing_slicing_and_conversions_keep_the_format():
    a = fpsim.array(np.arange(12.0).reshape(3, 4) * 0.1, "bf16")
    assert a.shape == (3, 4) and a.ndim == 2 and a.size == 12 and len(a) == 3
    row = a[1]
    assert isinstance(row, EmulatedArray) and row.format is fpsim.BF16 and row.shape == (4,)
    assert isinstance(a[1, 2], EmulatedArray) and a[1, 2].ndim == 0
    assert a[:, ::2].shape == (3, 2)
    assert a.T.shape == (4, 3) and a.reshape(12).shape == (12,)
    expected = np.arange(12.0).reshape(3, 4) * 0.1
    assert same(a.numpy(), expected.astype(ml_dtypes.bfloat16))
    assert a.numpy().dtype == np.float32 and np.asarray(a).dtype == np.float32
    assert [r.shape for r in a] == [(4,)] * 3
    assert "format=bfloat16" in repr(a)


def test_setitem_rounds_the_value_to_the_format():
    a = fpsim.array(np.zeros(3), "fp16")
    a[1] = 70000.0
    a[2] = 0.1
    assert same(a.numpy(), np.float16([0.0, np.inf, 0.1]))


def test_astype_rounds_once_to_the_new_format():
    a = fpsim.array([1.0 + 2.0**-10, 3.0], "fp16")
    b = a.astype("e4m3fn")
    assert b.format is fpsim.E4M3FN
    assert same(b.numpy(), np.float32(a.numpy().astype(ml_dtypes.float8_e4m3fn)))


def test_float64_data_is_rounded_from_its_own_bits():
    x = 1 + 2.0**-8 + 2.0**-40  # just above a bf16 midpoint: goes up (not to 1.0 via float32)
    assert float(fpsim.array(x, "bf16")) == 1.0078125


def test_bad_input_raises_clear_errors():
    with pytest.raises(TypeError, match="numeric"):
        fpsim.array(["a", "b"], "fp16")
    with pytest.raises(ValueError, match="unknown format"):
        fpsim.array(1.0, "fp17")
    with pytest.raises(TypeError, match="reduce"):
        np.add.reduce(fpsim.array([1.0], "fp16"))
