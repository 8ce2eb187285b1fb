"""``Tensor.dtype`` names the emulated format (nn.engine.dtypes.DType); the carrier stays
reachable."""

from __future__ import annotations

import pickle

import ml_dtypes
import numpy as np
import pytest

import fpsim
import nn
from nn.engine.dtypes import DType


@pytest.mark.parametrize("fmt, names", [
    (fpsim.FP16, ("float16", "fp16", "half")),
    (fpsim.BF16, ("bfloat16", "bf16")),
    (fpsim.FP32, ("float32", "fp32")),
    (fpsim.E4M3FN, ("float8_e4m3fn", "e4m3fn")),
])
def test_dtype_equals_its_format_every_name_of_it_and_its_numpy_dtype(fmt, names):
    d = nn.Tensor([1.0], fmt=fmt).dtype
    assert d.name == str(d) == fmt.name
    assert d == fmt and fmt == d
    for name in names:
        assert d == name and not d != name
    numpy_dtype = np.dtype(getattr(ml_dtypes, fmt.name, None) or fmt.name)
    assert d == numpy_dtype and numpy_dtype == d


def test_dtype_differs_from_other_formats_and_from_non_formats():
    d = DType.of("float16")
    for other in ("float32", "bfloat16", fpsim.FP32, np.float32, DType.of("bf16"),
                  "int32", "no such format", None, 16, object()):
        assert d != other and not d == other


def test_float64_carrier_dtype_is_float64():
    d = DType.of(None)
    assert d.name == "float64" and d == "float64" and d == np.float64 and d.format is None
    assert d.carrier == np.float64 and d.bits == 64
    assert d != None  # noqa: E711 (np.dtype(None) would be float64: None names no dtype here)


def test_dtype_is_cached_immutable_hashable_and_pickles_to_the_same_object():
    d = DType.of(fpsim.FP16)
    assert DType.of("half") is d and hash(d) == hash("float16")
    assert {d: 1}["float16"] == 1
    assert pickle.loads(pickle.dumps(d)) is d
    assert repr(d) == "DType('float16')"
    with pytest.raises(AttributeError, match="immutable"):
        d.name = "float32"  # type: ignore[misc]


def test_unknown_dtype_name_raises_naming_the_argument():
    with pytest.raises(ValueError, match="dtype='float12'"):
        DType.of("float12")


def test_numpy_cannot_allocate_from_an_emulated_dtype():
    with pytest.raises(TypeError):
        np.zeros(2, dtype=nn.Tensor([1.0], fmt="fp16").dtype)


def test_carrier_dtype_is_the_data_arrays_dtype():
    t = nn.Tensor([1.0], fmt="fp16")
    assert t.carrier_dtype == t.data.dtype == np.float32
    assert t.dtype.carrier == np.float32 and t.dtype.bits == 16 and t.dtype.is_floating


def test_op_outputs_report_the_compute_format_of_their_layer():
    with nn.policy_scope("mixed_float16"):
        layer = nn.Dense(3)
    out = layer(np.ones((2, 4), np.float32))
    assert out.dtype == "float16" and out.dtype.name == "float16"


@pytest.mark.parametrize("policy, variable, compute", [
    ("mixed_float16", "float32", "float16"),
    ("mixed_bfloat16", "float32", "bfloat16"),
    ("float16", "float16", "float16"),
    ("float32", "float32", "float32"),
])
def test_variables_report_the_variable_format_as_keras_does(policy, variable, compute):
    with nn.policy_scope(policy):
        layer = nn.Dense(2)
    out = layer(np.ones((1, 3), np.float32))
    assert all(w.dtype == variable for w in layer.weights)
    assert out.dtype == compute


# ---- float() and np.asarray ------------------------------------------------------------------

def test_float_of_a_one_element_tensor_is_its_value():
    assert float(nn.Tensor(2.5)) == 2.5
    assert float(nn.Tensor([[1e-8]], fmt="fp16")) == float(np.float16(1e-8))
    assert f"{nn.Tensor(0.125):.2f}" == "0.12"


def test_float_of_a_tensor_with_several_elements_raises_like_numpy_and_torch():
    with pytest.raises(ValueError, match=r"one-element tensors.*shape \(2,\)"):
        float(nn.Tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="one-element"):
        nn.Tensor([1.0, 2.0]).item()


def test_asarray_gives_the_values_in_the_carrier_and_copies_only_when_asked():
    t = nn.Tensor([1.0, 70000.0], fmt="fp16")
    a = np.asarray(t)
    assert a.dtype == np.float32 and np.array_equal(a, [1.0, np.inf])
    assert a is t.data
    assert np.array(t) is not t.data and np.array_equal(np.array(t), a)
    assert np.asarray(t, dtype=np.float64).dtype == np.float64


def test_asarray_refuses_a_converting_no_copy_request():
    with pytest.raises(ValueError, match="needs a copy"):
        np.asarray(nn.Tensor([1.0]), dtype=np.float64, copy=False)
