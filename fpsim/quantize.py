"""The public array API for rounding: ``fpsim.round``. Validates, picks the carrier, dispatches.

The carrier is the input's own dtype: float32 stays float32 and float64 stays float64 (rounded
once from its own 53-bit value, so there is no double rounding through float32); any other
numeric input is converted to float64 first (float32 input to a format that reaches below
float32's normal range goes through float64 in chunks). The work is done by the numba kernels
of ``fpsim.kernels`` on the integer view of the carrier.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from fpsim import _kernels, _validate
from fpsim._exponent_only import round_exponent_only
from fpsim._kernels import DirectedF32, FormatBits, NearestEvenF32
from fpsim.catalog import get_format
from fpsim.formats import Format
from fpsim.monitor import is_active as monitor_is_active
from fpsim.monitor import record as monitor_record
from fpsim.rounding import (
    RoundingMode,
    check_rng_bits,
    get_mode,
    resolve_overflow,
    resolve_subnormals,
)

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
    "float8_e8m0fnu",
}


def _site(site: object) -> str | None:
    """None or a str (np.str_ as str): a monitor's row name ("" or None: "round")."""
    if site is None or isinstance(site, str):
        return str(site) if site else None
    raise ValueError(f"site must be a string naming the call in fpsim.monitor, or None, got "
                     f"{site!r} (a {type(site).__name__})")


def _seed(rng: object) -> int:
    """A 63-bit seed for the stochastic kernel from None, an int seed or a numpy Generator."""
    return int(_validate.generator(rng).integers(0, 2**63, dtype=np.int64))


def _bits_of(value: float, dtype: np.dtype) -> int:
    return int(np.array(value, dtype=dtype).view(_INT_VIEW[dtype]))


@functools.cache
def format_constants(
    fmt: Format, dtype: np.dtype, subnormals: bool, policy: str
) -> FormatBits:
    """The general kernel's format constants ``f`` for a carrier dtype (fpsim.kernels)."""
    c = _kernels.carrier_constants(dtype)
    max_bits = _bits_of(fmt.max, dtype)
    over_bits = {"inf": c.INF_BITS, "saturate": max_bits, "nan": c.NAN_BITS}[policy]
    q = fmt.emin - fmt.mantissa_bits  # log2 of the smallest subnormal
    return FormatBits(
        M=fmt.mantissa_bits,
        EMIN=fmt.emin,
        SUBNORMALS=int(subnormals),
        MAX_BITS=max_bits,
        MIN_NORMAL_BITS=_bits_of(fmt.smallest_normal, dtype),
        OVER_BITS=over_bits,
        HAS_INF=int(fmt.inf),
        NO_NEG_ZERO=int(not fmt.has_negative_zero),
        Q_BITS=_bits_of(2.0**q, dtype),
        # half of it; when that is below the carrier's range only a = 0 lies below 2^q
        HALF_Q_BITS=max(_bits_of(2.0 ** (q - 1), dtype), 1),
        UNSIGNED=int(not fmt.signed),
        NEGATIVE_BITS=c.NAN_BITS if fmt.has_nan else 0,
    )


@functools.cache
def nearest_even_f32_constants(
    fmt: Format, subnormals: bool, policy: str, finite_input: bool = False
) -> NearestEvenF32 | None:
    """The constants ``p`` of the float32 nearest-even fast path (fpsim.kernels), or None
    where it does not apply: flush-to-zero; formats without mantissa bits, as wide as float32,
    with emin > 0, or reaching below float32's normal range; an overflow policy other than inf
    for a format with inf (inf input must stay inf there while finite overflow saturates or
    becomes NaN)."""
    if (not subnormals or not 0 < fmt.mantissa_bits < 23 or fmt.emin > 0 or not fmt.signed
            or _needs_wide_carrier(fmt, True)):
        return None  # (M = 0: ties need the format's exponent parity, not float32's)
    if fmt.inf and policy != "inf" and not finite_input:
        return None  # (fpsim.mx passes finite_input: its kernel never rounds inf or NaN)
    f32 = np.dtype(np.float32)
    c = _kernels.carrier_constants(f32)
    d = 23 - fmt.mantissa_bits
    max_bits = _bits_of(fmt.max, f32)
    # the smallest float32 that rounds above max: the tie above max goes up iff max's code is odd
    threshold_bits = max_bits + (1 << (d - 1)) + (0 if (max_bits >> d) & 1 else 1)
    overflow_bits = {"inf": c.INF_BITS, "saturate": max_bits, "nan": c.NAN_BITS}[policy]
    return NearestEvenF32(
        SHIFT=np.uint32(d << c.CM),
        C_SUB=np.float32(2.0 ** (fmt.emin - fmt.mantissa_bits + c.CM)),
        MIN_NORMAL=np.float32(fmt.smallest_normal),
        THRESHOLD=_float32_of_bits(threshold_bits),
        OVERFLOW=_float32_of_bits(overflow_bits),
        NO_NEG_ZERO=not fmt.has_negative_zero,
    )


