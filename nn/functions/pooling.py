"""Max pooling as one op over strided views of the input: no copy of the windows.

``max_pool2d(x, pool_size, strides, padding)`` equals ``max(patches(x, ..., fill=-inf),
axis=(3, 4))`` (nn.functions.conv.patches, then nn.functions.max), the composition the pooling
layer used before, value for value and rounding for rounding; it is faster because the forward
never materialises the ``(N, OH, OW, kh, kw, C)`` windows and the backward is one compiled pass
instead of a chain of broadcast, multiply and divide ops.

- Forward: the maximum over the ``kh * kw`` window offsets, each a strided view of the
  (-inf padded) input, so padding never wins. Exact; the result is labelled FP32, as every
  reduction's (the layer casts it to its compute format, as before).
- Backward: each window's gradient ``g`` is shared equally by its tied maxima: a cell gets
  ``(g / count) * hit`` in fp32 (equal, bit for bit and NaN for NaN, to the former
  ``(g * hit) / count``), rounded to the input's format at the site the former ``Max`` op
  rounded it (``<scope>/grad_Max_input0``, so monitor tables keep their rows); overlapping
  windows then add their shares in fp32 and the engine rounds each pixel's sum once to the
  input's format, as ``patches``'s backward does. A numba kernel
  (nn.engine.conv_kernels.max_pool_window_grads) computes the shares; with nn's kernels off a numpy
  loop over the window offsets gives the same bits.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from fpsim import Format
from nn.engine import rounding, sites
from nn.engine.autograd import Context, Function
from nn.engine.conv_kernels import col2im_add, max_pool_window_grads
from nn.engine.formats import at_least_fp32
from nn.engine.rounding import round_array
from nn.engine.tensor import Tensor
from nn.functions.conv import Pads, padded, pair, window_geometry

# Where each window cell's share of the gradient is rounded: the site name of the
# patches + max composition this op replaces, so that telemetry tables keep their rows.
WINDOW_GRAD_SITE = sites.op_input_grad("Max", 0)


def _offsets(a: np.ndarray, kernel: tuple[int, int], strides: tuple[int, int],
             out_hw: tuple[int, int]) -> Iterator[np.ndarray]:
    """For each window offset ``(i, j)`` in row-major order, the ``(N, OH, OW, C)`` strided
    view of ``a`` holding cell ``(i, j)`` of every window."""
    (kh, kw), (sh, sw), (oh, ow) = kernel, strides, out_hw
    for i in range(kh):
        for j in range(kw):
            yield a[:, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw, :]


class MaxPool2D(Function):
    """x (N, H, W, C) -> the maximum of each window (N, OH, OW, C), exact, labelled FP32.
    Backward: each window's gradient shared equally by its tied maxima."""

    @staticmethod
    def output_format(*fmts: Format | None, **params: Any) -> Format | None:
        return at_least_fp32(fmts[0])

    @staticmethod
    def forward(ctx: Context, x: np.ndarray, kernel: tuple[int, int] = (1, 1),
                strides: tuple[int, int] = (1, 1), out_hw: tuple[int, int] = (1, 1),
                pads: Pads = ((0, 0), (0, 0))) -> np.ndarray:
        x = padded(x, pads, -np.inf)
        ctx.saved.update(padded=x, kernel=kernel, strides=strides, out_hw=out_hw, pads=pads)
        cells = _offsets(x, kernel, strides, out_hw)
        out = np.array(next(cells))  # a fresh contiguous copy of the first cell
        for cell in cells:
            np.maximum(out, cell, out=out)  # NaN propagates, as in np.max
        return out

    @staticmethod
    def backward(ctx: Context, grad: Tensor) -> Tensor:
        (x,) = ctx.inputs
        xp = ctx.saved["padded"]
        geometry = tuple(ctx.saved[k] for k in ("kernel", "strides", "out_hw"))
        (top, bottom), (left, right) = ctx.saved["pads"]
        g = grad.data
        site = ctx.site(WINDOW_GRAD_SITE)
        if rounding.KERNELS_ENABLED and g.flags.c_contiguous and g.dtype == xp.dtype:
            full = _window_grads_compiled(xp, ctx.out, g, geometry, x.fmt, site)
        else:
            full = _window_grads_numpy(xp, ctx.out, g, geometry, x.fmt, site)
        dx = full[:, top:top + x.shape[1], left:left + x.shape[2], :]
        # labelled FP32 so that the engine rounds each pixel's sum once to x's format
        return Tensor._make(np.ascontiguousarray(dx), at_least_fp32(x.fmt))


def _window_grads_compiled(xp: np.ndarray, out: np.ndarray, g: np.ndarray, geometry: tuple,
                           fmt: Format | None, site: str) -> np.ndarray:
    """Each window cell's share, ``(N, OH, OW, kh, kw, C)``, in one compiled pass; rounded to
    ``fmt`` as one array; then added onto the (padded) pixels by ``patches``'s backward
    kernel: the same values, sums and roundings as ``_window_grads_numpy``."""
    (kh, kw), (sh, sw), (oh, ow) = geometry
    n, c = xp.shape[0], xp.shape[3]
    v = np.empty((n, oh, ow, kh, kw, c), dtype=xp.dtype)
    max_pool_window_grads(xp, out, g, sh, sw, xp.dtype.type(1), v)
    round_array(v, fmt, site=site, out=v)
    full = np.zeros(xp.shape, dtype=xp.dtype)
    col2im_add(v, full, sh, sw)
    return full


def _window_grads_numpy(xp: np.ndarray, out: np.ndarray, g: np.ndarray, geometry: tuple,
                        fmt: Format | None, site: str) -> np.ndarray:
    """The (padded) input's gradient, one window offset at a time in numpy (nn's kernels off,
    or a carrier the kernel was not given)."""
    hits = [cell == out for cell in _offsets(xp, *geometry)]
    count = hits[0].astype(np.uint8 if len(hits) < 256 else np.uint32)
    for hit in hits[1:]:
        np.add(count, hit, out=count)
    with np.errstate(divide="ignore", invalid="ignore"):  # a NaN window has no hit
        share = g / count  # fp32 (float64 under the float64 policy)
    full = np.zeros(xp.shape, dtype=g.dtype)
    (kh, kw), (sh, sw) = geometry[:2]
    overlap = kh > sh or kw > sw
    v = np.empty_like(share)
    for hit, cell in zip(hits, _offsets(full, *geometry), strict=True):
        with np.errstate(invalid="ignore"):  # inf * 0 is NaN, as (inf * 0) / count was
            np.multiply(share, hit, out=v)
        round_array(v, fmt, site=site, out=v)
        # fp32 sums where windows overlap; elsewhere 0 + v, written without reading 0
        np.add(cell if overlap else v, v if overlap else 0.0, out=cell)
    return full


def max_pool2d(x: Tensor, pool_size: Any, strides: Any = None, padding: str = "valid") -> Tensor:
    """The maximum of each ``pool_size`` window of ``x`` (N, H, W, C), exact, labelled FP32
    (float64 under the float64 policy); ``strides`` defaults to ``pool_size``; ``padding`` is
    TensorFlow's "valid" or "same" (padded cells never win)."""
    if x.ndim != 4:
        raise ValueError(f"max_pool2d needs input of shape (batch, height, width, channels), "
                         f"got shape {x.shape}")
    kernel = pair("pool_size", pool_size)
    stride = kernel if strides is None else pair("strides", strides)
    out_hw, pads = window_geometry(x.shape, kernel, stride, padding)
    return MaxPool2D.apply(x, kernel=kernel, strides=stride, out_hw=out_hw, pads=pads)
