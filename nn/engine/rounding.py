"""The one place where nn rounds arrays to a format, and the gradient-shape helpers.

``round_array`` is every rounding in nn: the ops call it on their outputs (usually fused with
their arithmetic), the engine calls it on every gradient (``fit_gradient``). It uses nn's fused
numba kernel unless an ``fpsim.monitor`` is counting (then ``fpsim.round`` does the work, at the
named site) or ``KERNELS_ENABLED`` is False (the tests run the suite both ways).

This module sits below the Tensor and the engine: it works on numpy arrays and formats only.
Values of the float64 policy (format ``None``) are never rounded.
"""

from __future__ import annotations

import numpy as np

import fpsim
from fpsim import FP32, Format
from fpsim._kernels import NearestEvenF32
from fpsim.monitor import is_active as _monitor_is_active
from fpsim.quantize import nearest_even_f32_constants
from nn.engine import kernels as _kernels
from nn.engine.formats import contains

KERNELS_ENABLED = True  # tests flip this to check the numba paths against numpy + fpsim.round


def round_params(fmt: Format) -> NearestEvenF32 | None:
    """The constants of fpsim's float32 nearest-even kernel for ``fmt``, or None where that
    kernel does not apply (then ``fpsim.round`` does the work)."""
    return nearest_even_f32_constants(fmt, fmt.subnormals, fmt.overflow)


def needs_rounding(values_fmt: Format | None, fmt: Format | None) -> bool:
    """False when values of ``values_fmt`` already lie in ``fmt`` (rounding would be exact)."""
    return not contains(fmt, values_fmt)


def use_kernel(fmt: Format | None) -> bool:
    """True if a fused numba kernel may round to ``fmt`` (no monitor is counting events)."""
    return kernel_params(fmt) is not None


def kernel_params(fmt: Format | None) -> NearestEvenF32 | None:
    """``round_params(fmt)`` where a fused numba kernel may round to ``fmt`` (``use_kernel``),
    else None."""
    if not KERNELS_ENABLED or fmt is None or _monitor_is_active():
        return None
    return round_params(fmt)


def _is_fp32(fmt: Format) -> bool:
    return fmt is FP32 or (fmt.mantissa_bits == 23 and fmt == FP32)  # (== compares every field)


def round_array(
    x: np.ndarray, fmt: Format | None, *, site: str | None = None, out: np.ndarray | None = None
) -> np.ndarray:
    """``x`` rounded (nearest-even) to ``fmt`` in ``fmt``'s carrier; ``out`` may be ``x``.

    float32 -> FP32 and anything -> None (float64) are exact and return ``x`` (or fill ``out``).
    The numba kernel does the work unless an ``fpsim.monitor`` is counting, in which case
    ``fpsim.round(..., site=site)`` does, so that every rounding is counted at its site.
    """
    x = np.asarray(x)  # numpy returns scalars for 0-d operands
    result: np.ndarray
    if fmt is None:
        result = x if x.dtype == np.float64 else x.astype(np.float64)
    elif x.dtype == np.float32 and _is_fp32(fmt):
        result = x
    elif x.dtype != np.float32:
        # round float64 once from its own bits, then the carrier holds the value exactly
        result = np.asarray(fpsim.round(x, fmt, site=site), dtype=np.float32)
    elif (params := kernel_params(fmt)) is not None:
        src = x if x.flags.c_contiguous else np.ascontiguousarray(x)  # (keeps 0-d as 0-d)
        in_place: bool | None  # (None: out may share x's memory; the kernel checks)
        if out is not None and out.flags.c_contiguous:
            dst, in_place = out, (True if out is src else None)
        elif src is not x:  # a contiguous copy of x: round it in place
            dst, in_place = src, True
        else:
            dst, in_place = np.empty(x.shape, np.float32), False
        _kernels.round_into(src.reshape(-1), dst.reshape(-1), params, in_place=in_place)
        result = dst
    else:
        direct = out is not None and out.flags.c_contiguous
        result = np.asarray(fpsim.round(x, fmt, site=site, out=out if direct else None))
    if out is not None and result is not out:
        out[...] = result
        return out
    return result


def last_axis_sum(a: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray | None:
    """``a.sum(axis=axes, keepdims=keepdims)`` through nn's row-sum kernel (numpy's pairwise
    order, bit for bit) when ``axes`` is the last axis of C-contiguous float32 data and nn's
    kernels are on; else (or on a NaN row) None."""
    if not (KERNELS_ENABLED and a.ndim and axes == (a.ndim - 1,) and a.shape[-1]
            and a.dtype == np.float32 and a.flags.c_contiguous):
        return None
    out = _kernels.sum_last_axis(a)
    return out if out is None or keepdims else out.reshape(a.shape[:-1])


def sum_to_shape(data: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum a broadcast gradient back to ``shape`` (numpy's float32 pairwise sum: fp32 work)."""
    if data.shape == shape:
        return data
    lead = data.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, n in enumerate(shape) if n == 1 and data.shape[i + lead] != 1
    )
    if not axes:
        return data.reshape(shape)
    fast = last_axis_sum(data, axes, True)  # (the kernel, bit for bit numpy's sum)
    return (data.sum(axis=axes, keepdims=True) if fast is None else fast).reshape(shape)


def fit_array(
    data: np.ndarray, values_fmt: Format | None, shape: tuple[int, ...], fmt: Format | None,
    dtype: np.dtype, site: str,
) -> np.ndarray:
    """A gradient array summed to ``shape`` and rounded to ``fmt`` (the gradient rule).

    ``values_fmt`` is the format ``data`` already lies in (no rounding when ``fmt`` holds it
    and the carrier ``dtype`` matches).
    """
    if data.shape != shape:
        if np.broadcast_shapes(data.shape, shape) != data.shape:
            raise ValueError(
                f"gradient of shape {data.shape} does not reduce to the tensor's shape {shape}"
            )
        data = sum_to_shape(data, shape)
        values_fmt = FP32 if values_fmt is not None else None  # a sum leaves values_fmt
    if needs_rounding(values_fmt, fmt) or data.dtype != dtype:
        data = round_array(data, fmt, site=site)
    return data
