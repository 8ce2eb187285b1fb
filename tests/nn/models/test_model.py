"""Model: compile, fit, evaluate, predict, summary, loss-scale selection and History contents.

Oracles: numpy float64 forward passes and a hand-written softmax-regression gradient step,
closed-form bounds on gradient magnitudes, and numpy recounts of exponents.
"""

from __future__ import annotations

import numpy as np
import pytest

import nn
from nn.training.history import EXPONENT_EDGES, exponent_counts

CE = nn.losses.SparseCategoricalCrossentropy


def _data(n: int = 96, d: int = 8, classes: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = rng.integers(0, classes, n)
    return x, y


def _mlp(policy: str = "float32", units: int = 16, classes: int = 3, seed: int = 0):
    nn.set_random_seed(seed)
    with nn.policy_scope(policy):
        return nn.Sequential([nn.Dense(units, activation="relu"), nn.Dense(classes)])


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


# --- Sequential is a Model ----------------------------------------
def test_sequential_is_a_model_and_compile_chains():
    model = _mlp()
    assert isinstance(model, nn.Model)
    assert model.compile("sgd", "sparse_categorical_crossentropy", ["accuracy"]) is model


def test_compile_accepts_strings_for_optimizer_loss_and_metrics():
    model = _mlp().compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    assert isinstance(model.optimizer, nn.Adam)
    assert isinstance(model.loss, CE)
    assert [m.name for m in model.metrics] == ["accuracy"]


def test_fit_before_compile_raises():
    x, y = _data()
    with pytest.raises(RuntimeError, match="compile"):
        _mlp().fit(x, y, verbose=0)


def test_fit_rejects_bad_arguments_with_clear_errors():
    x, y = _data()
    model = _mlp().compile("sgd", CE(from_logits=True))
    with pytest.raises(ValueError, match="same number of samples"):
        model.fit(x, y[:-1], verbose=0)
    with pytest.raises(ValueError, match="batch_size"):
        model.fit(x, y, batch_size=0, verbose=0)
    with pytest.raises(ValueError, match="validation_split"):
        model.fit(x, y, validation_split=1.5, verbose=0)
    with pytest.raises(ValueError, match="loss_scale"):
        model.fit(x, y, loss_scale="sometimes", verbose=0)
    with pytest.raises(TypeError, match="floating point"):
        model.fit(x.astype(np.int64), y, verbose=0)


# --- predict and evaluate against numpy ----------------------------------------
def test_predict_matches_a_numpy_float64_forward_pass_in_float32():
    x, _ = _data()
    model = _mlp()
    out = model.predict(x, batch_size=7)
    w1, b1, w2, b2 = (w.astype(np.float64) for w in model.get_weights())
    expected = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_evaluate_loss_and_accuracy_match_numpy_on_the_predictions():
    x, y = _data()
    model = _mlp().compile("sgd", CE(from_logits=True), ["accuracy"])
    loss, acc = model.evaluate(x, y, batch_size=10)
    logits = model.predict(x).astype(np.float64)
    expected_loss = -_log_softmax(logits)[np.arange(len(y)), y].mean()
    assert loss == pytest.approx(expected_loss, rel=1e-5)
    assert acc == pytest.approx(np.mean(np.argmax(logits, axis=1) == y))
    assert model.evaluate(x, y, return_dict=True).keys() == {"loss", "accuracy"}


def test_one_full_batch_sgd_epoch_equals_the_hand_written_softmax_regression_step():
    x, y = _data(n=40, d=5, classes=4)
    nn.set_random_seed(3)
    model = nn.Sequential([nn.Dense(4, bias_initializer="glorot_uniform")])
    model.compile(nn.SGD(0.5), CE(from_logits=True))
    model(x[:1])
    w, b = (a.astype(np.float64) for a in model.get_weights())
    model.fit(x, y, batch_size=len(x), epochs=1, shuffle=False, verbose=0)
    p = np.exp(_log_softmax(x @ w + b))
    p[np.arange(len(y)), y] -= 1
    g = p / len(y)
    w_new, b_new = w - 0.5 * (x.T @ g), b - 0.5 * g.sum(axis=0)
    got_w, got_b = model.get_weights()
    np.testing.assert_allclose(got_w, w_new, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_b, b_new, rtol=1e-5, atol=1e-6)


def test_fit_learns_a_separable_problem():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((200, 2)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
    model = _mlp(units=8, classes=2).compile(nn.SGD(0.2, momentum=0.9), CE(from_logits=True),
                                             ["accuracy"])
    model.fit(x, y, batch_size=20, epochs=15, seed=0, verbose=0)
    assert model.evaluate(x, y)[1] >= 0.95


# --- loss scaling selection ----------------------------------------
def test_mixed_float16_fit_wraps_the_optimizer_in_a_dynamic_loss_scale_optimizer():
    x, y = _data()
    model = _mlp("mixed_float16").compile("sgd", CE(from_logits=True))
    h = model.fit(x, y, batch_size=32, verbose=0)
    scaler = model.loss_scale_optimizer
    assert isinstance(scaler, nn.LossScaleOptimizer) and scaler.dynamic
    assert h.step_loss_scale == [2.0**15] * 3
    assert h.params["loss_scale"] == "dynamic"


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "float16"])
def test_other_policies_train_without_loss_scaling_by_default(policy):
    x, y = _data()
    model = _mlp(policy).compile("sgd", CE(from_logits=True))
    h = model.fit(x, y, batch_size=32, verbose=0)
    assert model.loss_scale_optimizer is None
    assert h.step_loss_scale == [1.0] * 3


