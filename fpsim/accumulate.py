"""Accumulation models for sums and matrix products, on plain float arrays.

Hardware computes a dot product as exact (or fused) products added into an accumulator of some
format, usually wider than the inputs (tensor cores: fp16/bf16 products, fp32 accumulator).
The model here, used by ``fpsim.sum``, ``fpsim.dot``, ``fpsim.matmul``, ``EmulatedArray.sum``
and ``@``:

1. products are exact: every fpsim value has a significand of at most 24 bits and lies within
   float32's range, so a product of two of them has at most 48 significant bits and is exact in
   float64 (this covers every format, FP32 included);
2. the accumulator holds a value of the ``accumulate`` format and is rounded to it after every
   addition, each addition correctly rounded (the exact sum, made exact by TwoSum and
   round-to-odd into float64, rounded once; see ``fpsim._kernels``);
3. ``order`` fixes which additions happen: ``"sequential"`` is ``s = x0; s = rnd(s + xk)`` left
   to right; ``"pairwise"`` adds adjacent pairs level by level (a balanced tree, error growing
   with log2(n) instead of n);
4. the caller rounds the accumulator once more, to the result format.

``"blas"`` (for products only) hands the float32 carrier arrays to numpy's float32 matmul. That
is the same model, fp32 accumulation of exact products, in the BLAS library's own (blocked,
vectorised) order, and is allowed only where it is that model: the accumulate format is FP32
under nearest-even, and every product is exact in float32 (see ``blas_products_exact``). Its
result then lies within ``gamma(k) * (|A| @ |B|)`` of the exact product, ``gamma(k) = k u /
(1 - k u)`` with ``u = 2^-24``, the classical bound for k-term float32 accumulation in any order;
the tests check that bound. ``"auto"`` takes ``"blas"`` where allowed and ``"sequential"``
otherwise.

Other accumulations (aligned fixed-point groups, limited-precision accumulators promoted every
N products, chunked sums) are the models of ``fpsim.accumulators``: wherever a Format is taken
as ``acc`` here, a model may stand instead; it fixes its own order and roundings, so ``order``
must then be left at its default and ``mode`` at "nearest_even".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fpsim import _kernels
from fpsim import accumulators as _models
from fpsim._validate import generator
from fpsim.catalog import FP32
from fpsim.formats import Format
from fpsim.monitor import is_active as monitor_is_active
from fpsim.monitor import record_sums
from fpsim.quantize import _seed, format_constants
from fpsim.rounding import RoundingMode, get_mode, resolve_overflow

PRESETS = _models.PRESETS  # accumulator models by name (their home: fpsim.accumulators)

SUM_ORDERS = ("sequential", "pairwise")
MATMUL_ORDERS = ("auto", "blas", "sequential", "pairwise")

_F64_CARRIER = _kernels.carrier_constants(np.dtype(np.float64))
_FLOAT32_EMIN = -126


Accumulator = Format | _models.Model


def _check_model(acc: Accumulator, order: str, default_orders: tuple[str, ...], mode: object
                 ) -> bool:
    """True when acc is a model (then order and mode must be left at their defaults)."""
    if not _models.is_model(acc):
        return False
    if order not in default_orders:
        raise ValueError(f"order={order!r} does not apply to the accumulator model {acc!r}: a "
                         f"model fixes its own order (leave order at its default)")
    if get_mode(mode) is not RoundingMode.NEAREST_EVEN:  # type: ignore[arg-type]
        raise ValueError(f"mode={mode!r} does not apply to the accumulator model {acc!r}: a "
                         f"model has its own rounding modes (set them on the model)")
    return True


def _check_order(order: str, allowed: tuple[str, ...]) -> str:
    if order not in allowed:
        raise ValueError(f"order must be one of {allowed}, got {order!r}")
    return order


def _kernel_args(acc: Format, mode: str | RoundingMode, rng: object) -> tuple:
    mode = get_mode(mode)
    f = format_constants(acc, np.dtype(np.float64), acc.subnormals, resolve_overflow(acc, None))
    seed = _seed(rng) if mode is RoundingMode.STOCHASTIC else 0
    return _kernels.mode_bits(mode), seed, _F64_CARRIER, f


def gamma(k: int, unit_roundoff: float = 2.0**-24) -> float:
    """The bound factor ``k u / (1 - k u)`` of a k-term accumulation in any order."""
    ku = k * unit_roundoff
    return ku / (1 - ku) if ku < 1 else float("inf")


def sum_rows(
    x: np.ndarray, acc: Accumulator, order: str = "sequential", mode: str = "nearest_even",
    rng: object = None,
) -> np.ndarray:
    """Sum each row of the 2-D float64 array ``x``, the accumulator rounded to ``acc`` every step
    (or summed by the model ``acc``).

    Returns the accumulator values (float64, in ``acc``); an empty row sums to +0.
    """
    if _check_model(acc, order, ("sequential",), mode):
        out, counts = _models.counted_sum_rows(x, acc, rng)  # type: ignore[arg-type]
        _record("sum", acc, out.size, counts)
        return out
    assert isinstance(acc, Format)
    _check_order(order, SUM_ORDERS)
    x = np.ascontiguousarray(x, dtype=np.float64)
    out = np.empty(x.shape[0], dtype=np.float64)
    code, seed, c, f = _kernel_args(acc, mode, rng)
    parts = _kernels.run(_kernels.accumulate_rows, x.shape[0], (x, out),
                         (order == "pairwise", code, seed, c, f), work=x.size)
    _record("sum", acc, out.size, np.sum(parts, axis=0))
    return out


def _record(site: str, acc: Accumulator, sums: int, counts: np.ndarray) -> None:
    """The accumulation's telemetry for the active monitors (fpsim.monitor): outputs,
    additions and swamped terms, under ``site`` and the accumulator's name."""
    if monitor_is_active():
        name = acc.name if isinstance(acc, Format) else _models.name_of(acc)
        record_sums(site, name, (sums, int(counts[0]), int(counts[1])))


