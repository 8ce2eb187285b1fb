"""Keras idioms that used to run and silently mean something else; one test per case.

1. ``outputs.dtype.name`` printed float32 under mixed_float16, hiding the guide's INCORRECT
   softmax lesson.
2. ``.grad`` accumulated across the steps of a custom loop.
3. ``nn.datasets.batches()`` was a one-shot generator: epochs 2-5 ran 0 steps with loss nan.
"""

from __future__ import annotations

import numpy as np
import pytest

import nn
from nn import layers
from nn.datasets import Dataset
from nn.precision import mixed_precision

CE = nn.losses.SparseCategoricalCrossentropy()


def _guide_model(*final: nn.Layer) -> nn.Sequential:
    return nn.Sequential([layers.Dense(16, activation="relu"),
                          layers.Dense(16, activation="relu"), *final])


def _data(n: int = 64, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    return x, (x[:, 0] + x[:, 1] > 0).astype(np.int64)


# ---- 1. dtypes ---------------------------------------------------------------------------

def test_incorrect_softmax_under_mixed_float16_reports_float16():
    mixed_precision.set_global_policy("mixed_float16")
    model = _guide_model(layers.Dense(10, activation="softmax", name="predictions"))
    outputs = model(_data()[0])
    assert outputs.dtype.name == "float16" and str(outputs.dtype) == "float16"
    assert model.layers[0].kernel.dtype.name == "float32"  # master weights, as Keras


def test_correct_softmax_with_a_float32_activation_reports_float32():
    mixed_precision.set_global_policy("mixed_float16")
    model = _guide_model(layers.Dense(10), layers.Activation("softmax", dtype="float32"))
    x = _data()[0]
    assert model.layers[-2](model.layers[1](model.layers[0](x))).dtype.name == "float16"
    assert model(x).dtype.name == "float32" and model(x).dtype == "float32"


# ---- 2. gradients do not leak across steps ------------------------------------------------

def _tape_step(model: nn.Sequential, opt: nn.LossScaleOptimizer, x, y) -> list[np.ndarray]:
    with nn.GradientTape() as tape:
        loss = CE(y, model(x))
        scaled_loss = opt.get_scaled_loss(loss)
    grads = opt.get_unscaled_gradients(tape.gradient(scaled_loss, model.trainable_variables))
    return [g.numpy() for g in grads]


def test_gradients_of_two_tape_steps_are_independent():
    mixed_precision.set_global_policy("mixed_float16")
    nn.set_random_seed(0)
    model = _guide_model(layers.Dense(2))
    # lr 0 and a fixed scale: the weights and the scale stay, so must the gradients
    opt = nn.LossScaleOptimizer(nn.SGD(0.0), initial_scale=256, dynamic=False)
    x, y = _data()
    first = _tape_step(model, opt, x, y)
    assert all(np.isfinite(g).all() for g in first)
    opt.apply_gradients(zip(first, model.trainable_variables, strict=True))
    second = _tape_step(model, opt, x, y)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)
    assert all(v.grad is None for v in model.trainable_variables)


def test_the_backward_spelling_cannot_leak_through_apply_gradients_either():
    nn.set_random_seed(0)
    model = _guide_model(layers.Dense(2))
    opt = nn.LossScaleOptimizer(nn.SGD(0.0), initial_scale=256, dynamic=False)
    x, y = _data()
    grads = []
    for _ in range(2):
        opt.get_scaled_loss(CE(y, model(x))).backward()
        g = opt.get_unscaled_gradients([v.grad for v in model.trainable_variables])
        grads.append([t.numpy() for t in g])
        opt.apply_gradients(zip(g, model.trainable_variables, strict=True))
        assert all(v.grad is None for v in model.trainable_variables)  # consumed
    for a, b in zip(*grads, strict=True):
        np.testing.assert_array_equal(a, b)


# ---- 3. datasets built once run every epoch ---------------------------------------------

def test_a_dataset_built_once_gives_the_same_steps_every_epoch_and_a_loop_learns():
    mixed_precision.set_global_policy("mixed_float16")
    nn.set_random_seed(0)
    x, y = _data(256)
    train = Dataset.from_tensor_slices((x, y)).shuffle(256, seed=0).batch(32)
    model = _guide_model(layers.Dense(2), layers.Activation("softmax", dtype="float32"))
    opt = nn.LossScaleOptimizer(nn.Adam(0.01))
    steps, losses = [], []
    for _ in range(5):
        mean = nn.metrics.Mean()
        for xb, yb in train:
            with nn.GradientTape() as tape:
                loss = CE(yb, model(xb))
                scaled = opt.get_scaled_loss(loss)
            grads = opt.get_unscaled_gradients(tape.gradient(scaled, model.trainable_variables))
            opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            mean(loss)
        steps.append(mean.count)
        losses.append(mean.result())
    assert steps == [8] * 5
    assert all(np.isfinite(losses)) and losses[-1] < 0.5 * losses[0]


def test_batches_built_once_runs_every_epoch():
    x, y = _data(10)
    ds = nn.datasets.batches(x, y, batch_size=4, seed=0)
    assert [sum(1 for _ in ds) for _ in range(5)] == [3] * 5


def test_an_exhausted_one_shot_iterator_is_an_error_not_a_nan_epoch():
    x, y = _data(10)
    once = iter(nn.datasets.batches(x, y, batch_size=4))
    assert sum(1 for _ in nn.datasets.epoch_steps(once, "epoch 1")) == 3
    with pytest.raises(ValueError, match="epoch 2 ran 0 steps"):
        sum(1 for _ in nn.datasets.epoch_steps(once, "epoch 2"))