@functools.cache
def directed_f32_constants(fmt: Format, subnormals: bool, policy: str) -> DirectedF32 | None:
    """The constants ``p`` of the float32 directed-mode path (fpsim.kernels.directed_f32), or
    None where it does not apply: formats without mantissa bits, as wide as float32, with
    emin > 0, unsigned, or reaching below float32's normal range (as for nearest-even; every
    overflow policy and flush-to-zero are served)."""
    if (not 0 < fmt.mantissa_bits < 23 or fmt.emin > 0 or not fmt.signed
            or _needs_wide_carrier(fmt, subnormals)):
        return None
    f32 = np.dtype(np.float32)
    c = _kernels.carrier_constants(f32)
    m = fmt.mantissa_bits
    max_bits = _bits_of(fmt.max, f32)
    overflow_bits = {"inf": c.INF_BITS, "saturate": max_bits, "nan": c.NAN_BITS}[policy]
    # the smallest B: the subnormal spacing's, or with flush-to-zero that of the binade below
    # the smallest normal (see the module docstring)
    low = fmt.emin - m if subnormals else fmt.emin - 1 - m
    return DirectedF32(
        SHIFT=np.uint32((23 - m) << c.CM),
        C_SUB=np.float32(2.0 ** (low + c.CM)),
        MAX=_float32_of_bits(max_bits),
        MIN_NORMAL=np.float32(fmt.smallest_normal),
        FLUSH_BELOW=np.float32(0.0 if subnormals else fmt.smallest_normal),
        OVERFLOW=_float32_of_bits(overflow_bits),
        INF_RESULT=_float32_of_bits(c.INF_BITS if fmt.inf else overflow_bits),
        NO_NEG_ZERO=not fmt.has_negative_zero,
    )


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
    rng_bits: int | None = None,
) -> np.ndarray:
    """Round every element of ``x`` to the nearest value of ``fmt`` under ``mode`` (exactly).

    The result has x's dtype (float32 or float64; other numeric input is converted to float64)
    and holds values exactly representable in ``fmt``. NaN stays NaN, +-0 keeps its sign (except
    in formats without -0), +-inf stays inf where the format has inf and otherwise follows the
    overflow policy. ``subnormals=False`` flushes results below ``smallest_normal`` to signed
    zero; ``overflow`` ("inf", "saturate", "nan") overrides the format's overflow policy.
    ``rng`` (a seed or numpy Generator) drives ``mode="stochastic"``, reproducibly;
    ``rng_bits=r`` draws r random bits per element instead of the full-precision draw (None):
    the value then goes up with probability ``floor(f * 2^r) / 2^r`` for the dropped fraction
    ``f`` of the last place, as hardware with r random bits does (see
    ``fpsim.rounding.check_rng_bits``).
    ``out`` (same shape, same dtype as the result; it may be ``x`` itself) receives the result.
    ``site`` names this call in an active ``fpsim.monitor``.

    >>> fpsim.round(np.float32([65519.99, 65520.0, 1e-8]), "fp16")
    array([65504.,    inf,     0.], dtype=float32)
    """
    return round_array(x, fmt, mode, rng=rng, subnormals=subnormals, overflow=overflow, out=out,
                       site=site, rng_bits=rng_bits)


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
    rng_bits: int | None = None,
) -> np.ndarray:
    """fpsim.round, with ``parallel=False`` to keep the plain float32 nearest-even kernel on
    the calling thread (fpsim.matmul rounds a BLAS result that way, leaving the cores to BLAS).
    Large arrays are otherwise rounded in blocks on fpsim.kernels.threads' pool."""
    fmt = get_format(fmt)
    mode = get_mode(mode)
    rng_bits = check_rng_bits(rng_bits, mode)
    policy = resolve_overflow(fmt, overflow)
    subnormals = resolve_subnormals(fmt, subnormals)
    site = _site(site)
    arr = as_float_array(x)
    dtype = arr.dtype
    if out is not None:
        arr = _validate.check_out(out, arr)

    if not fmt.zero:
        result, counts = round_exponent_only(arr, fmt, mode, rng, policy, rng_bits)
        if monitor_is_active():
            monitor_record(site or "round", fmt, arr.size, counts)
        if out is not None:
            out[...] = result
            return out
        return result[()] if result.ndim == 0 else result
    if dtype == np.float32 and _needs_wide_carrier(fmt, subnormals):
        result = np.empty(arr.shape, dtype=dtype) if out is None else out  # (checked above)
        _round_through_float64(arr, result, fmt, mode, rng, subnormals, policy, site, rng_bits)
    else:
        result = _round_in_carrier(arr, out, fmt, mode, rng, subnormals, policy, site, parallel,
                                   rng_bits)
    if out is not None and result is not out:
        out[...] = result
        result = out
    if result.ndim == 0 and out is None:
        return result[()]
    return result


