"""The grid of a format's values: ``values``, ``ulp``, ``next_up``, ``next_down``.

Decisions (recorded in docs/semantics.md, "Numerical semantics"):

- The grid follows what rounding can produce: for a format with ``subnormals=False`` it skips
  the subnormals (and ``ulp`` uses rounding's quantum, see ``ulp``).
- ``values(fmt)`` lists each finite value once: ``+0`` only (``-0.0 == 0.0``).
- ``ulp(x)`` is the grid spacing at ``x``, ``2^(max(floor(log2|x|), emin) - M)``: the spacing to
  the next larger magnitude, the exponent range taken as unbounded above (for ``max`` with
  M >= 1 that is the spacing below it); it is always positive, ``ulp(0)`` is the smallest
  subnormal, ``ulp(+-inf)`` and ``ulp(NaN)`` are NaN.
- ``next_up(x)`` is the smallest format value greater than ``x`` (any float ``x``); past ``max``
  it is ``inf`` for formats with inf and NaN (no such value) otherwise. ``next_down(x) =
  -next_up(-x)``. A step from the smallest negative subnormal gives ``-0.0`` (``+0.0`` in fnuz).
- Unsigned formats (E8M0FNU, unsigned P3109) are not symmetric: ``next_up``/``next_down`` look
  their (at most 2^16) values up; below the smallest value ``next_up`` is that value and
  ``next_down`` is NaN (no such value).
"""

from __future__ import annotations

import numpy as np

from fpsim.bits import _decode, _scalar_or_array, to_bits
from fpsim.catalog import get_format
from fpsim.formats import Format
from fpsim.quantize import as_float_array
from fpsim.quantize import round as _round


def _all_values(fmt: Format) -> np.ndarray:
    codes = np.arange(1 << fmt.bits, dtype=np.int64)
    vals = _decode(codes, fmt)
    vals = vals[np.isfinite(vals) & ~((vals == 0) & np.signbit(vals))]
    if not fmt.subnormals:
        vals = vals[(vals == 0) | (np.abs(vals) >= fmt.smallest_normal)]
    return np.unique(vals).astype(np.float32)


_VALUES: dict[Format, np.ndarray] = {}


def values(fmt: Format | str) -> np.ndarray:
    """Every finite value of a format of at most 16 bits, ascending, float32, each once.

    Zero appears once, as +0.0. Formats with ``subnormals=False`` list only what rounding can
    produce (no subnormals).

    >>> values("e2m1fn")
    array([-6. , -4. , -3. , -2. , -1.5, -1. , -0.5,  0. ,  0.5,  1. ,  1.5,
            2. ,  3. ,  4. ,  6. ], dtype=float32)
    """
    fmt = get_format(fmt)
    if fmt.bits > 16:
        raise ValueError(
            f"values() enumerates formats of at most 16 bits; {fmt.name} has {fmt.bits} "
            f"({2**fmt.bits} codes). Use next_up/next_down to walk its grid"
        )
    if fmt not in _VALUES:
        _VALUES[fmt] = _all_values(fmt)
    return _VALUES[fmt].copy()


def ulp(x: object, fmt: Format | str) -> np.ndarray:
    """The spacing of ``fmt``'s grid at ``x``: ``2^(max(floor(log2|x|), emin) - M)``, positive.

    For any real ``x``: the distance from ``|x|``'s lower grid point to the next larger one,
    with the exponent range unbounded above: ``ulp(max) = 2^(emax - M)``, the spacing just below
    max when M >= 1, so the round-to-nearest overflow threshold is ``max + ulp(max)/2``, as
    rounding continues the grid past max. ``ulp(0)`` is the smallest
    subnormal; inf and NaN give NaN. With ``subnormals=False`` the exponent is not clamped at
    ``emin`` (the quantum rounding uses before it flushes). Returns x's float dtype.

    >>> ulp(np.float32([1.0, 65504.0, 0.0, 2**-20]), "fp16")
    array([9.7656250e-04, 3.2000000e+01, 5.9604645e-08, 5.9604645e-08],
          dtype=float32)
    """
    fmt = get_format(fmt)
    arr = as_float_array(x)
    a = np.abs(arr.astype(np.float64))
    finite = np.isfinite(a)
    _, exp = np.frexp(np.where(finite & (a != 0), a, 1.0))
    e = exp - 1
    q = (np.maximum(e, fmt.emin) if fmt.subnormals else e) - fmt.mantissa_bits
    out = np.ldexp(1.0, q)
    out = np.where(a == 0, fmt.smallest_subnormal, out)
    out = np.where(finite, out, np.nan)
    return _scalar_or_array(out.astype(arr.dtype))


