"""Codes and values: ``to_bits``/``from_bits``, ``decompose``, ``classify`` (the grid of values,
``values``/``ulp``/``next_up``/``next_down``, is in ``fpsim.grid``).

A code of a format with E exponent bits and M mantissa bits is laid out ``S|E..E|M..M``
(fp16: ``S|EEEEE|MMMMMMMMMM``). With exponent field ``e`` and mantissa field ``m``:

- ``e == 0``: zero and subnormals, ``(-1)^S * 2^emin * (m / 2^M)``;
- ``e >= 1``: normals, ``(-1)^S * 2^(e - bias) * (1 + m / 2^M)``;
- the NaN and inf codes depend on ``fmt.nan`` (see ``fpsim.formats``).

All work is exact numpy arithmetic on float64 (``frexp``/``ldexp``, integers below 2^24), so
every function is vectorized; results come back as numpy arrays (numpy scalars for scalars).
The array paths work in chunks of ``_CHUNK`` elements, so their float64/int64 temporaries
stay a few megabytes: besides the result, memory stays within 2x of the input.

Decisions (recorded in docs/semantics.md, "Numerical semantics"):

- ``to_bits`` only encodes values the format holds; anything else raises ``ValueError`` naming
  the first offending value and its two neighbours (round first with ``fpsim.round``).
  NaN becomes the format's quiet NaN with the input's sign bit, payload dropped (as numpy and
  ml_dtypes convert: fp16 ``0x7E00``/``0xFE00``, e4m3fn ``0x7F``/``0xFF``), and the single NaN
  ``0x80`` in fnuz formats; formats without NaN raise. In fnuz formats (no -0) ``-0.0`` encodes
  as ``+0`` (code 0), as ``fpsim.round`` maps -0 to +0 there.
- ``subnormals=False`` is a rounding rule (flush to zero), not an encoding change: the subnormal
  codes still decode to their values, and ``to_bits``/``classify``/``decompose`` accept them.
  ``fpsim.grid``'s ``values``, ``next_up`` and ``next_down`` follow what rounding can
  produce, so for such formats they skip the subnormals.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import DTypeLike

from fpsim import _validate
from fpsim.catalog import get_format
from fpsim.formats import Format
from fpsim.quantize import as_float_array
from fpsim.quantize import round as _round

CLASSES = ("zero", "subnormal", "normal", "inf", "nan")
_CHUNK = 1 << 16  # elements per pass of the array paths (temporaries of ~0.5 MB per array)


_CLASS_DTYPE = f"<U{max(map(len, CLASSES))}"


def _chunks(n: int) -> Iterator[slice]:
    for start in range(0, n, _CHUNK):
        yield slice(start, min(start + _CHUNK, n))


def _map_codes(codes: np.ndarray, fn: Callable[[np.ndarray], tuple[np.ndarray, ...]],
               dtypes: tuple[DTypeLike, ...]) -> tuple[np.ndarray, ...]:
    """``fn`` applied to int64 chunks of ``codes``; its outputs gathered into arrays of
    ``dtypes`` shaped like ``codes``."""
    flat = codes.reshape(-1)
    outs = tuple(np.empty(flat.size, dtype) for dtype in dtypes)
    for part in _chunks(flat.size):
        for out, value in zip(outs, fn(flat[part].astype(np.int64)), strict=True):
            out[part] = value
    return tuple(out.reshape(codes.shape) for out in outs)


# --- layout helpers --------------------------------------------------------------------------
def code_dtype(fmt: Format) -> type[np.unsignedinteger]:
    """The unsigned dtype that holds the format's codes: uint8, uint16 or uint32."""
    return np.uint8 if fmt.bits <= 8 else (np.uint16 if fmt.bits <= 16 else np.uint32)


def _sign_bit(fmt: Format) -> int:
    return 1 << (fmt.exponent_bits + fmt.mantissa_bits)


