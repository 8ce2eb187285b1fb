"""CrossEntropyLoss and MSELoss in PyTorch's argument order; float64 oracles written here."""

from __future__ import annotations

import numpy as np
import pytest
from nn_gradcheck import check_op_gradients

import nn

RNG = np.random.default_rng(0)
LOGITS = RNG.normal(size=(5, 4)) * 3
TARGET = np.array([0, 3, 1, 1, 2])


def log_softmax64(z):
    s = z - z.max(axis=1, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=1, keepdims=True))


def per_sample_ce(z, t, smoothing=0.0):
    logp = log_softmax64(z)
    nll = -logp[np.arange(len(t)), t]
    return (1 - smoothing) * nll + smoothing * (-logp).mean(axis=1)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_matches_float64_oracle_for_each_reduction(reduction):
    z32 = LOGITS.astype(np.float32)
    per = per_sample_ce(z32.astype(np.float64), TARGET)
    expected = {"mean": per.mean(), "sum": per.sum(), "none": per}[reduction]
    loss = nn.CrossEntropyLoss(reduction=reduction)(nn.Tensor(z32), TARGET)
    assert loss.fmt.name == "float32"
    np.testing.assert_allclose(loss.data, expected, rtol=1e-6)


def test_cross_entropy_takes_input_first_unlike_keras():
    z, t = LOGITS.astype(np.float32), TARGET
    torch_order = nn.CrossEntropyLoss()(z, t).item()
    keras_order = nn.losses.SparseCategoricalCrossentropy(from_logits=True)(t, z).item()
    assert torch_order == pytest.approx(keras_order, rel=1e-6)


def test_cross_entropy_label_smoothing_matches_oracle():
    loss = nn.CrossEntropyLoss(label_smoothing=0.2)(LOGITS.astype(np.float32), TARGET)
    expected = per_sample_ce(LOGITS.astype(np.float32).astype(np.float64), TARGET, 0.2).mean()
    np.testing.assert_allclose(loss.item(), expected, rtol=1e-6)


def test_cross_entropy_ignore_index_skips_samples_in_sum_and_count():
    t = TARGET.copy()
    t[[1, 3]] = -100
    loss = nn.CrossEntropyLoss()(LOGITS.astype(np.float32), t)
    keep = t != -100
    expected = per_sample_ce(LOGITS.astype(np.float32).astype(np.float64)[keep], t[keep]).mean()
    np.testing.assert_allclose(loss.item(), expected, rtol=1e-6)


def test_cross_entropy_with_probability_targets_matches_oracle():
    probs = RNG.dirichlet(np.ones(4), size=5)
    loss = nn.CrossEntropyLoss()(LOGITS.astype(np.float32), probs.astype(np.float32))
    z = LOGITS.astype(np.float32).astype(np.float64)
    expected = -(probs.astype(np.float32) * log_softmax64(z)).sum(axis=1).mean()
    np.testing.assert_allclose(loss.item(), expected, rtol=1e-6)


def test_cross_entropy_of_fp16_logits_is_computed_and_returned_in_fp32():
    z16 = nn.Tensor(LOGITS, fmt="float16", requires_grad=True)
    loss = nn.CrossEntropyLoss()(z16, TARGET)
    assert loss.fmt.name == "float32"
    np.testing.assert_allclose(loss.item(), per_sample_ce(z16.data.astype(np.float64),
                                                          TARGET).mean(), rtol=1e-6)
    loss.backward()
    assert z16.grad.fmt.name == "float16"  # the gradient is rounded to the logits' format


@pytest.mark.parametrize("kwargs", [{}, {"label_smoothing": 0.3}, {"reduction": "sum"}])
def test_cross_entropy_gradients_match_float64_central_differences(kwargs):
    t = TARGET.copy()
    t[2] = -100
    check_op_gradients(lambda z: nn.CrossEntropyLoss(**kwargs)(z, t).reshape(1), LOGITS)


def test_cross_entropy_soft_target_gradients_match_central_differences():
    probs = RNG.dirichlet(np.ones(4), size=5)
    check_op_gradients(lambda z: nn.CrossEntropyLoss(reduction="none")(z, probs), LOGITS)


def test_cross_entropy_rejects_bad_arguments_naming_them():
    with pytest.raises(ValueError, match="reduction='avg'"):
        nn.CrossEntropyLoss(reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing"):
        nn.CrossEntropyLoss(label_smoothing=1.5)
    with pytest.raises(ValueError, match="weight="):
        nn.CrossEntropyLoss(weight=np.ones(4))
    with pytest.raises(ValueError, match="out of bounds for 4 classes"):
        nn.CrossEntropyLoss()(LOGITS, np.array([0, 1, 2, 3, 4]))
    with pytest.raises(ValueError, match=r"shape \(N, C\)"):
        nn.CrossEntropyLoss()(np.zeros((2, 3, 4)), np.zeros((2, 4), int))
    with pytest.raises(ValueError, match=r"class indices of shape \(5,\)"):
        nn.CrossEntropyLoss()(LOGITS, np.zeros(3, int))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_averages_over_every_element(reduction):
    p, t = RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4))
    sq = (p.astype(np.float32).astype(np.float64) - t.astype(np.float32)) ** 2
    expected = {"mean": sq.mean(), "sum": sq.sum(), "none": sq}[reduction]
    loss = nn.MSELoss(reduction=reduction)(p.astype(np.float32), t)
    assert loss.fmt.name == "float32"
    np.testing.assert_allclose(loss.data, expected, rtol=1e-6)


def test_mse_gradients_match_float64_central_differences_and_shapes_must_match():
    t = RNG.normal(size=(3, 4))
    check_op_gradients(lambda p: nn.MSELoss()(p, t).reshape(1), RNG.normal(size=(3, 4)))
    with pytest.raises(ValueError, match=r"target of shape \(4,\).*input of shape \(3, 4\)"):
        nn.MSELoss()(np.zeros((3, 4), np.float32), np.zeros(4))
