"""nn.fp8.Float8BlockScaling: 1x128 and 128x128 fp8 tiles with power-of-two float32 scales
(Transformer Engine's Float8BlockScaling recipe), checked against fpsim.blockwise and a
hand-written Linear."""

from __future__ import annotations

import numpy as np
import pytest

import nn
from fpsim.blockwise import quantize_blockwise
from nn.fp8 import Float8BlockScaling
from nn.functions.linalg import linear


def _data(shape, seed, spread=3.0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * np.exp(rng.uniform(-spread, spread, shape))
    return x.astype(np.float32)


@pytest.mark.parametrize("shape", [(3, 300), (2, 128), (5, 7)])
def test_activation_tiles_equal_fpsim_quantize_blockwise_1x128(shape):
    x = _data(shape, 0)
    q, inv = Float8BlockScaling().quantize(x, "lin/Linear/input", "forward", axis=-1)
    assert inv == 1.0
    np.testing.assert_array_equal(q, quantize_blockwise(x, "e4m3fn", (1, 128)))
    # the backward's copy runs along the other axis: 128x1 tiles
    qt, _ = Float8BlockScaling().quantize(x, "lin/Linear/input_t", "forward", axis=-2)
    np.testing.assert_array_equal(qt, quantize_blockwise(x.T, "e4m3fn", (1, 128)).T)


@pytest.mark.parametrize("shape", [(300, 200), (128, 128), (5, 130)])
def test_weight_tiles_equal_fpsim_quantize_blockwise_128x128(shape):
    w = _data(shape, 1)
    recipe = Float8BlockScaling()
    q, _ = recipe.quantize(w, "lin/Linear/weight", "forward", axis=-2)
    np.testing.assert_array_equal(q, quantize_blockwise(w, "e4m3fn", (128, 128)))
    q_t, _ = recipe.quantize(w, "lin/Linear/weight_t", "forward", axis=-1)
    np.testing.assert_array_equal(q_t, q)  # a 2-D tile is the same for the transpose


def test_hybrid_gradients_are_e5m2_tiles():
    g = _data((4, 256), 2)
    q, _ = Float8BlockScaling("hybrid").quantize(g, "lin/Linear/grad_output", "backward")
    np.testing.assert_array_equal(q, quantize_blockwise(g, "e5m2", (1, 128)))


def _close(got, want):
    """fp32 accumulation against a float64 oracle: within 1e-6 of the result's largest value."""
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * np.abs(want).max())


def test_a_linear_forward_and_backward_equal_the_hand_written_tiles():
    x, w, b = _data((6, 200), 3), _data((200, 130), 4, 1.0), _data((130,), 5, 1.0)
    g = _data((6, 130), 6)
    tx, tw = nn.Tensor(x, requires_grad=True), nn.Tensor(w, requires_grad=True)
    tb = nn.Tensor(b, requires_grad=True)
    with nn.fp8_autocast(Float8BlockScaling()):
        out = linear(tx, tw, tb)
    (out * nn.Tensor(g)).sum().backward()
    f64 = np.float64
    qx, qw = quantize_blockwise(x, "e4m3fn", (1, 128)), quantize_blockwise(w, "e4m3fn",
                                                                           (128, 128))
    _close(out.data, qx.astype(f64) @ qw + b)
    # dgrad: g (1x128 along its last axis) @ w^T (the same 128x128 tiles)
    qg = quantize_blockwise(g, "e4m3fn", (1, 128))
    _close(tx.grad.data, qg.astype(f64) @ qw.T)
    # wgrad: x^T @ g, both tiled along the batch axis (128x1 tiles)
    qxt = quantize_blockwise(x.T, "e4m3fn", (1, 128))
    qgt = quantize_blockwise(g.T, "e4m3fn", (1, 128))
    _close(tw.grad.data, qxt.astype(f64) @ qgt.T)
    _close(tb.grad.data, g.astype(f64).sum(0))


def test_the_tile_maximum_never_clips_with_power_of_two_scales():
    x = np.float32([[500.0] + [1.0] * 127])
    q, _ = Float8BlockScaling().quantize(x, "t/input", "forward")
    assert q[0, 0] == 512.0 and q[0, 1] == 1.0  # scale 0.5: 500 -> 250 -> 256 in E4M3


def test_without_power_of_two_scales_the_scale_is_448_over_amax():
    x = np.float32([[3.0, 1.0]])
    q, _ = Float8BlockScaling(power_2_scales=False).quantize(x, "t/input", "forward")
    s = np.float32(448.0) / np.float32(3.0)
    elements = np.float32([448.0, 144.0])  # 3s = 448; 1s = 149.33 -> 144 (E4M3 step 16)
    np.testing.assert_array_equal(q[0], elements * (np.float32(1) / s))


@pytest.mark.parametrize("kwargs,match", [
    ({"x_block_scaling_dim": 3}, "x_block_scaling_dim must be 1"),
    ({"x_block_scaling_dim": 2}, "x_block_scaling_dim and w_block_scaling_dim are both 2"),
    ({"fp8_format": "e5m2"}, "fp8_format must be one of"),
    ({"amax_epsilon": -1.0}, "amax_epsilon"),
])
def test_bad_tilings_are_refused_naming_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Float8BlockScaling(**kwargs)


def test_the_fp8_blockwise_policy_trains_a_dense_model_with_its_tiles():
    rng = np.random.default_rng(7)
    x, y = rng.normal(size=(32, 20)).astype(np.float32), rng.integers(0, 3, size=32)
    model = nn.Sequential([nn.Dense(16, activation="relu", dtype="fp8_blockwise"),
                           nn.Dense(3, dtype="float32")])
    model.compile(optimizer=nn.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
    model.fit(x, y, batch_size=16, epochs=1, seed=0, verbose=0)
    recipe = model.layers[0].policy.recipe
    assert isinstance(recipe, Float8BlockScaling)
    names = {r.name.rpartition("/")[2] for r in recipe.log.records}
    # the first layer needs only its weight's gradient: x^T @ g, both tiled along the batch
    assert names == {"input", "weight", "input_t", "grad_output_t"}
