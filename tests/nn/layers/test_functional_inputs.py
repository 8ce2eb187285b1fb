"""What a functional model accepts as its inputs, and the errors for what it does not: each
names the argument and what is expected (Keras 3's rules where it has one)."""

from __future__ import annotations

import numpy as np
import pytest

import nn


def _one_input(list_inputs: bool):
    i = nn.Input(shape=(4,), name="a")
    dense = nn.Dense(2, name="d")
    return nn.Model(inputs=[i] if list_inputs else i, outputs=dense(i))


def _two_inputs():
    a, b = nn.Input(shape=(4,), name="a"), nn.Input(shape=(3,), name="b")
    return nn.Model(inputs=[a, b], outputs=nn.layers.Add()([nn.Dense(2)(a), nn.Dense(2)(b)]))


def test_the_same_input_listed_twice_is_refused_naming_it_and_both_positions():
    i = nn.Input(shape=(4,), name="a")
    with pytest.raises(ValueError, match=r"Model\(inputs=...\) lists the same input 'a' more "
                                         r"than once \(positions 0 and 1\)"):
        nn.Model(inputs=[i, i], outputs=nn.Dense(2)(i))


@pytest.mark.parametrize("list_inputs", [False, True])
def test_a_one_input_model_takes_an_array_or_a_one_element_list_alike(list_inputs):
    model = _one_input(list_inputs)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    expected = model(x).data
    np.testing.assert_array_equal(model([x]).data, expected)
    np.testing.assert_array_equal(model((x,)).data, expected)
    np.testing.assert_array_equal(model.predict([x], verbose=0), expected)
    np.testing.assert_array_equal(model([[float(v) for v in row] for row in x]).data,
                                  expected)  # a list of rows is data, not a list of inputs


def test_a_one_input_model_given_two_arrays_names_what_it_takes():
    x = np.ones((1, 4), np.float32)
    with pytest.raises(ValueError, match=r"takes one input 'a': pass one array \(or a "
                                         r"one-element list\); got a list of 2"):
        _one_input(False)([x, x])


@pytest.mark.parametrize("given, described", [
    (lambda x4, x3: x4, "one ndarray"),
    (lambda x4, x3: [x4], "a list of 1"),
    (lambda x4, x3: [x4, x3, x3], "a list of 3"),
])
def test_a_two_input_model_given_another_count_names_its_inputs(given, described):
    x4, x3 = np.ones((2, 4), np.float32), np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match=rf"takes 2 inputs \['a', 'b'\]: pass a list of 2 arrays "
                                         rf"in that order, or a dict .*; got {described}$"):
        _two_inputs()(given(x4, x3))


def test_an_input_of_the_wrong_shape_names_the_input_and_both_shapes():
    x4 = np.ones((2, 4), np.float32)
    with pytest.raises(ValueError, match=r"input 'b' expects shape \(None, 3\), got \(2, 4\)"):
        _two_inputs()([x4, x4])
    with pytest.raises(ValueError, match=r"input 'a' expects shape \(None, 4\), got \(2, 5\)"):
        _one_input(True)(np.ones((2, 5), np.float32))


def test_a_dict_feeds_inputs_by_name_and_names_the_missing_one():
    model = _two_inputs()
    x4, x3 = np.ones((2, 4), np.float32), np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(model({"b": x3, "a": x4}).data, model([x4, x3]).data)
    with pytest.raises(ValueError, match=r"the dict lacks \['b'\]"):
        model({"a": x4})
