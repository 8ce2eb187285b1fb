"""The public array API for rounding: ``fpsim.round``. Validates, picks the carrier, dispatches.

The carrier is the input's own dtype: float32 stays float32 and float64 stays float64 (rounded
once from its own 53-bit value, so there is no double rounding through float32); any other
numeric input is converted to float64 first. The work is done by the numba kernels in
``fpsim._kernels`` on the integer view of the carrier.
"""

from __future__ import annotations

import functools

import numba
import numpy as np

from fpsim import _kernels, _validate
from fpsim.catalog import get_format
from fpsim.formats import Format
from fpsim.monitor import is_active as monitor_is_active
from fpsim.monitor import record as monitor_record
from fpsim.rounding import RoundingMode, get_mode, resolve_overflow

_MODE_CODES = {m: i for i, m in enumerate(RoundingMode)}
_INT_VIEW = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}
_FLOAT32_EMIN = -126


def as_float_array(x: object, name: str = "x") -> np.ndarray:
    """x as a float32 or float64 array, or a TypeError. Other numeric input becomes float64:
    exactly where it fits, else rounded to odd so that one later rounding is exact
    (fpsim._validate.to_float64_odd). Masked arrays are refused (fpsim has no masks)."""
    _validate.check_not_masked(name, x)
    arr = np.asarray(x)
    if arr.dtype == np.float32 or arr.dtype == np.float64:
        return arr
    if arr.dtype.kind in "biuf" or arr.dtype.name in _ML_DTYPE_NAMES or arr.dtype == object:
        return _validate.to_float64_odd(arr, name)
    raise TypeError(
        f"{name} must be numeric (float, int or bool values), got an array of dtype {arr.dtype}"
    )


_ML_DTYPE_NAMES = {
    "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3", "float8_e3m4", "float8_e4m3fnuz",
    "float8_e5m2fnuz", "float8_e4m3b11fnuz", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn",
}


def _seed(rng: object) -> int:
    """A 63-bit seed for the stochastic kernel from None, an int seed or a numpy Generator."""
    return int(_validate.generator(rng).integers(0, 2**63, dtype=np.int64))


def _bits_of(value: float, dtype: np.dtype) -> int:
    return int(np.array(value, dtype=dtype).view(_INT_VIEW[dtype]))


@functools.cache
def format_constants(
    fmt: Format, dtype: np.dtype, subnormals: bool, policy: str
) -> tuple[int, ...]:
    """The kernel's format tuple ``f`` for a carrier dtype (see fpsim._kernels)."""
    c = _kernels.carrier_constants(dtype)
    max_bits = _bits_of(fmt.max, dtype)
    over_bits = {"inf": c[3], "saturate": max_bits, "nan": c[4]}[policy]
    q = fmt.emin - fmt.mantissa_bits  # log2 of the smallest subnormal
    return (
        fmt.mantissa_bits,
        fmt.emin,
        int(subnormals),
        max_bits,
        _bits_of(fmt.smallest_normal, dtype),
        over_bits,
        int(fmt.inf),
        int(not fmt.has_negative_zero),
        _bits_of(2.0**q, dtype),
        # half of it; when that is below the carrier's range only a = 0 lies below 2^q
        max(_bits_of(2.0 ** (q - 1), dtype), 1),
    )


@functools.cache
def nearest_even_f32_constants(
    fmt: Format, subnormals: bool, policy: str
) -> tuple[np.uint32, np.float32, np.float32, np.float32, np.float32, bool] | None:
    """The constants ``p`` of the float32 nearest-even fast path (fpsim._kernels), or None
    where it does not apply: flush-to-zero; formats without mantissa bits, as wide as float32,
    with emin > 0, or reaching below float32's normal range; an overflow policy other than inf
    for a format with inf (inf input must stay inf there while finite overflow saturates or
    becomes NaN)."""
    if (not subnormals or not 0 < fmt.mantissa_bits < 23 or fmt.emin > 0
            or _needs_wide_carrier(fmt, True)):
        return None  # (M = 0: ties need the format's exponent parity, not float32's)
    if fmt.inf and policy != "inf":
        return None
    f32 = np.dtype(np.float32)
    c = _kernels.carrier_constants(f32)
    d = 23 - fmt.mantissa_bits
    max_bits = _bits_of(fmt.max, f32)
    # the smallest float32 that rounds above max: the tie above max goes up iff max's code is odd
    threshold_bits = max_bits + (1 << (d - 1)) + (0 if (max_bits >> d) & 1 else 1)
    overflow_bits = {"inf": c[3], "saturate": max_bits, "nan": c[4]}[policy]
    return (np.uint32(d << 23), np.float32(2.0 ** (fmt.emin - fmt.mantissa_bits + 23)),
            np.float32(fmt.smallest_normal), _float32_of_bits(threshold_bits),
            _float32_of_bits(overflow_bits), not fmt.has_negative_zero)