def _round_in_carrier(
    arr: np.ndarray, out: np.ndarray | None, fmt: Format, mode: RoundingMode, rng: object,
    subnormals: bool, policy: str, site: str | None, parallel: bool,
    rng_bits: int | None = None,
) -> np.ndarray:
    """arr rounded in its own dtype (the carrier); into ``out`` when it is C-contiguous.

    The kernel: float32 nearest-even's fast path where it applies; else, for arrays of
    ``SPECIALISE_MIN`` elements or more, the float32 directed-mode kernel or the general
    kernel's one-mode specialisation; else the general kernel. Until that kernel is compiled,
    its numpy stand-in answers (fpsim.kernels.lazy.answer)."""
    dtype = arr.dtype
    ivew = _INT_VIEW[dtype]
    src = np.ascontiguousarray(arr).reshape(-1).view(ivew)
    result: np.ndarray = (out if out is not None and out.flags.c_contiguous
                          else np.empty(arr.shape, dtype=dtype))
    dst = result.reshape(-1).view(ivew)
    n = src.size
    counting = monitor_is_active()
    fast = None
    if mode is RoundingMode.NEAREST_EVEN and dtype == np.float32:
        fast = nearest_even_f32_constants(fmt, subnormals, policy)
    c = _kernels.carrier_constants(dtype)
    f = format_constants(fmt, dtype, subnormals, policy)
    seed = _seed(rng) if mode is RoundingMode.STOCHASTIC else 0
    general_args = (_kernels.mode_bits(mode, rng_bits), seed, c, f)
    before: tuple = (src, dst)
    after: tuple
    if fast is not None:
        kernel: Callable[..., Any] = (_kernels.count_nearest_even_f32_range if counting
                                      else _kernels.round_nearest_even_f32_range)
        before, after = (src.view(np.float32), dst.view(np.float32)), (fast,)
    elif n >= _kernels.SPECIALISE_MIN and (directed := _directed_f32(
            dtype, mode, counting, fmt, subnormals, policy)) is not None:
        kernel, after = directed
        before = (src.view(np.float32), dst.view(np.float32))
    elif n >= _kernels.SPECIALISE_MIN and rng_bits is None:
        kernel, after = _kernels.specialised_range(mode, counting), (seed, c, f)
    else:
        kernel = _kernels.round_count_range if counting else _kernels.round_range
        after = general_args
    # (parallel=False is an option of the plain fast path only)
    parallel = (parallel or counting) if fast is not None else True
    stand_in = (_kernels.portable.round_count_range if counting
                else _kernels.portable.round_range)
    parts = _kernels.lazy.answer(
        kernel, n, (*before, 0, 0, *after),
        lambda lo: _kernels.run(kernel, n, before, after, parallel=parallel, start=lo),
        # (numpy on one thread: split over two, its Python-level work shares the GIL and costs
        # more CPU time for no gain in wall time)
        lambda lo, hi: [stand_in(src, dst, lo, hi, *general_args)])
    if counting:
        counts = np.sum(parts, axis=0)
        monitor_record(site or "round", fmt, n, tuple(int(k) for k in counts))
    return result