def test_loss_scale_none_turns_scaling_off_under_mixed_float16_and_zero_is_refused():
    x, y = _data()
    model = _mlp("mixed_float16").compile("sgd", CE(from_logits=True))
    model.fit(x, y, verbose=0, loss_scale="none")
    assert model.loss_scale_optimizer is None
    with pytest.raises(ValueError, match="loss_scale must be a number from 2"):
        model.fit(x, y, verbose=0, loss_scale=0)  # the command line's rule: "none" says it


def test_a_number_gives_a_fixed_loss_scale():
    x, y = _data()
    model = _mlp("mixed_float16").compile("sgd", CE(from_logits=True))
    h = model.fit(x, y, batch_size=32, verbose=0, loss_scale=128)
    assert not model.loss_scale_optimizer.dynamic
    assert h.step_loss_scale == [128.0] * 3


def test_a_compiled_loss_scale_optimizer_is_used_as_is():
    x, y = _data()
    opt = nn.LossScaleOptimizer(nn.SGD(0.1), initial_scale=2.0**60, dynamic_growth_steps=5)
    model = _mlp("mixed_float16").compile(opt, CE(from_logits=True))
    h = model.fit(x, y, batch_size=32, verbose=0)
    assert model.loss_scale_optimizer is opt
    # 2**60 times a gradient overflows fp16: every step is skipped and the scale halves
    assert h.step_skipped == [True, True, True]
    assert h.step_loss_scale == [2.0**60, 2.0**59, 2.0**58]
    with pytest.raises(ValueError, match="already a LossScaleOptimizer"):
        model.fit(x, y, verbose=0, loss_scale="dynamic")


def test_a_skipped_step_leaves_the_weights_bit_identical():
    x, y = _data()
    opt = nn.LossScaleOptimizer(nn.SGD(0.1), initial_scale=2.0**60)
    model = _mlp("mixed_float16").compile(opt, CE(from_logits=True))
    model(x[:1])
    before = model.get_weights()
    model.fit(x, y, batch_size=len(x), verbose=0)
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights(), strict=True))


def test_the_dynamic_scale_carries_over_between_fit_calls():
    x, y = _data()
    model = _mlp("mixed_float16").compile("sgd", CE(from_logits=True))
    model.fit(x, y, verbose=0)
    first = model.loss_scale_optimizer
    model.fit(x, y, verbose=0)
    assert model.loss_scale_optimizer is first
    assert first.iterations == 6


# --- History ----------------------------------------
def test_history_has_keras_keys_per_epoch_and_one_entry_per_step():
    x, y = _data(n=100)
    model = _mlp().compile("sgd", CE(from_logits=True), ["accuracy"])
    h = model.fit(x, y, batch_size=16, epochs=3, validation_split=0.2, verbose=0)
    assert set(h.history) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert all(len(v) == 3 for v in h.history.values())
    assert h.epoch == [0, 1, 2]
    assert len(h.step_loss) == len(h.step_skipped) == len(h.step_loss_scale) == 3 * 5
    assert model.history is h
    assert h.history["val_loss"][-1] == pytest.approx(model.evaluate(x[80:], y[80:])[0])