def _float32_of_bits(bits: int) -> np.float32:
    return np.uint32(bits).view(np.float32)


def _needs_wide_carrier(fmt: Format, subnormals: bool) -> bool:
    """float32 input must go through float64 when the format reaches into float32's subnormals.

    The kernel takes a carrier subnormal's exponent as the carrier's emin; that is exact as long
    as the format's normal range (with flush-to-zero: and the binade just below it) lies inside
    float32's normal range.
    """
    return fmt.emin < _FLOAT32_EMIN + (0 if subnormals else 1)


def round(
    x: object,
    fmt: Format | str,
    mode: str | RoundingMode = "nearest_even",
    *,
    rng: object = None,
    subnormals: bool | None = None,
    overflow: str | None = None,
    out: np.ndarray | None = None,
    site: str | None = None,
) -> np.ndarray:
    """Round every element of ``x`` to the nearest value of ``fmt`` under ``mode`` (exactly).

    The result has x's dtype (float32 or float64; other numeric input is converted to float64)
    and holds values exactly representable in ``fmt``. NaN stays NaN, +-0 keeps its sign (except
    in formats without -0), +-inf stays inf where the format has inf and otherwise follows the
    overflow policy. ``subnormals=False`` flushes results below ``smallest_normal`` to signed
    zero; ``overflow`` ("inf", "saturate", "nan") overrides the format's overflow policy.
    ``rng`` (a seed or numpy Generator) drives ``mode="stochastic"``, reproducibly.
    ``out`` (same shape, same dtype as the result; it may be ``x`` itself) receives the result.
    ``site`` names this call in an active ``fpsim.monitor``.

    >>> fpsim.round(np.float32([65519.99, 65520.0, 1e-8]), "fp16")
    array([65504.,    inf,     0.], dtype=float32)
    """
    return round_array(x, fmt, mode, rng=rng, subnormals=subnormals, overflow=overflow, out=out,
                       site=site)


def round_array(
    x: object,
    fmt: Format | str,
    mode: str | RoundingMode = "nearest_even",
    *,
    rng: object = None,
    subnormals: bool | None = None,
    overflow: str | None = None,
    out: np.ndarray | None = None,
    site: str | None = None,
    parallel: bool = True,
) -> np.ndarray:
    """fpsim.round, with ``parallel=False`` to keep the plain float32 nearest-even kernel on
    the calling thread. fpsim.matmul rounds a BLAS result that way: numba's OpenMP threads
    spin-wait after a parallel kernel, and on a machine with as many cores as threads they
    then slow down the BLAS call that follows (measured: a 1024x1024 matmul in a loop, 15 ms
    to 24 ms on 2 cores)."""
    fmt = get_format(fmt)
    mode = get_mode(mode)
    policy = resolve_overflow(fmt, overflow)
    subnormals = _validate.check_bool("subnormals", subnormals)
    subnormals = fmt.subnormals if subnormals is None else subnormals
    arr = as_float_array(x)
    dtype = arr.dtype
    if out is not None:
        arr = _validate.check_out(out, arr)

    work = arr
    if dtype == np.float32 and _needs_wide_carrier(fmt, subnormals):
        work = arr.astype(np.float64)
    wdtype = work.dtype
    ivew = _INT_VIEW[wdtype]
    src = np.ascontiguousarray(work).reshape(-1).view(ivew)
    direct = out is not None and wdtype == dtype and out.flags.c_contiguous
    result = out if direct else np.empty(work.shape, dtype=wdtype)
    dst = result.reshape(-1).view(ivew)

    counting = monitor_is_active()
    fast = None
    if mode is RoundingMode.NEAREST_EVEN and wdtype == np.float32:
        fast = nearest_even_f32_constants(fmt, subnormals, policy)
    if fast is not None and counting:
        counts = _kernels.round_nearest_even_f32_counting(
            src.view(np.float32), dst.view(np.float32), fast, numba.get_num_threads())
        monitor_record(site or "round", fmt, src.size, counts)
    elif fast is not None:
        kernel = (_kernels.round_nearest_even_f32 if parallel
                  else _kernels.round_nearest_even_f32_serial)
        kernel(src.view(np.float32), dst.view(np.float32), fast)
    else:
        c = _kernels.carrier_constants(wdtype)
        f = format_constants(fmt, wdtype, subnormals, policy)
        seed = _seed(rng) if mode is RoundingMode.STOCHASTIC else 0
        code = _MODE_CODES[mode]
        if counting:
            counts = _kernels.ROUND_COUNTING[code](src, dst, seed, c, f,
                                                    numba.get_num_threads())
            monitor_record(site or "round", fmt, src.size, counts)
        else:
            _kernels.ROUND[code](src, dst, seed, c, f)

    if result.dtype != dtype:
        result = result.astype(dtype)
    if out is not None and result is not out:
        out[...] = result
        result = out
    if result.ndim == 0 and out is None:
        return result[()]
    return result
