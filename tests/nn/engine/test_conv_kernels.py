"""nn.engine.conv_kernels.col2im_add, the compiled backward of ``patches``: the same fp32 (float64)
sums, in the same order, as the numpy loop it replaces (nn's kernels off), bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import nn
from nn.engine import rounding
from nn.functions.conv import patches


def input_gradient(x: np.ndarray, g: np.ndarray, kernel, strides, padding, fmt: str,
                   kernels: bool) -> np.ndarray:
    rounding.KERNELS_ENABLED = kernels  # (the nn conftest restores it after each test)
    t = nn.Tensor(x, fmt=fmt, requires_grad=True)
    patches(t, kernel, strides, padding).backward(g)
    return t.grad.data


@pytest.mark.parametrize("dtype,fmt", [(np.float32, "float32"), (np.float64, "float64")])
@pytest.mark.parametrize("kernel,strides,padding", [
    ((3, 3), (1, 1), "same"), ((3, 2), (2, 1), "valid"), ((2, 3), (1, 2), "same"),
    ((1, 1), (1, 1), "valid")])
def test_compiled_window_sums_equal_the_numpy_loop_bit_for_bit(dtype, fmt, kernel, strides,
                                                               padding):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 7, 6, 3)).astype(dtype)
    shape = patches(nn.Tensor(x, fmt=fmt), kernel, strides, padding).shape
    # magnitudes over 2^-20 .. 2^20, so that a different order of the sums changes their bits
    g = (rng.standard_normal(shape) * 2.0 ** rng.integers(-20, 20, shape)).astype(dtype)
    fast = input_gradient(x, g, kernel, strides, padding, fmt, kernels=True)
    slow = input_gradient(x, g, kernel, strides, padding, fmt, kernels=False)
    assert fast.dtype == slow.dtype == dtype
    np.testing.assert_array_equal(fast.view(f"u{fast.itemsize}"), slow.view(f"u{slow.itemsize}"))


def test_the_overlapping_sums_of_this_data_depend_on_their_order():
    """The data above can tell orders apart: summing the offsets backwards changes bits."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 7, 6, 3)).astype(np.float32)
    shape = patches(nn.Tensor(x), (3, 3), 1, "same").shape
    g = (rng.standard_normal(shape) * 2.0 ** rng.integers(-20, 20, shape)).astype(np.float32)
    forward = input_gradient(x, g, (3, 3), (1, 1), "same", "float32", kernels=True)
    full = np.zeros((2, 9, 8, 3), np.float32)
    for i in reversed(range(3)):
        for j in reversed(range(3)):
            full[:, i:i + 7, j:j + 6] += g[:, :, :, i, j]
    assert not np.array_equal(full[:, 1:8, 1:7], forward)


def test_nn_warmup_compiles_the_conv_kernels_for_both_carriers():
    from nn import warmup
    from nn.engine.conv_kernels import col2im_add, max_pool_window_grads

    dict(warmup.tasks())["nn conv kernels"]()
    for kernel in (col2im_add, max_pool_window_grads):
        carriers = {str(sig[0].dtype) for sig in kernel.signatures}
        assert {"float32", "float64"} <= carriers, kernel