def test_epoch_loss_is_the_sample_weighted_mean_of_the_step_losses():
    x, y = _data(n=50)
    model = _mlp().compile("sgd", CE(from_logits=True))
    h = model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    sizes = [16, 16, 16, 2]
    assert h.history["loss"][0] == pytest.approx(np.dot(h.step_loss, sizes) / 50)


def test_validation_data_is_evaluated_each_epoch():
    x, y = _data()
    model = _mlp().compile("sgd", CE(from_logits=True), ["accuracy"])
    h = model.fit(x, y, epochs=2, validation_data=(x[:10], y[:10]), verbose=0)
    assert h.history["val_accuracy"][-1] == model.evaluate(x[:10], y[:10])[1]


def test_telemetry_counts_every_activation_gradient_of_every_layer():
    x, y = _data(n=64)
    model = _mlp("mixed_float16", units=16, classes=3).compile("sgd", CE(from_logits=True))
    h = model.fit(x, y, batch_size=16, epochs=2, verbose=0)
    first, second = (layer.name for layer in model.layers)
    # one gradient value per output element per sample per epoch (oracle: the shapes)
    assert h.gradient_counts("activation", first)["elements"] == 64 * 16 * 2
    assert h.gradient_counts("activation", second)["elements"] == 64 * 3 * 2
    # weight gradients: kernel + bias elements per step
    assert h.gradient_counts("weight", first)["elements"] == (8 * 16 + 16) * 4 * 2
    assert len(h.gradient_events) == 2


def test_a_tiny_loss_weight_flushes_every_logit_gradient_to_zero_in_unscaled_fp16():
    # |d loss / d logit| <= weight / batch = 2**-40 / 16, far below fp16's 2**-25 rounding edge
    x, y = _data(n=64)
    model = _mlp("mixed_float16").compile(
        "sgd", nn.WeightedLoss(CE(from_logits=True), 2.0**-40))
    h = model.fit(x, y, batch_size=16, verbose=0, loss_scale="none")
    logits = model.layers[-1].name
    assert h.gradient_share("underflow", "activation", logits) == 1.0
    assert h.zero_counts["activation"] == h.gradient_counts("activation")["elements"]


def test_float32_training_rounds_no_gradient_so_counts_nothing():
    x, y = _data()
    h = _mlp().compile("sgd", CE(from_logits=True)).fit(x, y, verbose=0)
    assert h.gradient_counts("activation")["elements"] == 0
    assert h.gradient_share("underflow") == 0.0


def test_telemetry_off_records_no_events():
    x, y = _data()
    h = _mlp("mixed_float16").compile("sgd", CE(from_logits=True)).fit(
        x, y, verbose=0, telemetry=False)
    assert h.gradient_events == [] and h.exponent_counts["activation"].sum() == 0


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16", "float16"])
def test_telemetry_changes_neither_the_trained_weights_nor_the_scaler_history(policy):
    # telemetry routes the backward pass's roundings through the counting kernels and single
    # threads numba; training must be bit-identical. A large initial scale makes the dynamic
    # scaler skip steps and then grow, so both branches of a step are covered.
    x, y = _data(n=256)
    runs = []
    for telemetry in (True, False):
        opt = nn.LossScaleOptimizer(nn.SGD(0.1), initial_scale=2.0**20, dynamic_growth_steps=3)
        model = _mlp(policy).compile(opt, CE(from_logits=True))
        h = model.fit(x, y, batch_size=16, epochs=3, seed=0, verbose=0, telemetry=telemetry)
        runs.append((h, opt.loss_scale, [v.numpy() for v in model.trainable_variables]))
    (h_on, scale_on, w_on), (h_off, scale_off, w_off) = runs
    assert h_on.skipped_steps == h_off.skipped_steps
    assert h_on.skipped_steps > 0 or policy == "mixed_bfloat16"  # bf16 has float32's range
    assert scale_on == scale_off
    assert h_on.history["loss"] == h_off.history["loss"]
    assert all(np.array_equal(a, b) for a, b in zip(w_on, w_off, strict=True))
    assert h_on.gradient_events and not h_off.gradient_events


