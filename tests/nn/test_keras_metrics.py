"""nn.metrics.Mean and SparseCategoricalAccuracy with Keras's stateful API; oracle: numpy."""

from __future__ import annotations

import numpy as np
import pytest

import nn
from nn.engine.registry import METRICS

RNG = np.random.default_rng(3)
LOGITS = RNG.normal(size=(3, 8, 5)).astype(np.float32)  # three batches of 8 samples, 5 classes
LABELS = RNG.integers(0, 5, size=(3, 8))


def test_mean_is_the_mean_of_every_value_seen_across_updates():
    m = nn.metrics.Mean()
    batches = [RNG.normal(size=4), RNG.normal(size=(2, 3)), np.float64(7.0)]
    for b in batches:
        m.update_state(b)
    expected = np.concatenate([np.ravel(b) for b in batches]).mean()
    assert m.result() == pytest.approx(expected, rel=1e-12)
    assert isinstance(m.result(), float)


def test_mean_weights_values_by_sample_weight():
    values, weights = RNG.normal(size=6), RNG.uniform(size=6)
    m = nn.metrics.Mean()
    m.update_state(values, sample_weight=weights)
    assert m.result() == pytest.approx(np.average(values, weights=weights), rel=1e-12)
    with pytest.raises(ValueError, match="sample_weight of shape"):
        m.update_state(values, sample_weight=np.ones(4))


def test_calling_a_metric_updates_it_and_returns_the_result():
    m = nn.metrics.Mean(name="epoch_loss")
    assert m.result() == 0.0
    assert m(nn.Tensor(2.0)) == 2.0 and m(nn.Tensor(4.0)) == 3.0
    m.reset_state()
    assert m.result() == 0.0 and m.count == 0


def test_sparse_categorical_accuracy_is_the_share_of_argmax_hits():
    m = nn.metrics.SparseCategoricalAccuracy()
    for logits, labels in zip(LOGITS, LABELS, strict=True):
        m.update_state(labels, nn.Tensor(logits))
    expected = (LOGITS.argmax(-1) == LABELS).mean()
    assert m.result() == pytest.approx(expected) and m.name == "sparse_categorical_accuracy"


def test_sparse_categorical_accuracy_accepts_column_labels_and_sample_weights():
    weights = RNG.uniform(size=8)
    m = nn.metrics.SparseCategoricalAccuracy()
    m.update_state(LABELS[0].reshape(8, 1), LOGITS[0], sample_weight=weights)
    hits = LOGITS[0].argmax(-1) == LABELS[0]
    assert m.result() == pytest.approx(np.average(hits, weights=weights))


def test_sparse_categorical_accuracy_rejects_one_hot_and_fractional_labels():
    m = nn.metrics.SparseCategoricalAccuracy()
    with pytest.raises(ValueError, match="one-hot labels: use nn.metrics.Accuracy"):
        m.update_state(np.eye(5)[LABELS[0]], LOGITS[0])
    with pytest.raises(ValueError, match="integer class ids"):
        m.update_state(np.full(8, 0.5), LOGITS[0])


def test_the_keras_names_find_the_keras_classes():
    assert type(nn.metrics.get("sparse_categorical_accuracy")) is \
        nn.metrics.SparseCategoricalAccuracy
    assert type(nn.metrics.get("mean")) is nn.metrics.Mean
    assert {"Mean", "SparseCategoricalAccuracy"} <= set(METRICS.classes())
    model = nn.Sequential([nn.Dense(5)]).compile("sgd", "sparse_categorical_crossentropy",
                                                ["sparse_categorical_accuracy"])
    assert type(model.metrics[0]) is nn.metrics.SparseCategoricalAccuracy


def test_mean_rejects_non_numbers():
    with pytest.raises(TypeError, match="values must be numbers"):
        nn.metrics.Mean().update_state(np.array(["a"]))
