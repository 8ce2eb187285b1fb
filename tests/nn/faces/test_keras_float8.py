"""Keras 3's float8 training through ``nn.faces.keras``: a small Dense training loop, steps 1
to 4, against Keras 3's algorithm re-computed here in numpy and ml_dtypes, one Keras op at a
time in its own dtype (keras/src/quantizers/quantizers.py: ``quantize_and_dequantize``,
``compute_float8_scale``, ``compute_float8_amax_history``; ``Dense._float8_call``)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import nn
from nn.faces import keras

E4M3, E5M2, BF16 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.bfloat16
COMPUTE = {"float32": np.float32, "mixed_bfloat16": BF16, "mixed_float16": np.float16}


# --- Keras 3's algorithm, in the compute dtype C (numpy / ml_dtypes arithmetic) ------------
def keras_qdq(x, scale, qdtype, c):
    qmax = c(float(ml_dtypes.finfo(qdtype).max))
    with np.errstate(over="ignore"):  # C's overflow to inf, then clipped
        y = x.astype(c) / c(scale)  # ops.divide in C
    y = np.clip(y, -qmax, qmax).astype(qdtype)  # ops.clip, ops.cast to fp8
    return y.astype(c) * c(scale)  # ops.multiply in C


def keras_scale(history, scale, dtype_max):
    amax = np.max(history)
    with np.errstate(divide="ignore"):
        sf = np.float32(dtype_max) / amax
    if not (amax > 0 and np.isfinite(amax)):
        sf = np.float32(1) / scale
    return np.float32(1) / sf


def keras_history(x, history):
    new = np.roll(history, -1)
    new[0] = np.float32(np.max(np.abs(x)))
    return new


class KerasFloat8Dense:
    """``Dense(units)`` with a float8 policy and SGD(lr), trained on ``sum(y * t)``."""

    def __init__(self, kernel, bias, c, length, lr):
        self.k, self.b, self.c, self.lr = kernel.copy(), bias.copy(), c, np.float32(lr)
        self.s = {r: np.float32(1) for r in ("x", "k", "g")}
        self.h = {r: np.zeros(length, np.float32) for r in ("x", "k", "g")}

    def step(self, x, t):
        c, s, h = self.c, self.s, self.h
        xc, kc = x.astype(c), self.k.astype(c)
        new_s = {"x": keras_scale(h["x"], s["x"], 448), "k": keras_scale(h["k"], s["k"], 448)}
        new_h = {"x": keras_history(xc, h["x"]), "k": keras_history(kc, h["k"])}
        xq, kq = keras_qdq(xc, s["x"], E4M3, c), keras_qdq(kc, s["k"], E4M3, c)
        mm = (xq.astype(np.float32) @ kq.astype(np.float32)).astype(c)
        bias = self.b.astype(c)
        if c is np.float32:
            bias = bias.astype(BF16).astype(np.float32)  # Keras's bias-add fusion cast
        y = mm + bias
        g = t.astype(c)  # d sum(y * t) / dy
        new_s["g"] = keras_scale(h["g"], s["g"], 57344)
        new_h["g"] = keras_history(g, h["g"])
        gq = keras_qdq(g, s["g"], E5M2, c)
        grad_k = (xq.astype(np.float32).T @ gq.astype(np.float32)).astype(c)
        self.grad_x = (gq.astype(np.float32) @ kq.astype(np.float32).T).astype(c)
        grad_b = np.sum(g.astype(np.float32), axis=0).astype(c)
        if c is np.float32:
            grad_b = grad_b.astype(BF16).astype(np.float32)
        self.k = self.k - self.lr * grad_k.astype(np.float32)
        self.b = self.b - self.lr * grad_b.astype(np.float32)
        self.s, self.h = new_s, new_h  # the optimizer overwrites them with their "gradients"
        return y


def _data(seed, c):
    rng = np.random.default_rng(seed)
    kernel = rng.normal(size=(6, 3)).astype(np.float32)
    bias = rng.normal(size=3).astype(np.float32)
    xs = [(rng.normal(size=(4, 6)) * 3.0 ** k).astype(c).astype(np.float32) for k in range(4)]
    ts = [(rng.normal(size=(4, 3)) * 1e-2).astype(c).astype(np.float32) for _ in range(4)]
    return kernel, bias, xs, ts


@pytest.mark.parametrize("source", sorted(COMPUTE))
def test_float8_dense_training_steps_are_keras3s_bit_for_bit(source):
    c = COMPUTE[source]
    kernel, bias, xs, ts = _data(0, c)
    policy = keras.dtype_policies.QuantizedFloat8DTypePolicy("float8", source, 3)
    layer = keras.layers.Dense(3, dtype=policy)  # a history of 3: the roll shows in 4 steps
    layer.build((None, 6))
    layer.kernel.assign(kernel)
    layer.bias.assign(bias)
    oracle = KerasFloat8Dense(kernel, bias, c, 3, lr=0.5)
    opt = keras.optimizers.SGD(0.5)
    for x, t in zip(xs, ts, strict=True):
        x_in = nn.Tensor(x, requires_grad=True)
        with nn.GradientTape() as tape:
            y = layer(x_in, training=True)
            loss = (y * nn.Tensor(t, fmt=y.fmt)).sum()
        grad_x, *grads = tape.gradient(loss, [x_in, *layer.trainable_variables])
        opt.apply_gradients(zip(grads, layer.trainable_variables, strict=True))
        expected = oracle.step(x, t)
        np.testing.assert_array_equal(grad_x.numpy(), oracle.grad_x.astype(np.float32))
        np.testing.assert_array_equal(y.numpy(), expected.astype(np.float32))
        assert np.isfinite(expected.astype(np.float32)).all()
        np.testing.assert_array_equal(layer.kernel.numpy(), oracle.k)
        np.testing.assert_array_equal(layer.bias.numpy(), oracle.b)
        for role, key in (("x", "inputs"), ("k", "kernel"), ("g", "outputs_grad")):
            assert getattr(layer, f"{key}_scale").numpy() == oracle.s[role], (role, key)
            np.testing.assert_array_equal(getattr(layer, f"{key}_amax_history").numpy(),
                                          oracle.h[role])
    assert oracle.s["g"] != 1 and oracle.h["x"][1] != 0  # the scales moved, the history rolled


def _quantized(units=3, inputs=6, seed=1):
    rng = np.random.default_rng(seed)
    layer = keras.layers.Dense(units)
    layer.build((None, inputs))
    layer.quantize("float8")
    return layer, rng.normal(size=(4, inputs)).astype(np.float32)


def _grads(layer, x, training, scale=1.0):
    with nn.GradientTape() as tape:
        loss = (layer(x, training=training) * np.float32(scale)).sum()
    return dict(zip([v.name.split("/")[-1] for v in layer.trainable_variables],
                    tape.gradient(loss, layer.trainable_variables), strict=True))


def test_quantize_float8_adds_kerass_six_trainable_variables_after_kernel_and_bias():
    layer, _ = _quantized()
    # Keras 3's Dense.variable_serialization_spec["float8"] order; all trainable, all float32
    assert [v.name.split("/")[-1] for v in layer.trainable_weights] == [
        "kernel", "bias", "inputs_scale", "inputs_amax_history", "kernel_scale",
        "kernel_amax_history", "outputs_grad_scale", "outputs_grad_amax_history"]
    assert layer.inputs_scale.shape == () and layer.inputs_amax_history.shape == (1024,)
    assert layer.dtype_policy.name == "float8_from_float32"


def test_inputs_and_kernel_scales_update_only_in_training_the_output_gradients_always():
    layer, x = _quantized()
    grads = _grads(layer, x, training=False)
    assert grads["inputs_scale"] is None and grads["kernel_amax_history"] is None
    # Keras's quantized_dequantize_outputs returns its new state whatever training is
    assert grads["outputs_grad_amax_history"].numpy()[0] == 1.0
    grads = _grads(layer, x, training=True)
    assert grads["inputs_amax_history"].numpy()[0] == np.abs(x).max()


def test_the_optimizer_stores_the_new_scaling_state_rather_than_stepping_it():
    layer, x = _quantized()
    grads = _grads(layer, x, training=True)
    opt = keras.optimizers.Adam(0.1)
    opt.apply_gradients(zip(grads.values(), layer.trainable_variables, strict=True))
    history = np.zeros(1024, np.float32)
    history[0] = np.abs(x).max()
    np.testing.assert_array_equal(layer.inputs_amax_history.numpy(), history)
    assert layer.inputs_scale.numpy() == 1.0  # the first step's scale: the history was zeros


def test_loss_scale_optimizer_leaves_the_scaling_state_unscaled_and_skipped_steps_keep_it():
    layer, x = _quantized()
    opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1), initial_scale=8.0)
    grads = _grads(layer, x, training=True, scale=8.0)  # the gradients of scale_loss(loss)
    opt.apply(list(grads.values()), layer.trainable_variables)
    assert layer.inputs_amax_history.numpy()[0] == np.abs(x).max()  # not divided by 8
    assert layer.outputs_grad_amax_history.numpy()[0] == 8.0
    before = [w.copy() for w in layer.get_weights()]
    grads = _grads(layer, 2 * x, training=True, scale=np.inf)
    opt.apply(list(grads.values()), layer.trainable_variables)
    assert opt.last_step_skipped  # Keras 3 skips the inner apply: no overwrite either
    for a, b in zip(layer.get_weights(), before, strict=True):
        np.testing.assert_array_equal(a, b)


def test_other_quantization_modes_raise_naming_float8_and_nns_recipes():
    layer, _ = _quantized()
    plain = keras.layers.Dense(2)
    plain.build((None, 3))
    for mode in ("int8", "int4"):
        with pytest.raises(ValueError, match=f"mode '{mode}' is not emulated by nn.*"
                                             "quantize\\('float8'\\).*dtype='mxfp8'"):
            plain.quantize(mode)
        with pytest.raises(ValueError, match=f"mode '{mode}' is not emulated.*float8"):
            keras.dtype_policies.QuantizedDTypePolicy(mode, "float32")
    with pytest.raises(ValueError, match="already runs under 'float8_from_float32'"):
        layer.quantize("float8")