def test_exponent_counts_match_floor_log2_including_subnormals():
    rng = np.random.default_rng(0)
    v = (rng.standard_normal(5000) * 2.0 ** rng.integers(-140, 120, 5000)).astype(np.float32)
    v[:50] = 0
    v[50:60] = np.float32(2.0**-149) * rng.integers(1, 100, 10)  # float32 subnormals
    counts, zeros = exponent_counts(v)
    nz = v[v != 0].astype(np.float64)
    expected = np.bincount(np.floor(np.log2(np.abs(nz))).astype(int) + 149,
                           minlength=len(EXPONENT_EDGES) - 1)
    assert zeros == np.count_nonzero(v == 0) >= 50
    assert counts[:20].sum() >= 10  # the subnormal bins are populated
    np.testing.assert_array_equal(counts, expected)


def test_exponent_values_reproduce_the_counts_in_integer_bins():
    x, y = _data()
    h = _mlp("mixed_float16").compile("sgd", CE(from_logits=True)).fit(x, y, verbose=0)
    values = h.exponent_values("activation")
    hist, _ = np.histogram(np.log2(values), bins=h.exponent_edges)
    np.testing.assert_array_equal(hist, h.exponent_counts["activation"])


def test_swamped_updates_are_recorded_per_epoch_from_the_optimizer():
    x, y = _data()
    model = _mlp("float16").compile(nn.SGD(1e-4), CE(from_logits=True))
    h = model.fit(x, y, epochs=2, verbose=0)
    assert sum(h.swamped_updates) == model.inner_optimizer.swamped_updates > 0


# --- summary and progress bar ----------------------------------------
def test_summary_lists_layers_shapes_params_and_formats():
    model = _mlp("mixed_float16", units=16)
    model(np.zeros((1, 8), np.float32))
    text = model.summary(print_fn=None)
    assert "(None, 16)" in text and "(None, 3)" in text
    assert f"total params: {8 * 16 + 16 + 16 * 3 + 3:,}" in text
    assert "float16" in text and "float32" in text


def test_verbose_1_prints_keras_progress_lines_with_loss_and_scale_on_stdout(capsys):
    x, y = _data()
    model = _mlp("mixed_float16").compile("sgd", CE(from_logits=True), ["accuracy"])
    model.fit(x, y, verbose=1)
    out = capsys.readouterr().out
    assert out.startswith("Epoch 1/1\n3/3 [====")
    assert " - loss: " in out and " - accuracy: " in out and " - loss_scale: 32768" in out


def test_verbose_0_prints_nothing(capsys):
    x, y = _data()
    _mlp().compile("sgd", CE(from_logits=True)).fit(x, y, verbose=0)
    assert capsys.readouterr() == ("", "")


def test_shuffling_with_a_seed_is_reproducible():
    x, y = _data()
    runs = []
    for _ in range(2):
        model = _mlp(seed=5).compile("sgd", CE(from_logits=True))
        model.fit(x, y, epochs=2, seed=11, verbose=0)
        runs.append(model.get_weights())
    assert all(np.array_equal(a, b) for a, b in zip(*runs, strict=True))


def test_summary_prints_and_returns_none_as_keras_does(capsys):
    model = nn.Sequential([nn.Dense(3)])
    model(np.ones((2, 4), np.float32))
    assert model.summary() is None
    assert "total params: 15" in capsys.readouterr().out


def test_fit_through_an_overflowing_fp8_run_raises_no_floating_point_warnings():
    """inf/NaN in the forward loss are IEEE results the scaler handles, not warnings."""
    import warnings

    rng = np.random.default_rng(0)
    x = (rng.standard_normal((64, 8)) * 300).astype(np.float32)  # e4m3fn overflows past 448
    y = rng.integers(0, 3, 64)
    with nn.policy_scope("mixed_e4m3fn"):
        model = nn.Sequential([nn.Dense(16, activation="relu"), nn.Dense(3)])
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        history = model.fit(x, y, batch_size=32, epochs=1, verbose=0, loss_scale="dynamic",
                            seed=0)
    assert len(history.history["loss"]) == 1