def _fields(codes: np.ndarray, fmt: Format) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sign, exponent field and mantissa field of int64 codes."""
    m_bits, e_bits = fmt.mantissa_bits, fmt.exponent_bits
    sign = (codes >> (e_bits + m_bits)) & 1
    e = (codes >> m_bits) & ((1 << e_bits) - 1)
    m = codes & ((1 << m_bits) - 1)
    return sign, e, m


def _special_masks(codes: np.ndarray, fmt: Format) -> tuple[np.ndarray, np.ndarray]:
    """(is_nan, is_inf) for int64 codes, by the format's NaN rule."""
    _, e, m = _fields(codes, fmt)
    top = (1 << fmt.exponent_bits) - 1
    full = (1 << fmt.mantissa_bits) - 1
    no = np.zeros(codes.shape, dtype=bool)
    if fmt.nan == "ieee":
        return (e == top) & (m != 0), (e == top) & (m == 0)
    # P3109-style inf: the magnitude code just above max (fn, fnuz, none)
    is_inf = (codes & (_sign_bit(fmt) - 1)) == fmt.inf_code if fmt.inf else no
    if fmt.nan == "fn":
        return (e == top) & (m == full), is_inf
    if fmt.nan == "fnuz":
        return codes == _sign_bit(fmt), is_inf
    return no, is_inf


def nan_code(fmt: Format, negative: bool = False) -> int | None:
    """The quiet NaN code (with the sign bit for ``negative`` where NaNs are signed), or None.

    >>> hex(nan_code(fpsim.FP16)), hex(nan_code(fpsim.E4M3FN)), hex(nan_code(fpsim.E4M3FNUZ))
    ('0x7e00', '0x7f', '0x80')
    """
    m_bits = fmt.mantissa_bits
    top = (1 << fmt.exponent_bits) - 1
    sign = _sign_bit(fmt) if negative and fmt.signed else 0
    if fmt.nan == "ieee":
        return None if m_bits == 0 else sign | (top << m_bits) | (1 << (m_bits - 1))
    if fmt.nan == "fn":
        return sign | (top << m_bits) | ((1 << m_bits) - 1)
    if fmt.nan == "fnuz":
        return _sign_bit(fmt)
    return None


def _as_codes(codes: object, fmt: Format) -> np.ndarray:
    """The codes as an integer array (not widened), checked to lie in 0 .. 2^bits - 1."""
    _validate.check_not_masked("codes", codes)
    arr = np.asarray(codes)
    if arr.size == 0 and arr.dtype.kind == "f":  # [] is an empty list of codes
        arr = arr.astype(np.int64)
    if arr.dtype == object:  # Python ints beyond int64 (and lists mixing them) as exact ints
        arr = _object_codes(arr, fmt)
    if arr.dtype.kind not in "biu" or arr.dtype.kind == "b":
        raise TypeError(
            f"codes must be integers (an integer numpy array or Python ints), got dtype {arr.dtype}"
        )
    top = (1 << fmt.bits) - 1
    if np.iinfo(arr.dtype).max > top or np.iinfo(arr.dtype).min < 0:
        bad = (arr < 0) | (arr > top)
        if bad.any():
            first = int(arr[bad].flat[0])
            raise ValueError(
                f"code {first} is out of range for {fmt.name}: codes are 0..{top} "
                f"({fmt.bits} bits)"
            )
    return arr


def _object_codes(arr: np.ndarray, fmt: Format) -> np.ndarray:
    """An object array of integers (Python or numpy, not bools) as int64 codes, each checked
    to lie in 0 .. 2^bits - 1 (so an int beyond int64 is named, not called a wrong dtype)."""
    top = (1 << fmt.bits) - 1
    for v in arr.flat:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"codes must be integers (an integer numpy array or Python ints), "
                            f"got {v!r} (a {type(v).__name__})")
        if not 0 <= v <= top:
            raise ValueError(f"code {v} is out of range for {fmt.name}: codes are 0..{top} "
                             f"({fmt.bits} bits)")
    return arr.astype(np.int64)


def _scalar_or_array(arr: np.ndarray) -> np.ndarray:
    return arr[()] if arr.ndim == 0 else arr


