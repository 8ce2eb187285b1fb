"""Float formats as data: a frozen dataclass plus numpy.finfo-style derived properties.

A format with ``exponent_bits`` E and ``mantissa_bits`` M stores a code ``S|E..E|M..M``.
Exponent field ``e`` in 1..(top) holds normals ``(-1)^S * 2^(e - bias) * (1 + m / 2^M)``;
field 0 holds zero and the subnormals ``(-1)^S * 2^(1 - bias) * (m / 2^M)``.
What the all-ones exponent field means depends on ``nan``:

- ``"ieee"``: it is reserved: mantissa 0 is +-inf, any other mantissa is NaN (fp16, bf16, e5m2).
- ``"fn"``: it holds numbers, except ``S.1..1.1..1`` which is NaN; no inf (OCP e4m3fn).
- ``"fnuz"``: every code is a number except ``1.0..0.0..0`` (the -0 code), the single NaN; no -0.
- ``"none"``: every code is a number; no NaN and no inf (e2m1fn and the other MX element types).

``inf=True`` with ``nan`` other than ``"ieee"`` is the IEEE P3109 layout: the largest magnitude
code that is not NaN (per sign) is +-inf, and ``max`` is the code below it (P3109's extended
domain: ``0x7F``/``0xFF`` in signed binary8, ``0xFE`` in unsigned ones).

Two more fields describe scale formats and P3109's unsigned formats:

- ``signed=False``: no sign bit (``bits = E + M``); the format holds no negative number and
  no -0. Rounding a negative non-zero number to it gives NaN (it is out of the format's range),
  -0 gives +0.
- ``zero=False``: exponent field 0 holds normals too (``emin = -bias``): no zero, no subnormals.
  Only exponent-only formats (``mantissa_bits == 0``) may drop zero: the OCP MX scale E8M0FNU,
  values ``2^-127 .. 2^127``, NaN ``0xFF``. Zero rounds to NaN there (see fpsim.rounding).

``overflow`` says what a finite value too large for the format becomes under the
round-to-nearest modes: ``"inf"`` (needs ``inf=True``), ``"nan"`` or ``"saturate"`` (clamp to
+-max). Left as ``None`` it is derived: inf if the format has inf, else NaN if it has NaN,
else saturate (this reproduces ml_dtypes' conversions).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from fpsim import _validate

NAN_KINDS = ("ieee", "fn", "fnuz", "none")
OVERFLOW_KINDS = ("inf", "saturate", "nan")

# Every format's values must be exactly representable in the float32 carrier.
_CARRIER_EMAX = 127
_CARRIER_MIN_QUANTUM = -149  # log2 of float32's smallest subnormal


def _check_int(name: str, value: object, lo: int, hi: int) -> int:
    return _validate.integer(name, value, lo, hi)  # numpy integers too, as Python ints


@dataclass(frozen=True)
class Format:
    """A binary floating-point format whose values fit the float32 carrier.

    >>> fp16 = Format("fp16", 5, 10)
    >>> fp16.max, fp16.smallest_normal, fp16.smallest_subnormal, fp16.eps
    (65504.0, 6.103515625e-05, 5.960464477539063e-08, 0.0009765625)
    """

    name: str
    exponent_bits: int
    mantissa_bits: int
    # None means the IEEE default 2^(E-1) - 1; __post_init__ sets it, so it is an int after
    bias: int = field(default=None, kw_only=True)  # type: ignore[assignment]
    subnormals: bool = field(default=True, kw_only=True)
    inf: bool = field(default=True, kw_only=True)
    nan: str = field(default="ieee", kw_only=True)
    overflow: str | None = field(default=None, kw_only=True)
    signed: bool = field(default=True, kw_only=True)
    zero: bool = field(default=True, kw_only=True)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        for text in ("name", "nan", "overflow"):  # np.str_ stored as str (its repr differs)
            if isinstance(getattr(self, text), str):
                object.__setattr__(self, text, str(getattr(self, text)))
        # numpy integers and bools are accepted and stored as Python ints and bools
        object.__setattr__(self, "exponent_bits", _check_int("exponent_bits",
                                                             self.exponent_bits, 1, 8))
        object.__setattr__(self, "mantissa_bits", _check_int("mantissa_bits",
                                                             self.mantissa_bits, 0, 23))
        if self.bias is None:
            object.__setattr__(self, "bias", 2 ** (self.exponent_bits - 1) - 1)
        object.__setattr__(self, "bias", _check_int("bias", self.bias, -(2**10), 2**10))
        if self.nan not in NAN_KINDS:
            raise ValueError(f"nan must be one of {NAN_KINDS}, got {self.nan!r}")
        for flag in ("inf", "subnormals", "signed", "zero"):
            object.__setattr__(self, flag, _validate.flag(flag, getattr(self, flag)))
        if self.nan == "ieee" and not self.inf:
            raise ValueError(
                "nan='ieee' has inf (the all-ones exponent holds inf and NaN); for a format "
                f"without inf use nan='fn', 'fnuz' or 'none'; got inf={self.inf}, nan='ieee'"
            )
        if self.nan == "fnuz" and not self.signed:
            raise ValueError("nan='fnuz' puts NaN at the -0 code, which needs a sign bit; an "
                             "unsigned format takes nan='fn' (NaN at the all-ones code) or 'none'")
        if not self.zero and (self.mantissa_bits != 0 or self.signed or self.subnormals):
            raise ValueError(
                "zero=False is for exponent-only scale formats: it needs mantissa_bits=0, "
                f"signed=False and subnormals=False; got mantissa_bits={self.mantissa_bits}, "
                f"signed={self.signed}, subnormals={self.subnormals}"
            )
        if self.overflow is None:
            derived = "inf" if self.inf else ("nan" if self.nan != "none" else "saturate")
            object.__setattr__(self, "overflow", derived)
        if self.overflow not in OVERFLOW_KINDS:
            raise ValueError(f"overflow must be one of {OVERFLOW_KINDS}, got {self.overflow!r}")
        if self.overflow == "inf" and not self.inf:
            raise ValueError(f"overflow='inf' needs a format with inf; {self.name} has none")
        if self.overflow == "nan" and self.nan == "none":
            raise ValueError(f"overflow='nan' needs a format with NaN; {self.name} has none")
        if self.max_code < (1 << self.mantissa_bits) and self.zero:
            raise ValueError(
                f"{self.name}: {self.exponent_bits} exponent bit(s) with nan={self.nan!r} "
                "leave no normal numbers; use more exponent bits"
            )
        if self.emax > _CARRIER_EMAX:
            raise ValueError(
                f"{self.name}: largest exponent {self.emax} exceeds float32's {_CARRIER_EMAX}; "
                "raise the bias or use fewer exponent bits"
            )
        if self.emin - self.mantissa_bits < _CARRIER_MIN_QUANTUM:
            raise ValueError(
                f"{self.name}: smallest value 2^{self.emin - self.mantissa_bits} is below "
                f"float32's 2^{_CARRIER_MIN_QUANTUM}; lower the bias or use fewer bits"
            )

    # --- code layout -----------------------------------------------------------------
    @property
    def bits(self) -> int:
        """Total width of a code: sign (if signed) + exponent + mantissa."""
        return int(self.signed) + self.exponent_bits + self.mantissa_bits

    @property
    def nexp(self) -> int:
        return self.exponent_bits

    @property
    def nmant(self) -> int:
        return self.mantissa_bits

    @property
    def precision(self) -> int:
        """Significand bits including the hidden bit (p = M + 1)."""
        return self.mantissa_bits + 1

    @property
    def max_code(self) -> int:
        """Magnitude code (exponent and mantissa fields, no sign) of the largest finite value.

        ``ieee``: ``1..10|1..1`` (the all-ones exponent is inf/NaN); ``fn``: all ones minus 1
        (all ones is NaN); ``fnuz``/``none``: all ones. P3109-style inf (``inf`` with ``nan``
        other than ``"ieee"``) takes the code above max, so max moves one code down.
        """
        ones = (1 << (self.exponent_bits + self.mantissa_bits)) - 1
        if self.nan == "ieee":
            return ones - (1 << self.mantissa_bits)
        top = ones - 1 if self.nan == "fn" else ones
        return top - 1 if self.inf else top

    @property
    def inf_code(self) -> int | None:
        """Magnitude code of +inf, or None for formats without inf."""
        if not self.inf:
            return None
        return self.max_code + 1  # ieee: 1..1|0..0; P3109: the code above max

    @property
    def max_exponent_field(self) -> int:
        """Exponent field of the largest finite value."""
        return self.max_code >> self.mantissa_bits

    @property
    def max_mantissa_field(self) -> int:
        """Mantissa field of the largest finite value."""
        return self.max_code & ((1 << self.mantissa_bits) - 1)

    # --- finfo-style values --------------------------------------------------------------
    @property
    def emax(self) -> int:
        """Unbiased exponent of the largest finite value."""
        return self.max_exponent_field - self.bias

    @property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal value (``-bias`` without zero)."""
        return (1 if self.zero else 0) - self.bias

    @property
    def maxexp(self) -> int:
        """Smallest power of two that overflows (numpy.finfo.maxexp)."""
        return self.emax + 1

    @property
    def minexp(self) -> int:
        return self.emin

    @property
    def max_exact(self) -> Fraction:
        m = self.mantissa_bits
        return Fraction(2**m + self.max_mantissa_field, 2**m) * Fraction(2) ** self.emax

    @property
    def max(self) -> float:
        return float(self.max_exact)

    @property
    def min(self) -> float:
        """The most negative value, -max; unsigned formats: the smallest value (as ml_dtypes'
        finfo(float8_e8m0fnu).min)."""
        if not self.signed:
            return 0.0 if self.zero else self.smallest_normal
        return -self.max

    @property
    def smallest_normal(self) -> float:
        return 2.0**self.emin

    @property
    def smallest_subnormal(self) -> float:
        """Smallest positive value: 2^(emin - M), or smallest_normal when subnormals are off."""
        if not self.subnormals:
            return self.smallest_normal
        return 2.0 ** (self.emin - self.mantissa_bits)

    @property
    def eps(self) -> float:
        """Distance from 1.0 to the next larger value: 2^-M."""
        return 2.0**-self.mantissa_bits

    @property
    def has_negative_zero(self) -> bool:
        return self.signed and self.zero and self.nan != "fnuz"

    @property
    def has_nan(self) -> bool:
        return self.nan != "none"

    # --- containment (the one rule both promotion policies wrap) ----------------------------
    def contains(self, other: Format | str) -> bool:
        """True when every value ``other`` holds is a value of ``self``: every finite value,
        inf if ``other`` has inf, NaN if it has NaN. Exact, by the binades of ``other``.

        A flush-to-zero format (``subnormals=False``) holds only what its rounding can produce,
        so no subnormals. Zero counts once: a format without -0 (fnuz) still contains formats
        that have -0 (casting -0 there gives +0, the same number; see ``values``).

        >>> FP16 = Format("fp16", 5, 10)
        >>> Format("fp32", 8, 23).contains(FP16), FP16.contains(Format("bf16", 8, 7))
        (True, False)
        >>> FP16.replace(subnormals=False).contains(FP16), FP16.contains(FP16.replace(
        ...     subnormals=False))
        (False, True)

        ``other`` may be a name or alias (``FP32.contains("fp16")``), as everywhere else.
        """
        if not isinstance(other, Format):
            from fpsim.catalog import get_format  # (the catalog is built from this module)

            other = get_format(other)
        return _contains(self, other)

    def quantum_at(self, e: int) -> int | None:
        """log2 of the spacing of this format's values in the binade [2^e, 2^(e+1)), or None
        when the format holds no value there (below its range; flush-to-zero: below emin)."""
        if e >= self.emin:
            return e - self.mantissa_bits
        if self.subnormals and e >= self.emin - self.mantissa_bits:
            return self.emin - self.mantissa_bits
        return None

    def binade_needs(self) -> tuple[tuple[int, int], ...]:
        """``(e, q)`` pairs: a format holding every value of this one needs spacing <= 2^q in
        the binade [2^e, 2^(e+1)). Only the first and last binade of the normals and of the
        subnormals are listed: the needed spacing relative to the binade is the same inside
        each run, and whether another format meets it changes monotonically with e."""
        m = self.mantissa_bits
        full = 2**m - 1

        def normal(e: int) -> tuple[int, int]:
            top = self.max_mantissa_field if e == self.emax else full
            return (e, e - m if top >= 1 else e)  # a binade of 2^e alone needs only 2^e

        needs = [normal(self.emin), normal(self.emax)]
        if self.subnormals and m >= 1:
            q = self.emin - m  # every subnormal binade holds an odd multiple of 2^q
            needs += [(q, q), (self.emin - 1, q)]
        return tuple(needs)

    def replace(self, **changes: Any) -> Format:
        """A copy with some fields changed (dataclasses.replace), validated again."""
        from dataclasses import replace

        return replace(self, **changes)

    def __str__(self) -> str:
        return self.name


@functools.lru_cache(maxsize=1024)
def _contains(wide: Format, narrow: Format) -> bool:
    if wide == narrow:
        return True
    if (narrow.inf and not wide.inf) or (narrow.has_nan and not wide.has_nan):
        return False
    if (narrow.signed and not wide.signed) or (narrow.zero and not wide.zero):
        return False
    if narrow.max_exact > wide.max_exact:
        return False
    for e, q in narrow.binade_needs():
        have = wide.quantum_at(e)
        if have is None or have > q:
            return False
    return True
