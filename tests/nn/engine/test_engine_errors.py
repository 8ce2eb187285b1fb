"""Bad input to Tensor, the ops and casts fails with a message naming the argument, the bad
value and what is allowed (the closest names for a misspelt format or policy)."""

from __future__ import annotations

import numpy as np
import pytest

import nn
from nn import functions as F


def test_an_unknown_tensor_format_names_fmt_and_suggests_the_closest_name():
    with pytest.raises(ValueError, match=r"fmt='fp17' is not a format \(did you mean 'fp16'\?\)"
                       r".*float16"):
        nn.Tensor([1.0], fmt="fp17")


def test_a_format_of_the_wrong_type_names_fmt_and_the_value():
    with pytest.raises(ValueError, match=r"fmt=3 is not a format; pass a Format or one of: .*bf16"):
        nn.Tensor([1.0], fmt=3)


def test_an_unknown_cast_format_names_cast_and_suggests_names():
    with pytest.raises(ValueError, match=r"cast: fmt='e4m3fm' is not a format \(did you mean "
                       r"'e4m3fn'"):
        nn.Tensor([1.0]).cast("e4m3fm")


def test_an_unknown_policy_suggests_the_closest_policy_names_once_each():
    with pytest.raises(ValueError, match=r"unknown policy 'mixed_float61' \(did you mean "
                       r"'mixed_float16' or 'mixed_bfloat16'") as err:
        nn.Policy("mixed_float61")
    assert str(err.value).count("'mixed_float16' or 'mixed_float16'") == 0


def test_a_tensor_of_strings_names_data_its_dtype_and_the_allowed_kinds():
    with pytest.raises(TypeError, match=r"data must be real numbers \(float, int or bool\), got "
                       r"an array of dtype <U3: 'abc'"):
        nn.Tensor("abc")


def test_a_string_operand_names_the_operand():
    with pytest.raises(TypeError, match="operand must be real numbers.*dtype <U1"):
        nn.Tensor([1.0]) + "x"


def test_requires_grad_takes_booleans_only():
    with pytest.raises(TypeError, match="requires_grad must be True or False, got 'no'"):
        nn.Tensor([1.0], requires_grad="no")
    assert nn.Tensor([1.0], requires_grad=np.bool_(True)).requires_grad is True


def test_a_matmul_shape_mismatch_names_both_shapes():
    a, b = nn.Tensor(np.ones((2, 3))), nn.Tensor(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"shapes \(2, 3\) and \(2, 3\) are not aligned"):
        a @ b


def test_a_bad_reshape_names_both_shapes_with_and_without_a_graph():
    for t in (nn.Tensor(np.ones(3)), nn.Tensor(np.ones(3), requires_grad=True)):
        with pytest.raises(ValueError, match=r"reshape a tensor of shape \(3,\) into \(4,\)"):
            t.reshape(4)


def test_a_string_exponent_is_refused_naming_its_type():
    with pytest.raises(TypeError, match="pow: exponent must be a real number.*'2' of type str"):
        nn.Tensor([1.0]) ** "2"


def test_leaky_relu_refuses_a_nan_slope():
    with pytest.raises(ValueError, match="leaky_relu: alpha must be a finite real number, got nan"):
        F.leaky_relu(nn.Tensor([1.0]), float("nan"))


def test_clip_refuses_bounds_in_the_wrong_order_naming_both():
    with pytest.raises(ValueError, match=r"clip: lo must be <= hi, got lo=2, hi=1"):
        F.clip(nn.Tensor([1.0]), 2, 1)


def test_a_non_numeric_backward_gradient_names_its_dtype():
    t = nn.Tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError,
                       match=r"backward\(gradient=...\) must be real numbers, got dtype"):
        (t * t).backward(np.array(["a", "b"]))
