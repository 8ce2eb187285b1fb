"""Input checks of the public API, and the exact conversion of wide input to float64.

Each check raises an exception that names the argument, the bad value and what is allowed.
Kernels assume what these functions guarantee.

Wide input (integers beyond 2^53, Python ints, ``Fraction``, ``np.longdouble``) is converted to
float64 with round-to-odd: ``v`` becomes the float64 neighbour of ``v`` toward zero, except that
when ``v`` is not a float64 the last significand bit is forced to 1 (the inexact marker). Why
that rounds once, exactly, in every deterministic mode (Boldo and Melquiond's round-to-odd
lemma, here for target significands of p <= 24 bits):

- Every value of a format is a float64 with at most 24 significant bits, so its float64 code
  ends in 0: ``odd(v)`` is never a format value unless ``v`` is (then ``odd(v) == v``).
- ``odd(v)`` lies in the same open interval between consecutive float64 numbers as ``v``; the
  format's grid points at v's binade are float64 numbers 2^(52 - M) >= 2^29 float64 ulps apart,
  so ``v`` and ``odd(v)`` lie between the same two neighbours of the format, on the same side of
  their midpoint (the midpoint is a float64 too) and never on it unless ``v`` is. Every
  deterministic mode (nearest even/away, toward zero, up, down, odd) and the overflow and
  flush-to-zero decisions depend only on that, so they give the same result for both.
- Below float64's normal range (|v| < 2^-1022) float64's spacing 2^-1074 is still far finer
  than any format's smallest quantum (>= 2^-149), so the same argument holds with subnormals;
  with flush-to-zero, v and odd(v) both lie far below smallest_normal / 2 and flush to zero of
  v's sign. Above float64's max, odd(v) is +-max(float64) (an odd code), beyond every
  format's max: both overflow the same way in every mode.

Stochastic rounding draws against the fraction of ``odd(v)``, which differs from ``v``'s by less
than one float64 ulp, i.e. by less than 2^(M - 52) <= 2^-29 of the format's spacing.
"""

from __future__ import annotations

import numbers
from fractions import Fraction

import numpy as np

_F64_MANT = 52  # float64 stores 52 mantissa bits (53 significant bits with the hidden one)


