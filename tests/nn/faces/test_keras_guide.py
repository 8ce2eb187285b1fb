"""The TensorFlow mixed-precision guide, ported onto nn line by line, run once from top to bottom
(``guide`` below); each test checks what a Keras user expects at one step of it.

The port changes only what must change: ``tf.keras`` -> ``nn``, 64 hidden units (the guide's
CPU setting), and an MNIST-shaped file built from scikit-learn's 8x8 digits (upscaled to
28x28, uint8, in Keras's ``mnist.npz`` layout) read by ``nn.datasets.mnist.load_data``, with
batches of 128 instead of 8192 to keep several steps per epoch on 1,437 training images.

Oracles: the dtypes and prints the guide shows, Keras's numbering and output format, and
laws of the loss-scale optimizer (with 2000-step growth, the scale after a short run is
2^15 halved once per skipped step).
"""

# The guide's own spelling is kept (%-formatting, str.format, zip without strict=): a Keras
# user's code, ported as written.
# ruff: noqa: UP031, UP032, B905
from __future__ import annotations

import contextlib
import io
import re

import numpy as np
import pytest
from sklearn.datasets import load_digits

import nn
from nn import layers
from nn.precision import mixed_precision

BATCH = 128


def _mnist_like_file(path):
    digits = load_digits()
    images = np.kron(digits.images, np.ones((3, 3)))  # 8x8 -> 24x24
    images = np.pad(images, ((0, 0), (2, 2), (2, 2)))  # -> 28x28, as MNIST
    images = np.round(images * (255 / 16)).astype(np.uint8)
    labels = digits.target.astype(np.uint8)
    order = np.random.default_rng(0).permutation(len(images))
    images, labels = images[order], labels[order]
    n_train = 1437
    np.savez(path, x_train=images[:n_train], y_train=labels[:n_train],
             x_test=images[n_train:], y_test=labels[n_train:])