def _directed_f32(
    dtype: np.dtype, mode: RoundingMode, counting: bool, fmt: Format, subnormals: bool,
    policy: str,
) -> tuple[Callable[..., Any], tuple[DirectedF32]] | None:
    """(kernel, (p,)) of the float32 directed-mode path (counting: its event-counting twin)
    where it applies, else None."""
    if dtype != np.float32 or mode not in _kernels.DIRECTED_F32_MODES:
        return None
    p = directed_f32_constants(fmt, subnormals, policy)
    return None if p is None else (_kernels.directed_f32_range(mode, counting), (p,))


# float32 input to a format reaching below float32's normal range is rounded through float64
# this many elements at a time, so the detour needs a float64 chunk, not a float64 array.
_WIDE_CHUNK = 1 << 16


def _round_through_float64(
    arr: np.ndarray, result: np.ndarray, fmt: Format, mode: RoundingMode, rng: object,
    subnormals: bool, policy: str, site: str | None, rng_bits: int | None = None,
) -> None:
    """result (float32, arr's shape, not overlapping arr) = arr rounded via the float64
    carrier, chunk by chunk; a stochastic stream continues across chunks (one seed, each
    element's own index)."""
    flat_in = arr.reshape(-1) if arr.flags.c_contiguous else np.ravel(arr)
    flat_out = result.reshape(-1)  # result is a fresh array or C-contiguous out (see below)
    if not result.flags.c_contiguous:
        tmp = np.empty(arr.shape, dtype=arr.dtype)
        _round_through_float64(arr, tmp, fmt, mode, rng, subnormals, policy, site)
        result[...] = tmp
        return
    c = _kernels.carrier_constants(np.dtype(np.float64))
    f = format_constants(fmt, np.dtype(np.float64), subnormals, policy)
    seed = _seed(rng) if mode is RoundingMode.STOCHASTIC else 0
    counting = monitor_is_active()
    m = _kernels.mode_bits(mode, rng_bits)
    n = flat_in.size
    wide = np.empty(min(n, _WIDE_CHUNK), dtype=np.float64)
    kernel = _kernels.round_count_range if counting else _kernels.round_range
    stand_in = (_kernels.portable.round_count_range if counting
                else _kernels.portable.round_range)

    def detour(round_chunk: Callable[..., Any], lo: int, hi: int) -> Any:
        """flat_out[lo:hi] = flat_in[lo:hi] rounded by round_chunk on float64 chunks; the
        chunk results (counts) summed."""
        total = np.zeros(5, dtype=np.int64)
        for start in range(lo, hi, _WIDE_CHUNK):
            stop = min(hi, start + _WIDE_CHUNK)
            w = wide[: stop - start]
            w[...] = flat_in[start:stop]
            bits = w.view(np.int64)
            # the kernel takes element indices from 0: shift the seed's stream by start instead
            part = round_chunk(bits, bits, 0, stop - start, m,
                               _kernels.stream_seed(seed, start), c, f)
            if counting:
                total += part
            flat_out[start:stop] = w
        return total

    bits0 = wide.view(np.int64)
    parts = _kernels.lazy.answer(kernel, n, (bits0, bits0, 0, 0, m, seed, c, f),
                                 lambda lo: [detour(kernel, lo, n)],
                                 lambda lo, hi: [detour(stand_in, lo, hi)])
    if counting:
        counts = np.sum(parts, axis=0)
        monitor_record(site or "round", fmt, n, tuple(int(k) for k in counts))