# --- argument checks -------------------------------------------------------------------------
def check_bool(name: str, value: object) -> bool | None:
    """None, or ``value`` as a bool when it is a ``bool`` / ``np.bool_``; else a TypeError."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(
        f"{name} must be True, False or None (a bool or numpy.bool_), got {value!r} "
        f"(a {type(value).__name__})"
    )


def integer(name: str, value: object, lo: int, hi: int, about: str = "") -> int:
    """``value`` as a Python int when it is an ``int`` or numpy integer in ``lo..hi``; else a
    ValueError "NAME must be an integer in LO..HI ABOUT, got VALUE" (``about``: e.g. "for
    float16"). A bool (``True``, ``np.True_``) is refused: where an integer is meant it is a
    mistake."""
    ok = (isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
          and lo <= value <= hi)
    if not ok:
        about = f" {about}" if about else ""
        raise ValueError(f"{name} must be an integer in {lo}..{hi}{about}, got {value!r}")
    return int(value)  # type: ignore[call-overload]  # (an int or np.integer, checked above)


def flag(name: str, value: object) -> bool:
    """``value`` as a bool when it is a ``bool`` or ``np.bool_``; else a ValueError naming
    ``name`` (the strings "False" and "0" and the number 0 are not flags)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ValueError(f"{name} must be True or False, got {value!r}")


def generator(rng: object) -> np.random.Generator:
    """A numpy Generator from ``rng``: None (fresh entropy), a non-negative int seed, or a
    Generator (used as is)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, (bool, np.bool_)):
        if rng < 0:
            raise ValueError(f"rng must be None, a non-negative int seed or a "
                             f"numpy.random.Generator, got the negative seed {rng}")
        return np.random.default_rng(int(rng))
    raise TypeError(f"rng must be None, a non-negative int seed or a numpy.random.Generator, "
                    f"got {rng!r} (a {type(rng).__name__})")


def check_not_masked(name: str, x: object) -> None:
    """Refuse numpy masked arrays: fpsim has no masks, and dropping one silently is wrong."""
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError(
            f"{name} is a numpy masked array; fpsim does not carry masks. Pass "
            f"{name}.filled(np.nan) to round masked entries as NaN, or {name}.data to ignore "
            f"the mask"
        )


def check_out(out: object, arr: np.ndarray) -> np.ndarray:
    """Validate ``out=`` for an input ``arr``; returns the input to read (a copy of ``arr`` when
    ``out`` overlaps it without being exactly the same elements)."""
    if not isinstance(out, np.ndarray) or out.dtype != arr.dtype or out.shape != arr.shape:
        got = f"{out.dtype} {out.shape}" if isinstance(out, np.ndarray) else type(out).__name__
        raise ValueError(f"out must be a numpy array of dtype {arr.dtype} and shape {arr.shape}; "
                         f"got {got}")
    if not out.flags.writeable:
        raise ValueError(f"out must be a writable array; got a read-only {out.dtype} array of "
                         f"shape {out.shape} (pass a writable array, or out=None)")
    if np.may_share_memory(out, arr) and not _same_elements(out, arr):
        return arr.copy()  # out overlaps the input: read from a copy, or the writes corrupt it
    return arr


def _same_elements(a: np.ndarray, b: np.ndarray) -> bool:
    """True when a and b view exactly the same memory, element for element (in-place rounding)."""
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and a.shape == b.shape and a.strides == b.strides)


# --- wide input -> float64, rounded to odd ------------------------------------------------------
def to_float64_odd(arr: np.ndarray, name: str) -> np.ndarray:
    """float64 values of an int, uint, longdouble or object (Python numbers) array, rounded to
    odd where inexact (see the module docstring); exact input stays exact."""
    if arr.dtype.kind in "iu" and arr.dtype.itemsize == 8:
        with np.errstate(over="ignore"):  # -(-2^63) wraps to 2^63 as uint64, as intended
            return _int64_to_odd(arr)
    if arr.dtype.kind == "f" and arr.dtype.itemsize > 8:
        with np.errstate(over="ignore"):  # beyond float64's range: handled as too_big
            return _longdouble_to_odd(arr)
    if arr.dtype == object:
        flat = [_object_to_odd(v, name) for v in arr.reshape(-1)]
        return np.array(flat, dtype=np.float64).reshape(arr.shape)
    return arr.astype(np.float64)


def _odd_magnitude(mag: np.ndarray) -> np.ndarray:
    """uint64 magnitudes truncated to 53 significant bits, last kept bit set if any was dropped."""
    approx = mag.astype(np.float64)  # within a factor 2 of mag: fixes the bit length to +-1
    _, exp = np.frexp(approx)
    shift = np.maximum(exp.astype(np.int64) - (_F64_MANT + 1), 0)
    kept = mag >> shift.astype(np.uint64)
    shift = np.where((shift > 0) & (kept < np.uint64(1 << _F64_MANT)), shift - 1, shift)
    s = shift.astype(np.uint64)
    one = np.uint64(1)
    dropped = (mag & ((one << s) - one)) != 0
    top = (mag >> s) | dropped.astype(np.uint64)  # <= 53 bits
    return np.ldexp(top.astype(np.float64), shift)  # exact: 53 bits, times a power of two


def _int64_to_odd(arr: np.ndarray) -> np.ndarray:
    u = arr.view(np.uint64) if arr.dtype.kind == "i" else arr
    if arr.dtype.kind == "i":
        neg = arr < 0
        mag = np.where(neg, (~u) + np.uint64(1), u)  # two's complement |v|, also for -2^63
    else:
        neg = np.zeros(arr.shape, dtype=bool)
        mag = u
    out = _odd_magnitude(np.asarray(mag, dtype=np.uint64))
    return np.where(neg, -out, out)


def _longdouble_to_odd(arr: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = arr.astype(np.float64)
    finite_in = np.isfinite(arr)
    too_big = finite_in & np.isinf(x)
    x = np.where(too_big, np.copysign(np.finfo(np.float64).max, x), x)
    with np.errstate(invalid="ignore"):  # inf - inf where the input was beyond float64
        rest = np.where(finite_in & ~too_big, arr - x.astype(arr.dtype), 0)  # exact remainder
    even = (x.view(np.int64) & 1) == 0
    step = finite_in & ~too_big & (rest != 0) & even
    toward = np.where(rest > 0, np.inf, -np.inf)
    return np.where(step, np.nextafter(x, toward), x)


def _object_to_odd(v: object, name: str) -> float:
    if isinstance(v, (bool, np.bool_)):
        return float(v)
    if isinstance(v, numbers.Integral):  # numpy integers too
        return fraction_to_odd(Fraction(int(v)))
    if isinstance(v, Fraction):
        return fraction_to_odd(v)
    if isinstance(v, (float, np.floating)):  # a float64 or narrower is exact; longdouble not
        return fraction_to_odd(Fraction(*v.as_integer_ratio())) if np.isfinite(v) else float(v)
    raise TypeError(f"{name} must be numeric (float, int or bool values); it holds {v!r} "
                    f"(a {type(v).__name__})")


def fraction_to_odd(v: Fraction) -> float:
    """The exact rational ``v`` as a float64 rounded to odd (see the module docstring)."""
    if v == 0:
        return 0.0
    neg = v < 0
    a = -v if neg else v
    e = a.numerator.bit_length() - a.denominator.bit_length()  # floor(log2 a) is e or e - 1
    if Fraction(2) ** e > a:
        e -= 1
    if e > 1023:
        out = float(np.finfo(np.float64).max)
    else:
        q = max(e, -1022) - _F64_MANT  # float64's spacing at a
        scaled = a / Fraction(2) ** q
        k = scaled.numerator // scaled.denominator
        if scaled != k and k % 2 == 0:
            k += 1
        out = k * 2.0**q  # exact: k < 2^53 and q >= -1074
    return -out if neg else out