def _run_guide(tmp_path):  # noqa: PLR0915 (the guide is one long script)
    out: dict = {}
    prints = io.StringIO()
    with contextlib.redirect_stdout(prints):
        # --- Setting the dtype policy
        policy = mixed_precision.Policy("mixed_float16")
        mixed_precision.set_global_policy(policy)
        out["global_policy"] = mixed_precision.global_policy()
        mixed_precision.set_global_policy("mixed_float16")  # equivalent, as a string
        print("Compute dtype: %s" % policy.compute_dtype)
        print("Variable dtype: %s" % policy.variable_dtype)

        # --- Building the model
        inputs = nn.Input(shape=(784,), name="digits")
        num_units = 64
        dense1 = layers.Dense(num_units, activation="relu", name="dense_1")
        x = dense1(inputs)
        dense2 = layers.Dense(num_units, activation="relu", name="dense_2")
        x = dense2(x)
        print(dense1.dtype_policy)
        print("x.dtype: %s" % x.dtype.name)
        print("dense1.kernel.dtype: %s" % dense1.kernel.dtype.name)

        # INCORRECT: softmax and model output will be float16, when it should be float32
        outputs = layers.Dense(10, activation="softmax", name="predictions")(x)
        print("Outputs dtype: %s" % outputs.dtype.name)

        # CORRECT: softmax and model output are float32
        x = layers.Dense(10, name="dense_logits")(x)
        outputs = layers.Activation("softmax", dtype="float32", name="predictions")(x)
        print("Outputs dtype: %s" % outputs.dtype.name)

        # The linear activation is an identity function: a cast to float32 (a no-op here)
        outputs = layers.Activation("linear", dtype="float32")(outputs)
        out["outputs"] = outputs

        model = nn.Model(inputs=inputs, outputs=outputs)
        model.compile(loss="sparse_categorical_crossentropy",
                      optimizer=nn.optimizers.RMSprop(),
                      metrics=["accuracy"])
        out["model"] = model

        _mnist_like_file(tmp_path / "mnist.npz")
        (x_train, y_train), (x_test, y_test) = nn.datasets.mnist.load_data(
            path=tmp_path / "mnist.npz")
        out["raw_dtype"] = x_train.dtype
        x_train = x_train.reshape(1437, 784).astype("float32") / 255
        x_test = x_test.reshape(360, 784).astype("float32") / 255

        initial_weights = model.get_weights()
        out["initial_weights"] = [w.copy() for w in initial_weights]

        # --- Training the model with Model.fit
        mark = prints.tell()
        history = model.fit(x_train, y_train, batch_size=BATCH, epochs=5,
                            validation_split=0.2)
        out["fit_text"] = prints.getvalue()[mark:]
        out["history"] = history
        out["fit_scale"] = model.optimizer.loss_scale
        mark = prints.tell()
        test_scores = model.evaluate(x_test, y_test, verbose=2)
        out["evaluate_text"] = prints.getvalue()[mark:]
        print("Test loss:", test_scores[0])
        print("Test accuracy:", test_scores[1])
        out["test_scores"] = test_scores

        # --- Underflow and overflow
        x = nn.Tensor(256, fmt="float16")
        out["overflow"] = (x ** 2).numpy()
        x = nn.Tensor(1e-5, fmt="float16")
        out["underflow"] = (x ** 2).numpy()

        # --- Training the model with a custom training loop
        optimizer = nn.optimizers.RMSprop()
        optimizer = mixed_precision.LossScaleOptimizer(optimizer)
        out["optimizer"] = optimizer

        loss_object = nn.losses.SparseCategoricalCrossentropy()
        train_dataset = (nn.datasets.Dataset.from_tensor_slices((x_train, y_train))
                         .shuffle(10000).batch(BATCH))
        test_dataset = nn.datasets.Dataset.from_tensor_slices((x_test, y_test)).batch(BATCH)

        steps = []

        def train_step(x, y):
            with nn.GradientTape() as tape:
                predictions = model(x)
                loss = loss_object(y, predictions)
                scaled_loss = optimizer.get_scaled_loss(loss)
            scaled_gradients = tape.gradient(scaled_loss, model.trainable_variables)
            gradients = optimizer.get_unscaled_gradients(scaled_gradients)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables))
            steps.append((scaled_loss.dtype.name, [g.dtype.name for g in gradients]))
            return loss

        def test_step(x):
            return model(x, training=False)

        model.set_weights(initial_weights)
        out["restored"] = model.get_weights()

        mark = prints.tell()
        epoch_losses, epoch_accuracies = [], []
        for epoch in range(5):
            epoch_loss_avg = nn.metrics.Mean()
            test_accuracy = nn.metrics.SparseCategoricalAccuracy(name="test_accuracy")
            for x, y in train_dataset:
                loss = train_step(x, y)
                epoch_loss_avg(loss)
            for x, y in test_dataset:
                predictions = test_step(x)
                test_accuracy.update_state(y, predictions)
            print("Epoch {}: loss={}, test accuracy={}".format(epoch, epoch_loss_avg.result(),
                                                              test_accuracy.result()))
            epoch_losses.append(epoch_loss_avg.result())
            epoch_accuracies.append(test_accuracy.result())
        out["loop_text"] = prints.getvalue()[mark:]
        out["loop"] = (epoch_losses, epoch_accuracies, steps, len(train_dataset))
    out["prints"] = prints.getvalue()
    return out


# one worker runs this module, so its module fixture is set up once
# (the guide fixture trains several models)
pytestmark = pytest.mark.xdist_group("keras_guide")


@pytest.fixture(scope="module")
def guide(tmp_path_factory):
    before = nn.global_policy()
    nn.set_random_seed(0)
    try:
        yield _run_guide(tmp_path_factory.mktemp("guide"))
    finally:
        nn.set_global_policy(before)


# --- policy ------------------------------------------------------------------------------------
def test_the_policy_is_mixed_float16_with_float16_compute_and_float32_variables(guide):
    assert guide["global_policy"].name == "mixed_float16"
    assert "Compute dtype: float16\nVariable dtype: float32\n" in guide["prints"]


# --- dtypes while building ---------------------------------------------------------------------
def test_the_dense_layers_print_their_policy_and_float16_outputs_on_float32_kernels(guide):
    lines = guide["prints"].splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("<Policy"))
    assert lines[i].startswith('<Policy "mixed_float16"')
    assert lines[i + 1:i + 3] == ["x.dtype: float16", "dense1.kernel.dtype: float32"]


def test_the_incorrect_softmax_prints_float16_and_the_correct_one_float32(guide):
    dtypes = re.findall(r"^Outputs dtype: (\w+)$", guide["prints"], re.M)
    assert dtypes == ["float16", "float32"]
    assert guide["outputs"].dtype == "float32"