# --- codes <-> values ------------------------------------------------------------------------
def _decode(codes: np.ndarray, fmt: Format) -> np.ndarray:
    """float64 values of valid int64 codes (exact: significands have at most 24 bits)."""
    sign, e, m = _fields(codes, fmt)
    m_bits = fmt.mantissa_bits
    subnormal = np.ldexp(m.astype(np.float64), fmt.emin - m_bits)
    normal = np.ldexp((m + (1 << m_bits)).astype(np.float64), e - fmt.bias - m_bits)
    mag = np.where((e == 0) & fmt.zero, subnormal, normal)
    is_nan, is_inf = _special_masks(codes, fmt)
    mag = np.where(is_inf, np.inf, np.where(is_nan, np.nan, mag))
    return np.where(sign == 1, -mag, mag)


def from_bits(codes: object, fmt: Format | str) -> np.ndarray:
    """The float32 value of every code of ``fmt`` (NaN codes -> NaN, inf codes -> +-inf).

    Every code ``0 .. 2^bits - 1`` is accepted; others raise ``ValueError``, non-integers
    ``TypeError``. Exact: every value of a format fits the float32 carrier.

    >>> from_bits(np.uint16([0x3C00, 0x0001, 0x7BFF, 0xFC00]), "fp16")
    array([1.0000000e+00, 5.9604645e-08, 6.5504000e+04,          -inf],
          dtype=float32)
    """
    fmt = get_format(fmt)
    (out,) = _map_codes(_as_codes(codes, fmt), lambda c: (_decode(c, fmt),), (np.float32,))
    return _scalar_or_array(out)


def _encode(x: np.ndarray, fmt: Format) -> tuple[np.ndarray, np.ndarray]:
    """(int64 codes, ok) for float64 x; ``ok`` is False where x is not a value of the format."""
    m_bits = fmt.mantissa_bits
    neg = np.signbit(x)
    a = np.abs(x)
    finite = np.isfinite(a)
    a0 = np.where(finite, a, 1.0)
    frac, exp = np.frexp(a0)  # a = frac * 2^exp, frac in [0.5, 1): floor(log2 a) = exp - 1
    normal = (exp - 1 >= fmt.emin) & (a0 != 0)
    e_field = np.where(normal, exp - 1 + fmt.bias, 0)
    with np.errstate(over="ignore"):  # a huge a0 scaled up: inf, refused below (not integer)
        sig = np.where(normal, np.ldexp(frac, m_bits + 1), np.ldexp(a0, m_bits - fmt.emin))
    ok = finite & (sig == np.floor(sig))  # no bits below the format's spacing
    if not fmt.zero:
        ok &= a0 != 0
    if not fmt.signed:
        ok &= ~neg | (a == 0)  # no negative numbers (-0 encodes as +0)
    sig_int = np.where(ok, sig, 0).astype(np.int64)
    mant = np.where(normal, sig_int - (1 << m_bits), sig_int)
    top_e = fmt.max_exponent_field
    ok &= (e_field < top_e) | ((e_field == top_e) & (mant <= fmt.max_mantissa_field))
    e_field = np.where(ok, e_field, 0)
    mant = np.where(ok, mant, 0)
    codes = (e_field.astype(np.int64) << m_bits) | mant
    signed = neg & ((codes != 0) | fmt.has_negative_zero) & fmt.signed  # fnuz: -0 is +0
    codes = np.where(signed, codes | _sign_bit(fmt), codes)
    inf_code = fmt.inf_code
    if inf_code is not None:
        is_inf = np.isinf(x) & (~neg | fmt.signed)
        codes = np.where(is_inf, np.where(neg, inf_code | _sign_bit(fmt), inf_code), codes)
        ok |= is_inf
    pos_nan, neg_nan = nan_code(fmt), nan_code(fmt, negative=True)
    if pos_nan is not None and neg_nan is not None:
        is_nan = np.isnan(x)
        codes = np.where(is_nan, np.where(neg, neg_nan, pos_nan), codes)
        ok |= is_nan
    return codes, ok