def same_values(a: Format, b: Format) -> bool:
    """True when two formats have the same fields apart from the name."""
    return a.replace(name=b.name) == b


def blas_products_exact(fa: Format, fb: Format, a: np.ndarray, b: np.ndarray) -> bool:
    """True when every product of an element of ``a`` and one of ``b`` is exact in float32.

    Decided from the formats when possible: significands of at most 24 bits together, and the
    smallest possible product's last bit, 2^(emin_a - M_a + emin_b - M_b), not below float32's
    2^-149, and the largest product not above float32's max. Otherwise from the data: the
    smallest non-zero finite magnitudes multiply to at least 2^-126 (a normal float32, so the
    <= 24-bit product is exact) and the largest to at most float32's max.
    """
    if fa.precision + fb.precision > FP32.precision:
        return False
    low = (fa.emin - fa.mantissa_bits) + (fb.emin - fb.mantissa_bits)
    if low >= FP32.emin - FP32.mantissa_bits and fa.max * fb.max <= FP32.max:
        return True

    def extremes(v: np.ndarray) -> tuple[float, float]:
        mag = np.abs(v[np.isfinite(v) & (v != 0)])
        return (float(mag.min()), float(mag.max())) if mag.size else (1.0, 1.0)

    (amin, amax), (bmin, bmax) = extremes(a), extremes(b)
    return amin * bmin >= 2.0**_FLOAT32_EMIN and amax * bmax <= FP32.max


