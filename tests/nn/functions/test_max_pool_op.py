"""nn.functions.pooling.max_pool2d, the one-op max pooling behind MaxPooling2D: against the
windows' definition (a loop over windows in float64) and, bit for bit, against the
composition it replaced (patches with -inf padding, then max over the window axes)."""

from __future__ import annotations

import numpy as np
import pytest

import fpsim
import nn
from nn import functions as F
from nn import layers
from nn.engine import rounding
from nn.engine.autograd import name_scope
from nn.functions.conv import patches
from nn.functions.pooling import max_pool2d

GEOMETRIES = [((2, 2), None, "valid"), ((2, 2), None, "same"), ((3, 3), (2, 2), "same"),
              ((3, 2), (1, 2), "valid"), ((2, 3), (1, 1), "same")]


def tied_fp16_input(seed: int, shape: tuple[int, ...] = (2, 7, 6, 3)) -> np.ndarray:
    """fp16 values with many tied maxima (a relu's zeros, a few small integers), an inf and
    a NaN."""
    rng = np.random.default_rng(seed)
    x = np.maximum(rng.integers(-3, 3, shape), 0).astype(np.float32)
    x[0, 0, 0, 0], x[1, 3, 2, 1] = np.inf, np.nan
    return x


def composition(x: nn.Tensor, pool: tuple[int, int], strides: tuple[int, int] | None,
                padding: str) -> nn.Tensor:
    """The former MaxPooling2D: every window copied out, then the exact max over it."""
    return F.max(patches(x, pool, pool if strides is None else strides, padding,
                         fill=-np.inf), axis=(3, 4))


def grad_of(op, x: np.ndarray, fmt: str, upstream: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = nn.Tensor(x, fmt=fmt, requires_grad=True)
    t.grad_site = "conv/grad_activation"  # as the output of a layer before the pooling
    y = F.cast(op(t), fmt)  # as the layer does: the FP32-labelled max cast to its format
    y.backward(upstream)
    return y.data, t.grad.data


def same_bits(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("kernels", [True, False], ids=["numba", "numpy"])
@pytest.mark.parametrize("pool,strides,padding", GEOMETRIES)
@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # the composition's inf * 0
def test_max_pool_equals_patches_then_max_bit_for_bit_with_ties_inf_and_nan(pool, strides,
                                                                            padding, kernels):
    rounding.KERNELS_ENABLED = kernels  # (the nn conftest restores it after each test)
    x = tied_fp16_input(0)
    out_shape = composition(nn.Tensor(x), pool, strides, padding).shape
    # upstream gradients that round to fp16 subnormals and zero once shared among ties
    upstream = (np.random.default_rng(1).standard_normal(out_shape) * 2.0**-23).astype(
        np.float16).astype(np.float32)
    upstream[0, 0, 0, 0] = np.inf
    new = grad_of(lambda t: max_pool2d(t, pool, strides, padding), x, "float16", upstream)
    old = grad_of(lambda t: composition(t, pool, strides, padding), x, "float16", upstream)
    for a, b in zip(new, old, strict=True):
        same_bits(a, b)


def test_tied_maxima_share_each_windows_gradient_equally_by_the_definition():
    x = tied_fp16_input(2)[..., :2].astype(np.float64)
    x[np.isnan(x) | np.isinf(x)] = 5.0
    pool, s = (3, 2), (1, 2)  # overlapping rows: a pixel collects shares from two windows
    g = np.random.default_rng(3).standard_normal((2, 5, 3, 2))
    t = nn.Tensor(x, fmt="float64", requires_grad=True)
    y = max_pool2d(t, pool, s)
    y.backward(g)
    want_y, want_dx = np.zeros_like(g), np.zeros_like(x)
    for n in range(2):
        for i in range(5):
            for j in range(3):
                for c in range(2):
                    win = x[n, i * s[0]:i * s[0] + pool[0], j * s[1]:j * s[1] + pool[1], c]
                    want_y[n, i, j, c] = win.max()
                    hit = win == win.max()
                    want_dx[n, i * s[0]:i * s[0] + pool[0], j * s[1]:j * s[1] + pool[1], c] += (
                        hit * g[n, i, j, c] / hit.sum())
    np.testing.assert_array_equal(y.data, want_y)
    np.testing.assert_allclose(t.grad.data, want_dx, rtol=1e-15, atol=0)


@pytest.mark.parametrize("kernels", [True, False], ids=["numba", "numpy"])
def test_max_pool_counts_the_same_rounding_events_at_the_same_sites_as_patches_then_max(
        kernels):
    x = tied_fp16_input(4)
    x[np.isnan(x) | np.isinf(x)] = 1.0
    upstream = np.full((2, 4, 3, 3), 2.0**-24, np.float32)  # one fp16 subnormal, shared by ties

    def counts(op) -> dict:
        with name_scope("pool"), fpsim.monitor() as m:
            grad_of(op, x, "float16", upstream)
        return m.counts

    rounding.KERNELS_ENABLED = kernels
    new = counts(lambda t: max_pool2d(t, 2, None, "same"))
    old = counts(lambda t: composition(t, (2, 2), None, "same"))
    assert new == old
    assert new["pool/grad_Max_input0"]["underflow"] > 0
    assert new["conv/grad_activation"]["elements"] == x.size


def test_max_pooling_layer_under_mixed_float16_casts_the_exact_maximum_to_fp16():
    x = tied_fp16_input(5)
    with nn.policy_scope("mixed_float16"):
        y = layers.MaxPooling2D(padding="same")(x)
    assert y.fmt == fpsim.FP16
    ref = composition(nn.Tensor(x.astype(np.float16).astype(np.float32), fmt="float16"), (2, 2),
                      None, "same")
    same_bits(y.data, ref.data)


def test_max_pool2d_rejects_input_without_four_axes_and_windows_that_do_not_fit():
    with pytest.raises(ValueError, match=r"max_pool2d needs input of shape .*\(2, 3\)"):
        max_pool2d(nn.Tensor(np.zeros((2, 3), np.float32)), 2)
    with pytest.raises(ValueError, match="does not fit"):
        max_pool2d(nn.Tensor(np.zeros((1, 2, 2, 1), np.float32)), 3)


@pytest.mark.parametrize("k", [2, 3])
def test_every_pattern_of_signed_zeros_gives_the_zero_np_max_gives(k):
    import itertools

    patterns = np.array(list(itertools.product([0.0, -0.0], repeat=k * k)), np.float32)
    x = np.repeat(patterns.reshape(-1, k, k, 1), 4, axis=3)
    y = max_pool2d(nn.Tensor(x), k).data
    want = np.max(x.reshape(len(patterns), k * k, 4), axis=1)  # numpy's order: row-major cells
    same_bits(y.reshape(want.shape), want)