def _not_representable(value: float, fmt: Format, given: object = None) -> ValueError:
    """The error for ``value`` (the float64 to_bits encodes), which ``fmt`` does not hold.
    ``given``: the element as the caller passed it, when it was not a float32/float64 (an int
    beyond float64, 10**400, reaches the encoder as float64's max, its stand-in): named as
    given, not as its stand-in."""
    shown = repr(value) if given is None else _describe_given(given)
    if np.isnan(value):
        return ValueError(f"{fmt.name} has no NaN code (nan={fmt.nan!r}); it cannot encode NaN")
    if np.isinf(value):
        return ValueError(f"{fmt.name} has no inf (nan={fmt.nan!r}); it cannot encode {value}")
    if value == 0 and not fmt.zero:
        return ValueError(
            f"{shown} is not a value of {fmt.name}: it has no zero (an exponent-only scale "
            f"format: every code is a power of two, the smallest 2^{fmt.emin} = "
            f"{fmt.smallest_normal!r})"
        )
    if value < 0 and not fmt.signed:
        return ValueError(
            f"{shown} is not a value of {fmt.name}: it is unsigned (values "
            f"{0.0 if fmt.zero else fmt.smallest_normal!r} .. {fmt.max!r}, no negative numbers)"
        )
    if abs(value) > fmt.max:
        return ValueError(
            f"{shown} is not a value of {fmt.name}: its magnitude exceeds max = {fmt.max!r}"
        )
    sub = True if fmt.zero else None  # (a format without zero has no subnormals)
    lo = float(_round(value, fmt, "down", subnormals=sub, overflow="saturate"))
    hi = float(_round(value, fmt, "up", subnormals=sub, overflow="saturate"))
    return ValueError(
        f"{shown} is not a value of {fmt.name} (it lies between {lo!r} and {hi!r}); "
        f"round it first, e.g. fpsim.round(x, {fmt.name!r})"
    )


_SHOWN_DIGITS = 30  # ours: longer ints are shown as their leading digits and their length


def _describe_given(given: object) -> str:
    """``given`` for an error message: an int in full up to ``_SHOWN_DIGITS`` digits, else its
    leading digits and digit count (str() of a 4301-digit int raises); anything else its repr
    (cut at 80 characters)."""
    if isinstance(given, (int, np.integer)) and not isinstance(given, (bool, np.bool_)):
        g = abs(int(given))
        if g < 10**_SHOWN_DIGITS:
            return repr(int(given))
        digits = int(math.log10(g)) + 1  # (float log10: may be one off near a power of ten)
        digits += (g >= 10**digits) - (g < 10 ** (digits - 1))
        lead = g // 10 ** (digits - 6)
        sign = "-" if int(given) < 0 else ""
        return (f"the int {sign}{lead}... ({digits} digits, about "
                f"{sign}{lead / 1e5:.5f}e+{digits - 1})")
    text = repr(given)
    return text if len(text) <= 80 else text[:77] + "..."


def to_bits(x: object, fmt: Format | str) -> np.ndarray:
    """The unsigned code of every element of ``x``; each must be a value of ``fmt``.

    Codes are uint8 for formats of <= 8 bits, uint16 for <= 16, uint32 otherwise. NaN becomes
    the quiet NaN (sign kept where NaNs are signed), -0.0 becomes +0 in fnuz formats. A value
    the format does not hold raises ``ValueError`` naming it: round first. A numpy masked
    array is refused (``TypeError``): pass ``x.filled(np.nan)`` or ``x.data``.

    >>> to_bits(np.float32([1.0, -2.0, 65504.0]), "fp16")
    array([15360, 49152, 31743], dtype=uint16)
    """
    fmt = get_format(fmt)
    return _scalar_or_array(_codes(x, fmt))