def _step_up(r: np.ndarray, fmt: Format) -> np.ndarray:
    """The next larger value of the subnormal-including grid after the values ``r`` < max."""
    mag_codes = np.asarray(to_bits(np.abs(r), fmt)).astype(np.int64)
    up = _decode(np.where(np.signbit(r) & (r != 0), mag_codes - 1, mag_codes + 1), fmt)
    return np.where(np.signbit(r) & (r != 0), -up, up)


def _unsigned_step(x: np.ndarray, fmt: Format, up: bool) -> np.ndarray:
    """next_up (or next_down) in an unsigned format, from its sorted values."""
    v = values(fmt).astype(np.float64)
    over = np.inf if fmt.inf else np.nan
    table = np.concatenate([v, [over]]) if up else np.concatenate([[np.nan], v])
    i = np.searchsorted(v, np.where(np.isnan(x), 0.0, x), side="right" if up else "left")
    return np.where(np.isnan(x), np.nan, table[i])


def next_up(x: object, fmt: Format | str) -> np.ndarray:
    """The smallest value of ``fmt`` greater than ``x`` (any float), elementwise.

    Beyond max it is inf if the format has inf, else NaN (there is no such value);
    ``next_up(-inf)`` is ``-max``, NaN stays NaN; ``next_up(+-0)`` is the smallest subnormal.
    Returns x's float dtype (float32 or float64).

    >>> next_up(np.float32([1.0, 0.0, 65504.0, -2**-24]), "fp16")
    array([ 1.0009766e+00,  5.9604645e-08,            inf, -0.0000000e+00],
          dtype=float32)
    """
    fmt = get_format(fmt)
    arr = as_float_array(x)
    x64 = arr.astype(np.float64)
    if not fmt.signed:
        return _scalar_or_array(_unsigned_step(x64, fmt, up=True).astype(arr.dtype))
    past_max = np.isnan(x64) | (x64 >= fmt.max)
    safe = np.where(past_max, 0.0, x64)
    # smallest value >= x on the grid with subnormals (x < max, so no overflow)
    r = np.asarray(_round(safe, fmt, "up", subnormals=True, overflow="saturate"), np.float64)
    r = np.where(r > safe, r, _step_up(r, fmt))
    if not fmt.subnormals:  # flush-to-zero grid: the subnormal range holds only 0
        r = np.where((r > 0) & (r < fmt.smallest_normal), fmt.smallest_normal, r)
        r = np.where((r < 0) & (r > -fmt.smallest_normal), -0.0, r)
    if not fmt.has_negative_zero:
        r = np.where(r == 0, 0.0, r)
    over = np.inf if fmt.inf else np.nan
    out = np.where(np.isnan(x64), np.nan, np.where(past_max, over, r))
    return _scalar_or_array(out.astype(arr.dtype))


def next_down(x: object, fmt: Format | str) -> np.ndarray:
    """The largest value of ``fmt`` less than ``x``: ``-next_up(-x)`` (formats are symmetric).

    >>> next_down(np.float32([1.0, 0.0, -65504.0]), "fp16")
    array([ 9.9951172e-01, -5.9604645e-08,           -inf], dtype=float32)
    """
    fmt = get_format(fmt)
    arr = as_float_array(x)
    if not fmt.signed:
        return _scalar_or_array(_unsigned_step(arr.astype(np.float64), fmt, up=False)
                                .astype(arr.dtype))
    out = -np.asarray(next_up(-arr, fmt))
    if not fmt.has_negative_zero:
        out = np.where(out == 0, 0.0, out).astype(arr.dtype)
    return _scalar_or_array(np.asarray(out))
