"""The checker of exercise 14, LayerNorm statistics in fp16
(tutorials/exercises/checks_transformer.py): an fp16 answer written from the exercise text
passes, the naive fp16 layer norm and each deliberate mistake fail on a named input with
expected vs got and the hint for that mistake, and a raising or malformed answer is reported,
not raised. The notebooks themselves run in test_exercises.py.
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

EXERCISES = pathlib.Path(__file__).resolve().parent.parent / "tutorials" / "exercises"
sys.path.insert(0, str(EXERCISES))

import checks  # noqa: E402
import checks_transformer as ct  # noqa: E402

import fpsim  # noqa: E402


def r16(x):
    return fpsim.round(np.asarray(x, np.float64), "float16")


def scaled(x, epsilon=1e-3, scale_epsilon=True, guard=True):
    """The exercise's recipe in fp16: scale each row by 2^-k so |entries| <= 1, then every step
    rounded with r16 (scale_epsilon / guard off: two of the mistakes)."""
    top = np.abs(x).max(axis=-1, keepdims=True)
    k = np.maximum(0, np.ceil(np.log2(np.where(top > 0, top, 1))))
    s = 2.0**-k
    y = r16(x * s)
    n = x.shape[-1]
    mean = r16(np.sum(y, axis=-1, keepdims=True) / n)
    d = r16(y - mean)
    var = r16(np.sum(r16(d * d), axis=-1, keepdims=True) / n)
    eps = r16(epsilon * s * s) if scale_epsilon else epsilon
    root = r16(np.sqrt(r16(var + eps)))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = r16(d / root)
    return np.where(root > 0, out, 0.0) if guard else out


def naive(x, epsilon=1e-3):
    """What LayerNormalization(dtype="float16") does: every step in fp16, no scaling."""
    n = x.shape[-1]
    mean = r16(np.sum(x, axis=-1, keepdims=True) / n)
    d = r16(x - mean)
    with np.errstate(over="ignore"):
        var = r16(np.sum(r16(d * d), axis=-1, keepdims=True) / n)
    return r16(d / r16(np.sqrt(r16(var + epsilon))))


def _fails_with(answer, capsys, *phrases):
    assert ct.check_layer_norm_fp16(answer) is False
    out = capsys.readouterr().out
    assert out.startswith(f"{checks.FAIL} check_layer_norm_fp16:")
    for phrase in phrases:
        assert phrase in out, out
    return out


def test_reference_is_the_layer_norm_formula_by_hand():
    x = np.float64([[1.0, 2.0, 3.0, 6.0]])  # mean 3, deviations -2 -1 0 3, variance 14/4
    want = np.float64([-2, -1, 0, 3]) / np.sqrt(3.5 + 1e-3)
    np.testing.assert_allclose(ct.layer_norm_reference(x)[0], want, rtol=1e-12)


def test_reference_agrees_with_nn_layer_normalization_in_float64():
    import nn

    x = ct.layer_norm_cases()[2][1]
    with nn.policy_scope("float64"):
        layer = nn.layers.LayerNormalization(epsilon=ct.EPSILON)
        got = layer(nn.Tensor(x)).data
    np.testing.assert_allclose(ct.layer_norm_reference(x), got, rtol=1e-9, atol=1e-12)


def test_every_case_is_made_of_fp16_values():
    for _, x in ct.layer_norm_cases():
        np.testing.assert_array_equal(r16(x), x)


def test_scaled_fp16_answer_written_from_the_exercise_text_passes(capsys):
    assert ct.check_layer_norm_fp16(scaled) is True
    assert capsys.readouterr().out.startswith(f"{checks.PASS} check_layer_norm_fp16:")


def test_naive_fp16_layer_norm_fails_on_the_outlier_row_with_the_overflow_hint(capsys):
    _fails_with(naive, capsys, "one outlier of 300", "overflowed", "2^-k")


def test_a_float64_layer_norm_without_epsilon_gets_the_epsilon_hint(capsys):
    def no_epsilon(x):
        return scaled(x, epsilon=0.0)

    _fails_with(no_epsilon, capsys, "N(0, 0.01^2)", "add epsilon")


def test_epsilon_not_scaled_with_the_variance_is_named(capsys):
    _fails_with(lambda x: scaled(x, scale_epsilon=False), capsys, "epsilon about",
                "scaled by 4^-k too")


def test_zero_over_zero_on_the_constant_row_is_named(capsys):
    _fails_with(lambda x: scaled(x, guard=False), capsys, "constant row", "0 / 0")


def test_silent_zeros_get_the_notebook_09_hint(capsys):
    def zeros_where_big(x):
        out = scaled(x)
        out[np.abs(x).max(axis=-1) > 250] = 0.0
        return out

    _fails_with(zeros_where_big, capsys, "outlier of 300", "all zeros", "1 / sqrt(inf) = 0")


@pytest.mark.parametrize("answer, phrase", [
    (lambda x: 1 / 0, "ZeroDivisionError"),
    (lambda x: x[:, :1], "an array of shape"),
    (lambda x: "no", "not an array"),
])
def test_a_raising_or_malformed_answer_is_reported_not_raised(answer, phrase, capsys):
    _fails_with(answer, capsys, phrase)


@pytest.mark.parametrize("name", list(ct.all_checks()))
def test_every_listed_check_exists(name):
    assert callable(getattr(ct, name))


def test_module_docstring_example_gives_the_verdict_it_shows():
    import doctest

    result = doctest.testmod(ct)
    assert result.attempted >= 1 and result.failed == 0
