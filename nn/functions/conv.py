"""2-D convolution as im2col + the dense layer's matmul, and the patch op behind pooling.

Layout is channels-last (Keras): images ``(N, H, W, C)``, kernels ``(kh, kw, C, filters)``.

- ``patches`` copies every ``kh x kw`` window into a row, ``(N, OH, OW, kh, kw, C)``: exact (it
  only moves values, padding cells hold ``fill``). Its backward adds each window's gradient back
  onto the pixels it came from, one kernel offset at a time, summing in fp32 (a numba kernel,
  nn.engine.conv_kernels.col2im_add; with nn's kernels off, the same sums as a numpy loop over the
  ``kh * kw`` offsets); the engine then rounds each pixel's sum once to the input's format.
- ``conv2d`` multiplies the ``(N*OH*OW, kh*kw*C)`` patch matrix by the kernel reshaped to
  ``(kh*kw*C, filters)`` with ``linear`` (the op Dense uses): compute-format inputs, products
  accumulated in fp32 with the bias, one rounding to the output format. With
  ``accumulator=`` another format (e.g. "float16"), the products are accumulated in that format
  instead (nn.functions.accumulate), to show what a narrow accumulator does.

Padding follows TensorFlow: ``"valid"`` uses no padding, ``out = ceil((in - k + 1) / s)``;
``"same"`` gives ``out = ceil(in / s)`` and pads ``max((out - 1) s + k - in, 0)`` cells, the
odd one at the bottom/right. Explicit integer padding (PyTorch's ``Conv2d``) pads both sides.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nn.engine import rounding
from nn.engine.autograd import Context, Function
from nn.engine.conv_kernels import col2im_add
from nn.engine.formats import FormatLike, at_least_fp32
from nn.engine.tensor import Tensor
from nn.functions.accumulate import accumulated_linear
from nn.functions.linalg import linear
from nn.functions.shape import reshape

Pads = tuple[tuple[int, int], tuple[int, int]]
PADDINGS = ("valid", "same")


def output_size(size: int, kernel: int, stride: int, padding: str | int) -> tuple[int, int, int]:
    """``(out, pad_before, pad_after)`` along one axis for TF's ``"valid"``/``"same"`` or an
    explicit symmetric padding ``int`` (PyTorch)."""
    if padding == "same":
        out = -(-size // stride)
        total = max((out - 1) * stride + kernel - size, 0)
        return out, total // 2, total - total // 2
    if padding == "valid":
        return max(-(-(size - kernel + 1) // stride), 0), 0, 0
    if isinstance(padding, int) and not isinstance(padding, bool) and padding >= 0:
        return max((size + 2 * padding - kernel) // stride + 1, 0), padding, padding
    raise ValueError(f"padding must be 'valid', 'same' or an integer >= 0, got {padding!r}")


def window_geometry(shape: tuple[int, ...], kernel: tuple[int, int], strides: tuple[int, int],
                    padding: str | int) -> tuple[tuple[int, int], Pads]:
    """``((OH, OW), ((top, bottom), (left, right)))`` for windows over an (N, H, W, C) shape,
    or a ValueError if no window fits."""
    oh, top, bottom = output_size(shape[1], kernel[0], strides[0], padding)
    ow, left, right = output_size(shape[2], kernel[1], strides[1], padding)
    if oh < 1 or ow < 1:
        raise ValueError(f"a {kernel[0]}x{kernel[1]} window with strides {strides} and padding "
                         f"{padding!r} does not fit an input of shape {shape}")
    return (oh, ow), ((top, bottom), (left, right))


def padded(x: np.ndarray, pads: Pads, fill: float) -> np.ndarray:
    """``x`` (N, H, W, C) with ``pads`` cells of ``fill`` around H and W (``x`` itself for no
    padding): what ``np.pad`` does, without its overhead of some 20 microseconds a call."""
    (top, bottom), (left, right) = pads
    if not (top or bottom or left or right):
        return x
    n, h, w, c = x.shape
    out = np.full((n, h + top + bottom, w + left + right, c), fill, dtype=x.dtype)
    out[:, top:top + h, left:left + w, :] = x
    return out


class Patches(Function):
    """x (N, H, W, C) -> windows (N, OH, OW, kh, kw, C); exact. Backward: fp32 scatter-add."""

    @staticmethod
    def output_format(*fmts: Any, **params: Any) -> Any:
        return fmts[0]

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, kernel: tuple[int, int] = (1, 1),
                strides: tuple[int, int] = (1, 1), out_hw: tuple[int, int] = (1, 1),
                pads: Pads = ((0, 0), (0, 0)), fill: float = 0.0) -> np.ndarray:
        ctx.saved.update(kernel=kernel, strides=strides, out_hw=out_hw, pads=pads)
        x = padded(x, pads, fill)
        n, _, _, c = x.shape
        (kh, kw), (sh, sw), (oh, ow) = kernel, strides, out_hw
        s = x.strides
        view = np.lib.stride_tricks.as_strided(
            x, (n, oh, ow, kh, kw, c), (s[0], s[1] * sh, s[2] * sw, s[1], s[2], s[3]),
            writeable=False)
        return np.ascontiguousarray(view)

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        (x,) = ctx.inputs
        (kh, kw), (sh, sw), (oh, ow) = (ctx.saved[k] for k in ("kernel", "strides", "out_hw"))
        (top, bottom), (left, right) = ctx.saved["pads"]
        n, h, w, c = x.shape
        g = grad.data
        acc_dtype = np.float64 if g.dtype == np.float64 else np.float32  # fp32 sums
        full = np.zeros((n, h + top + bottom, w + left + right, c), dtype=acc_dtype)
        if rounding.KERNELS_ENABLED and g.dtype == acc_dtype and g.flags.c_contiguous:
            col2im_add(g, full, sh, sw)  # the loop below, in one compiled pass
        else:
            for i in range(kh):
                for j in range(kw):
                    rows = slice(i, i + sh * (oh - 1) + 1, sh)
                    cols = slice(j, j + sw * (ow - 1) + 1, sw)
                    full[:, rows, cols, :] += g[:, :, :, i, j]
        dx = full[:, top:top + h, left:left + w, :]
        # fp32 sums: labelled FP32 so the engine rounds them once to x's format
        return Tensor._make(np.ascontiguousarray(dx), at_least_fp32(grad.fmt))


def pair(name: str, value: Any) -> tuple[int, int]:
    """An int or a pair of ints >= 1 as a pair, else a ValueError naming ``name``."""
    items = (value, value) if isinstance(value, (int, np.integer)) else value
    if (isinstance(items, (tuple, list)) and len(items) == 2
            and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1
                    for v in items)):
        return int(items[0]), int(items[1])
    raise ValueError(f"{name} must be an integer >= 1 or a pair of them, got {value!r}")


def patches(x: Tensor, kernel_size: Any, strides: Any = 1, padding: str | int = "valid",
            fill: float = 0.0) -> Tensor:
    """The ``kh x kw`` windows of ``x`` (N, H, W, C) as ``(N, OH, OW, kh, kw, C)`` (exact)."""
    if x.ndim != 4:
        raise ValueError(f"patches needs input of shape (batch, height, width, channels), got "
                         f"shape {x.shape}")
    kernel, stride = pair("kernel_size", kernel_size), pair("strides", strides)
    out_hw, pads = window_geometry(x.shape, kernel, stride, padding)
    return Patches.apply(x, kernel=kernel, strides=stride, out_hw=out_hw, pads=pads, fill=fill)


def conv2d(x: Tensor, kernel: Tensor, bias: Tensor | None = None, strides: Any = 1,
           padding: str | int = "valid", activation: str | None = None,
           accumulator: FormatLike = None) -> Tensor:
    """Channels-last convolution (cross-correlation, as every framework): im2col, then one
    matmul with fp32 accumulation (or ``accumulator``'s format) and one rounding.

    ``activation`` is None or "relu" (fused, as in Dense).
    """
    if kernel.ndim != 4:
        raise ValueError(f"conv2d: kernel must have shape (kh, kw, in, out), got {kernel.shape}")
    kh, kw, cin, cout = kernel.shape
    if x.ndim != 4 or x.shape[-1] != cin:
        raise ValueError(f"conv2d: input of shape {x.shape} does not fit a kernel of shape "
                         f"{kernel.shape} (expected (batch, height, width, {cin}))")
    cols = patches(x, (kh, kw), strides, padding)
    n, oh, ow = cols.shape[:3]
    rows = reshape(cols, (n * oh * ow, kh * kw * cin))
    w = reshape(kernel, (kh * kw * cin, cout))
    if w is not kernel:  # the kernel's gradient is rounded (and counted) at the kernel's site
        w.grad_site = kernel.grad_site
    if accumulator is None:
        y = linear(rows, w, bias, activation=activation)
    else:
        y = accumulated_linear(rows, w, bias, accumulator, activation=activation)
    return reshape(y, (n, oh, ow, cout))


def conv_output_shape(shape: tuple[int | None, ...], kernel_size: Any, strides: Any,
                      padding: str | int, filters: int) -> tuple[int | None, ...]:
    """The output shape of ``conv2d`` for an input shape (batch may be None)."""
    kernel, stride = pair("kernel_size", kernel_size), pair("strides", strides)
    oh = output_size(int(shape[1] or 0), kernel[0], stride[0], padding)[0]
    ow = output_size(int(shape[2] or 0), kernel[1], stride[1], padding)[0]
    return (shape[0], oh, ow, filters)