def test_the_model_holds_the_correct_graph_only(guide):
    model = guide["model"]
    names = [layer.name for layer in model.layers]
    assert names[:5] == ["digits", "dense_1", "dense_2", "dense_logits", "predictions"]
    assert len(names) == 6 and type(model.layers[4]).__name__ == "Activation"


def test_compile_under_mixed_float16_wraps_the_optimizer_in_a_loss_scale_optimizer(guide):
    optimizer = guide["model"].optimizer
    assert isinstance(optimizer, mixed_precision.LossScaleOptimizer)
    assert isinstance(optimizer.inner_optimizer, nn.optimizers.RMSprop)


def test_load_data_returns_keras_raw_uint8_images_and_initial_weights_are_float32(guide):
    assert guide["raw_dtype"] == np.uint8
    shapes = [w.shape for w in guide["initial_weights"]]
    assert shapes == [(784, 64), (64,), (64, 64), (64,), (64, 10), (10,)]
    assert all(w.dtype == np.float32 for w in guide["initial_weights"])


# --- Model.fit and evaluate --------------------------------------------------------------------
def test_fit_prints_epoch_k_of_5_and_a_progress_bar_with_validation_metrics(guide):
    lines = guide["fit_text"].splitlines()
    assert lines[0::2] == [f"Epoch {k}/5" for k in range(1, 6)]
    steps = -(-int(1437 * 0.8 + 1) // BATCH)  # 1,150 training samples after the split
    for line in lines[1::2]:
        assert re.fullmatch(rf"{steps}/{steps} \[=+\] - \d+s \d+(s|ms|us)/step - loss: [\d.]+ - "
                            r"accuracy: [\d.]+ - val_loss: [\d.]+ - val_accuracy: [\d.]+"
                            r" - loss_scale: \d+", line), line


def test_fit_trains_and_its_history_has_keras_keys_per_epoch(guide):
    h = guide["history"].history
    assert list(h) == ["loss", "accuracy", "val_loss", "val_accuracy"]
    assert all(len(v) == 5 for v in h.values())
    assert h["loss"][-1] < h["loss"][0] and h["val_accuracy"][-1] > 0.8


def test_fit_loss_scale_is_two_to_the_15_halved_once_per_skipped_step(guide):
    skipped = sum(guide["history"].step_skipped)
    assert guide["fit_scale"] == 2.0**15 * 0.5**skipped


def test_evaluate_verbose_2_prints_its_line_and_returns_loss_and_accuracy(guide):
    loss, accuracy = guide["test_scores"]
    assert re.fullmatch(rf"12/12 - \d+s - loss: {loss:.4f} - accuracy: {accuracy:.4f} - "
                        r"\d+(s|ms|us)/step\n", guide["evaluate_text"])
    assert f"Test loss: {loss}\nTest accuracy: {accuracy}\n" in guide["prints"]
    assert accuracy > 0.8


def test_float16_overflows_past_65504_and_underflows_below_its_smallest_subnormal(guide):
    assert guide["overflow"] == np.inf and guide["underflow"] == 0.0


# --- the custom training loop ------------------------------------------------------------------
def test_the_custom_loop_starts_from_the_restored_initial_weights(guide):
    for a, b in zip(guide["restored"], guide["initial_weights"], strict=True):
        np.testing.assert_array_equal(a, b)


def test_every_epoch_of_the_custom_loop_runs_every_batch_and_learns(guide):
    losses, accuracies, steps, per_epoch = guide["loop"]
    assert len(steps) == 5 * per_epoch == 5 * 12
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert accuracies[-1] > 0.8


def test_the_loop_scales_a_float32_loss_and_unscales_float32_master_gradients(guide):
    _, _, steps, _ = guide["loop"]
    assert all(loss == "float32" and set(grads) == {"float32"} for loss, grads in steps)


def test_the_loop_prints_keras_epoch_lines_and_its_scale_follows_the_skipped_steps(guide):
    lines = guide["loop_text"].splitlines()
    assert [int(re.match(r"Epoch (\d+): loss=[\d.]+, test accuracy=[\d.]+$", line).group(1))
            for line in lines] == [0, 1, 2, 3, 4]
    optimizer = guide["optimizer"]
    assert optimizer.loss_scale == 2.0**15 * 0.5**optimizer.skipped_steps
    assert all(v.grad is None for v in guide["model"].trainable_variables)
