"""Model.fit and compile as a Keras user expects: epoch numbering from ``initial_epoch``,
reproducible re-fits, Keras's progress lines on stdout, datasets as ``x``, and
``model.optimizer`` being the LossScaleOptimizer after a mixed_float16 compile.

Oracles: a second run from the same weights (bit-identical), array batches against a dataset
of the same batches, Keras's documented output format and numbering written out here.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import nn
from nn.training.progress import format_per_step, format_value

CE = nn.losses.SparseCategoricalCrossentropy


def _data(n: int = 48, d: int = 6, classes: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)).astype(np.float32), rng.integers(0, classes, n)


def _mlp(policy: str = "float32", seed: int = 0):
    nn.set_random_seed(seed)
    with nn.policy_scope(policy):
        model = nn.Sequential([nn.Dense(8, activation="relu"), nn.Dense(3)])
    model.build((None, 6))
    return model


def _compiled(policy: str = "float32", seed: int = 0):
    return _mlp(policy, seed).compile("adam", CE(from_logits=True), ["accuracy"])


class _Batches:
    """A re-iterable dataset of fixed (x, y) batches, as tf.data / nn.datasets.Dataset gives."""

    def __init__(self, x, y, size):
        self.x, self.y, self.size = x, y, size

    def __iter__(self):
        for i in range(0, len(self.x), self.size):
            yield self.x[i:i + self.size], self.y[i:i + self.size]

    def __len__(self):
        return -(-len(self.x) // self.size)


# --- epoch numbering --------------------------------------------------------------------------
def test_epochs_is_the_index_to_stop_at_and_epochs_are_numbered_from_initial_epoch(capsys):
    x, y = _data()
    h = _compiled().fit(x, y, batch_size=16, epochs=5, initial_epoch=2, verbose=2)
    assert h.epoch == [2, 3, 4] and len(h.history["loss"]) == 3
    out = capsys.readouterr().out
    assert re.findall(r"^Epoch (\d+)/(\d+)$", out, re.M) == [("3", "5"), ("4", "5"), ("5", "5")]


def test_initial_epoch_at_epochs_trains_nothing_as_in_keras():
    x, y = _data()
    model = _compiled()
    before = model.get_weights()
    h = model.fit(x, y, epochs=3, initial_epoch=3, verbose=0)
    assert h.epoch == [] and h.step_loss == []
    for a, b in zip(before, model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_each_fit_call_numbers_its_epochs_from_initial_epoch_again():
    x, y = _data()
    model = _compiled()
    assert model.fit(x, y, epochs=2, verbose=0).epoch == [0, 1]
    assert model.fit(x, y, epochs=2, verbose=0).epoch == [0, 1]
    assert model.epochs_trained == 4  # the shuffling stream moved on


# --- reproducibility --------------------------------------------------------------------------
@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_refit_from_the_initial_weights_after_compile_reproduces_the_run_bit_for_bit(policy):
    x, y = _data()
    nn.set_random_seed(7)
    model = _mlp(policy, seed=7)
    initial = model.get_weights()
    runs = []
    for _ in range(2):
        model.set_weights(initial)
        model.compile("rmsprop", CE(from_logits=True))
        h = model.fit(x, y, batch_size=8, epochs=2, verbose=0)  # seed from set_random_seed
        runs.append((model.get_weights(), h.step_loss, h.step_loss_scale))
    (w1, l1, s1), (w2, l2, s2) = runs
    for a, b in zip(w1, w2, strict=True):
        np.testing.assert_array_equal(a, b)
    assert l1 == l2 and s1 == s2


def test_without_compile_a_second_fit_continues_the_shuffling_stream():
    x, y = _data()
    model = _compiled()
    first = model.fit(x, y, batch_size=8, epochs=1, shuffle=True, verbose=0)
    model.set_weights(_compiled().get_weights())
    model.compile("adam", CE(from_logits=True), ["accuracy"])
    again = model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    later = model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert first.step_loss == again.step_loss
    assert later.step_loss != again.step_loss


def test_the_shuffling_seed_follows_set_random_seed():
    x, y = _data()
    losses = []
    for seed in (1, 1, 2):
        model = _compiled(seed=0)
        nn.set_random_seed(seed)
        losses.append(model.fit(x, y, batch_size=8, verbose=0).step_loss)
    assert losses[0] == losses[1] and losses[0] != losses[2]


# --- progress output --------------------------------------------------------------------------
BAR = re.compile(r"^(\d+)/(\d+) \[(=+)\] - \d+s \d+(?:s|ms|us)/step - loss: \d\.\d{4} - "
                 r"accuracy: \d\.\d{4}(?: - val_loss: \d\.\d{4} - val_accuracy: \d\.\d{4})?$")


def test_verbose_1_prints_epoch_k_of_n_and_a_keras_progress_bar_on_stdout(capsys):
    x, y = _data()
    _compiled().fit(x, y, batch_size=16, epochs=2, verbose=1, validation_split=0.25)
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0] == "Epoch 1/2" and lines[2] == "Epoch 2/2" and len(lines) == 4
    for line in (lines[1], lines[3]):
        match = BAR.match(line)
        assert match, line
        assert match.group(1) == match.group(2) == "3" and len(match.group(3)) == 30
        assert "val_accuracy" in line
    assert "loss" not in err


def test_verbose_1_adds_the_loss_scale_when_training_is_loss_scaled(capsys):
    x, y = _data()
    _compiled("mixed_float16").fit(x, y, batch_size=16, verbose=1)
    assert capsys.readouterr().out.splitlines()[1].endswith(" - loss_scale: 32768")


def test_verbose_2_prints_one_summary_line_per_epoch(capsys):
    x, y = _data()
    _compiled().fit(x, y, batch_size=16, epochs=2, verbose=2)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0::2] == ["Epoch 1/2", "Epoch 2/2"]
    for line in lines[1::2]:
        assert re.fullmatch(r"3/3 - \d+s - loss: \d\.\d{4} - accuracy: \d\.\d{4} - "
                            r"\d+(s|ms|us)/step", line), line


def test_verbose_0_prints_nothing_in_fit_evaluate_and_predict(capsys):
    x, y = _data()
    model = _compiled()
    model.fit(x, y, verbose=0)
    model.evaluate(x, y, verbose=0)
    model.predict(x, verbose=0)
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("verbose,pattern", [
    (2, r"2/2 - \d+s - loss: \d\.\d{4} - accuracy: \d\.\d{4} - \d+(s|ms|us)/step"),
    (1, r"2/2 \[=+\] - \d+s \d+(s|ms|us)/step - loss: \d\.\d{4} - accuracy: \d\.\d{4}"),
])
def test_evaluate_prints_its_line_as_keras_does(capsys, verbose, pattern):
    x, y = _data()
    loss, acc = _compiled().evaluate(x, y, batch_size=32, verbose=verbose)
    line = capsys.readouterr().out.strip()
    assert re.fullmatch(pattern, line), line
    assert f"loss: {loss:.4f}" in line and f"accuracy: {acc:.4f}" in line


def test_values_and_times_are_formatted_as_keras_formats_them():
    assert format_value(0.51630485) == "0.5163" and format_value(1e-4) == "1.0000e-04"
    assert format_per_step(0.078) == "78ms/step" and format_per_step(2.4) == "2s/step"
    assert format_per_step(3e-5) == "30us/step"


@pytest.mark.parametrize("verbose", [3, -1, True, "yes"])
def test_an_unknown_verbose_level_is_refused(verbose):
    x, y = _data()
    with pytest.raises(ValueError, match="verbose must be 0.*1.*2"):
        _compiled().fit(x, y, verbose=verbose)


def test_callbacks_are_refused_naming_history():
    x, y = _data()
    with pytest.raises(NotImplementedError, match="model.history"):
        _compiled().fit(x, y, callbacks=[object()], verbose=0)


# --- datasets -----------------------------------------------------------------------------------
def test_fit_on_a_reiterable_dataset_equals_fit_on_the_same_array_batches():
    x, y = _data()
    by_arrays = _compiled()
    h1 = by_arrays.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0)
    by_dataset = _compiled()
    h2 = by_dataset.fit(_Batches(x, y, 16), epochs=3, verbose=0)
    assert h1.step_loss == h2.step_loss and len(h2.step_loss) == 9
    for a, b in zip(by_arrays.get_weights(), by_dataset.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    assert by_dataset.evaluate(_Batches(x, y, 16), verbose=0) == \
        by_arrays.evaluate(x, y, batch_size=16, verbose=0)
    np.testing.assert_array_equal(by_dataset.predict(_Batches(x, y, 5), verbose=0),
                                  by_arrays.predict(x, verbose=0))


def test_a_dataset_of_validation_batches_is_evaluated_each_epoch():
    x, y = _data()
    h = _compiled().fit(_Batches(x, y, 16), epochs=2, validation_data=_Batches(x, y, 24),
                        verbose=0)
    assert len(h.history["val_loss"]) == 2 and len(h.history["val_accuracy"]) == 2


def test_a_one_shot_generator_raises_on_the_epoch_that_runs_no_step():
    x, y = _data()
    model = _compiled()
    gen = iter(_Batches(x, y, 16))
    with pytest.raises(ValueError, match="no steps.*one-shot iterator.*re-iterable dataset"):
        model.fit(gen, epochs=2, verbose=0)
    assert model.history.epoch == [0]  # the first epoch ran; the second found nothing


@pytest.mark.parametrize("kwargs,match", [
    ({"y": np.zeros(48)}, "y must be None when x is a dataset"),
    ({"batch_size": 8}, "batch_size must be None when x is a dataset"),
    ({"validation_split": 0.2}, "validation_split needs arrays"),
])
def test_a_dataset_with_array_only_arguments_is_refused(kwargs, match):
    x, y = _data()
    with pytest.raises(ValueError, match=match):
        _compiled().fit(_Batches(x, y, 16), verbose=0, **kwargs)


# --- compile and loss scaling -------------------------------------------------------------------
def test_compile_under_mixed_float16_makes_model_optimizer_the_loss_scale_optimizer():
    model = _mlp("mixed_float16").compile(nn.RMSprop(), CE(from_logits=True))
    assert isinstance(model.optimizer, nn.LossScaleOptimizer)
    assert isinstance(model.optimizer.inner_optimizer, nn.RMSprop)
    assert model.inner_optimizer is model.optimizer.inner_optimizer
    assert model.optimizer.dynamic and model.optimizer.loss_scale == 2.0**15


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "bfloat16"])
def test_compile_under_other_policies_keeps_the_plain_optimizer(policy):
    opt = nn.RMSprop()
    model = _mlp(policy).compile(opt, CE(from_logits=True))
    assert model.optimizer is opt and model.loss_scale_optimizer is None


def test_fit_loss_scale_changes_model_optimizer_to_what_the_run_used():
    x, y = _data()
    model = _compiled("mixed_float16")
    inner = model.inner_optimizer
    model.fit(x, y, verbose=0, loss_scale="none")
    assert model.optimizer is inner
    model.fit(x, y, verbose=0, loss_scale=128)
    assert model.optimizer.loss_scale == 128 and not model.optimizer.dynamic
    assert model.optimizer.inner_optimizer is inner