def matmul_2d(
    a: np.ndarray, b: np.ndarray, fa: Format, fb: Format, acc: Accumulator,
    order: str = "auto", mode: str = "nearest_even", rng: object = None,
) -> np.ndarray:
    """The accumulator values of ``a @ b`` (2-D float32 carriers of formats fa, fb), float64.

    See the module docstring for the model and for when ``order="blas"`` is allowed.
    """
    model = _check_model(acc, order, ("auto", "sequential"), mode)
    _check_order(order, MATMUL_ORDERS)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} are not aligned "
                         f"({a.shape[1]} != {b.shape[0]})")
    if order in ("auto", "blas") and not model:
        allowed = (
            isinstance(acc, Format) and same_values(acc, FP32)
            and get_mode(mode) is RoundingMode.NEAREST_EVEN
            and blas_products_exact(fa, fb, a, b)
        )
        if allowed:
            with np.errstate(all="ignore"):
                return np.matmul(a.astype(np.float32, copy=False), b.astype(np.float32, copy=False))
        if order == "blas":
            raise ValueError(
                "order='blas' needs accumulate=FP32, mode='nearest_even' and products exact in "
                f"float32; {fa.name} x {fb.name} products are not (use order='sequential')"
            )
        order = "sequential"
    a64 = np.ascontiguousarray(a, dtype=np.float64)
    bt64 = np.ascontiguousarray(np.asarray(b, dtype=np.float64).T)
    m, k, n = a64.shape[0], a64.shape[1], bt64.shape[0]
    out = np.empty((m, n), dtype=np.float64)
    kernel: Any
    if model:
        kernel, args = _models.model_rows, _models.kernel_args(acc, rng)  # type: ignore[arg-type]
    else:
        assert isinstance(acc, Format)
        code, seed, c, f = _kernel_args(acc, mode, rng)
        kernel, args = _kernels.accumulate_rows, (order == "pairwise", code, seed, c, f)
    seed_at = 8 if model else 2  # where the stochastic seed sits in args
    counts = np.zeros(2, dtype=np.int64)
    # out[i, j] is row i * n + j of the (m * n, k) matrix of exact float64 products
    # a[i, t] * b[t, j] (<= 48-bit significands), summed by the one accumulation kernel
    # (accumulate_rows, which fpsim.sum uses too, or a model's model_rows); its stochastic
    # stream is indexed by that
    # row, so a block of rows starting at i0 continues the stream at i0 * n * 2k.
    step = max(1, _PRODUCTS_BLOCK // max(1, n * k))
    flat = out.reshape(-1)
    for i0 in range(0, m, step):
        i1 = min(m, i0 + step)
        prods = (a64[i0:i1, None, :] * bt64[None, :, :]).reshape((i1 - i0) * n, k)
        block_args = (args[:seed_at] + (_kernels.stream_seed(args[seed_at], i0 * n * 2 * k),)
                      + args[seed_at + 1:])
        parts = _kernels.run(kernel, prods.shape[0], (prods, flat[i0 * n:i1 * n]), block_args,
                             work=prods.size)
        counts += np.sum(parts, axis=0)
    _record("matmul", acc, out.size, counts)
    return out


# the products of this many (row, column, term) triples are formed at a time
_PRODUCTS_BLOCK = 1 << 20


def _normalize_axes(axis: int | tuple[int, ...] | None, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for ax in axes:
        if not isinstance(ax, (int, np.integer)) or not -ndim <= ax < ndim:
            raise ValueError(f"axis {ax!r} is out of bounds for an array of dimension {ndim}")
        out.append(int(ax) % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {axis!r}")
    return tuple(out)


def sum_axis(
    x: np.ndarray, axis: int | tuple[int, ...] | None, keepdims: bool, acc: Accumulator,
    order: str = "sequential", mode: str = "nearest_even", rng: object = None,
) -> np.ndarray:
    """Accumulator values (float64, in ``acc``) of ``x`` summed over ``axis`` (numpy's meaning).

    The summed axes are moved last and flattened in C order, so a row's terms are added in the
    order numpy iterates them.
    """
    x = np.asarray(x, dtype=np.float64)
    axes = _normalize_axes(axis, x.ndim)
    kept = [d for d in range(x.ndim) if d not in axes]
    moved = np.transpose(x, kept + list(axes))
    kept_shape = tuple(x.shape[d] for d in kept)
    n = int(np.prod([x.shape[d] for d in axes], dtype=np.int64))
    rows = sum_rows(moved.reshape(int(np.prod(kept_shape, dtype=np.int64)), n), acc, order,
                    mode, rng)
    result = rows.reshape(kept_shape)
    if keepdims:
        result = result.reshape(tuple(1 if d in axes else s for d, s in enumerate(x.shape)))
    return result


def matmul_nd(
    a: np.ndarray, b: np.ndarray, fa: Format, fb: Format, acc: Accumulator,
    order: str = "auto", mode: str = "nearest_even", rng: object = None,
) -> np.ndarray:
    """Accumulator values of ``a @ b`` with numpy.matmul's shape rules (1-D and batched).

    float32 when one product took the BLAS path, float64 otherwise; either holds the exact
    accumulator values.
    """
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul needs operands of at least one dimension; use * for scalars")
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} are not aligned "
                         f"({a2.shape[-1]} != {b2.shape[-2]})")
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    if rng is not None:
        rng = generator(rng)  # one stream across the batch, not one seed per matrix
    a3 = np.broadcast_to(a2, batch + a2.shape[-2:])
    b3 = np.broadcast_to(b2, batch + b2.shape[-2:])
    if not batch:  # one product: keep its dtype (float32 from BLAS), no float64 copy
        out = matmul_2d(a2, b2, fa, fb, acc, order, mode, rng)
    else:
        out = np.empty(batch + (a2.shape[-2], b2.shape[-1]), dtype=np.float64)
        for idx in np.ndindex(*batch):
            out[idx] = matmul_2d(a3[idx], b3[idx], fa, fb, acc, order, mode, rng)
    if a.ndim == 1:
        out = out[..., 0, :]
    if b.ndim == 1:
        out = out[..., 0]
    return out