def _codes(x: object, fmt: Format) -> np.ndarray:
    """to_bits as an array (0-d for scalars), encoded chunk by chunk."""
    arr = as_float_array(x)
    flat = arr.reshape(-1)
    out = np.empty(flat.size, dtype=code_dtype(fmt))
    for part in _chunks(flat.size):
        values = flat[part].astype(np.float64)
        codes, ok = _encode(values, fmt)
        if not ok.all():
            bad = int(np.flatnonzero(~ok)[0])
            given = None
            if np.asarray(x).dtype != arr.dtype:  # converted (ints, objects): name it as given
                given = np.asarray(x, dtype=object).reshape(-1)[part.start + bad]
            raise _not_representable(float(values[bad]), fmt, given)
        out[part] = codes
    return out.reshape(arr.shape)


# --- fields and classes ----------------------------------------------------------------------
class Decomposed(NamedTuple):
    """``value == (-1)**sign * 2.0**exponent * significand`` (exactly, for every class).

    ``exponent`` is unbiased; zero and subnormals use ``emin`` with significand ``m / 2^M`` in
    [0, 1), normals ``1 + m / 2^M`` in [1, 2). For inf and NaN, exponent is 0 and the
    significand is inf or NaN. ``cls`` is the ``classify`` string. Python scalars (int, int,
    float, str) for a scalar input, arrays (uint8, int32, float64, str) for an array.
    """

    sign: Any
    exponent: Any
    significand: Any
    cls: Any


def _classes(codes: np.ndarray, fmt: Format) -> np.ndarray:
    _, e, m = _fields(codes, fmt)
    is_nan, is_inf = _special_masks(codes, fmt)
    kind = np.where((e == 0) & fmt.zero, np.where(m == 0, 0, 1), 2)
    kind = np.where(is_inf, 3, np.where(is_nan, 4, kind))
    return np.asarray(CLASSES)[kind]


def classify(x: object, fmt: Format | str) -> np.ndarray | str:
    """"zero", "subnormal", "normal", "inf" or "nan" for each value of ``fmt`` in ``x``.

    Read from the fields of the code (exponent field 0: zero or subnormal). A string for a
    scalar, an array of strings for an array; values the format does not hold raise
    ``ValueError`` (round first).

    >>> classify(np.float32([0.0, 2**-24, 1.0, np.inf]), "fp16")
    array(['zero', 'subnormal', 'normal', 'inf'], dtype='<U9')
    """
    fmt = get_format(fmt)
    (out,) = _map_codes(_codes(x, fmt), lambda c: (_classes(c, fmt),), (_CLASS_DTYPE,))
    return str(out) if out.ndim == 0 else out


def decompose(x: object, fmt: Format | str) -> Decomposed:
    """Sign (0/1), unbiased exponent, significand and class of each value of ``fmt`` in ``x``.

    ``x == (-1)**sign * 2.0**exponent * significand`` exactly; see ``Decomposed``.

    >>> decompose(1.0013580322265625e-05, "fp16")
    Decomposed(sign=0, exponent=-14, significand=0.1640625, cls='subnormal')
    """
    fmt = get_format(fmt)
    codes = _codes(x, fmt)
    if codes.ndim == 0:
        sign, exponent, significand, cls = _decompose(codes.astype(np.int64), fmt)
        return Decomposed(int(sign), int(exponent), float(significand), str(cls))
    dtypes = (np.uint8, np.int32, np.float64, _CLASS_DTYPE)
    return Decomposed(*_map_codes(codes, lambda c: _decompose(c, fmt), dtypes))


def _decompose(codes: np.ndarray, fmt: Format) -> tuple[np.ndarray, ...]:
    sign, e, m = _fields(codes, fmt)
    frac = np.ldexp(m.astype(np.float64), -fmt.mantissa_bits)
    sub = (e == 0) & fmt.zero
    significand = np.where(sub, frac, 1.0 + frac)
    exponent = np.where(sub, fmt.emin, e - fmt.bias)
    is_nan, is_inf = _special_masks(codes, fmt)
    significand = np.where(is_inf, np.inf, np.where(is_nan, np.nan, significand))
    exponent = np.where(is_nan | is_inf, 0, exponent)
    return sign, exponent, significand, _classes(codes, fmt)
