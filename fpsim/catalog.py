"""The named formats and ``get_format``, which turns a name, alias, dtype or Format into a Format.

Names follow ml_dtypes. Each constant's defaults reproduce ml_dtypes' float32 -> format
conversion bit for bit (overflow to inf where the format has inf, to NaN where it has NaN but
no inf, saturation where it has neither).
"""

from __future__ import annotations

import re

import numpy as np

from fpsim import _validate
from fpsim._names import suggest
from fpsim.formats import Format

FP32 = Format("float32", 8, 23)
TF32 = Format("tf32", 8, 10)
FP16 = Format("float16", 5, 10)
BF16 = Format("bfloat16", 8, 7)
E4M3FN = Format("float8_e4m3fn", 4, 3, inf=False, nan="fn")
E5M2 = Format("float8_e5m2", 5, 2)
E4M3 = Format("float8_e4m3", 4, 3)
E3M4 = Format("float8_e3m4", 3, 4)
E4M3FNUZ = Format("float8_e4m3fnuz", 4, 3, bias=8, inf=False, nan="fnuz")
E5M2FNUZ = Format("float8_e5m2fnuz", 5, 2, bias=16, inf=False, nan="fnuz")
E4M3B11FNUZ = Format("float8_e4m3b11fnuz", 4, 3, bias=11, inf=False, nan="fnuz")
E2M3FN = Format("float6_e2m3fn", 2, 3, inf=False, nan="none")
E3M2FN = Format("float6_e3m2fn", 3, 2, inf=False, nan="none")
E2M1FN = Format("float4_e2m1fn", 2, 1, inf=False, nan="none")
# the OCP MX block scale: unsigned, exponent only, 2^-127 .. 2^127, NaN 0xFF, no zero
E8M0FNU = Format("float8_e8m0fnu", 8, 0, bias=127, signed=False, zero=False, subnormals=False,
                 inf=False, nan="fn")

P3109_DOMAINS = ("extended", "finite")


def p3109(p: int, *, signed: bool = True, domain: str = "extended") -> Format:
    """The IEEE P3109 binary8 format of precision ``p`` (significand bits, hidden one included).

    As the P3109 interim report (and gfloat's ``format_info_p3109(8, p, ...)``) defines them:

    - signed, ``p`` in 1..7: ``S|E..E|M..M`` with ``E = 8 - p``, ``M = p - 1``, bias
      ``2^(7 - p)``; one NaN at ``0x80`` (the -0 code: no -0); subnormals;
    - unsigned (``signed=False``), ``p`` in 1..7: ``E = 9 - p`` bits, bias ``2^(8 - p)``, one
      NaN at ``0xFF``;
    - ``domain="extended"``: +-inf at the largest non-NaN code (``0x7F``/``0xFF``, unsigned
      ``0xFE``), and overflow goes to inf; ``"finite"``: that code is max, and overflow gives
      NaN. ``fpsim.round(..., overflow="saturate")`` is the saturating conversion of either.

    Names follow the interim report: ``binary8p{p}{s|u}{e|f}`` (gfloat's ``p3109_k8p{p}{s|u}{e|f}``
    is an alias).

    >>> f = p3109(4)
    >>> f.name, f.max, f.smallest_subnormal, f.inf
    ('binary8p4se', 224.0, 0.0009765625, True)
    """
    p = _validate.integer("p", p, 1, 7, "(significand bits of a binary8 format)")  # numpy too
    signed = _validate.flag("signed", signed)
    if not isinstance(domain, str) or domain not in P3109_DOMAINS:
        raise ValueError(f"domain must be one of {P3109_DOMAINS}, got {domain!r}")
    exponent_bits = 8 - p + (0 if signed else 1)
    name = f"binary8p{p}{'s' if signed else 'u'}{domain[0]}"
    return Format(name, exponent_bits, p - 1, bias=2 ** (exponent_bits - 1), signed=signed,
                  inf=domain == "extended", nan="fnuz" if signed else "fn")


P3109_FORMATS: tuple[Format, ...] = tuple(
    p3109(p, signed=signed, domain=domain)
    for p in range(1, 8) for signed in (True, False) for domain in P3109_DOMAINS
)

CATALOG: tuple[Format, ...] = (
    FP32, TF32, FP16, BF16, E4M3FN, E5M2, E4M3, E3M4,
    E4M3FNUZ, E5M2FNUZ, E4M3B11FNUZ, E2M3FN, E3M2FN, E2M1FN, E8M0FNU,
    # P3109 corners (every P3109 binary8 format is in P3109_FORMATS, found by name):
    # p = 1 (no mantissa) unsigned, the common p = 3 and 4, and a finite one
    *(f for f in P3109_FORMATS if f.name in ("binary8p1ue", "binary8p3se", "binary8p4se",
                                             "binary8p4sf")),
)

_ALIASES: dict[str, Format] = {
    "fp32": FP32, "f32": FP32, "single": FP32,
    "fp16": FP16, "f16": FP16, "half": FP16,
    "bf16": BF16,
    "e4m3fn": E4M3FN, "fp8_e4m3": E4M3FN, "fp8_e4m3fn": E4M3FN,
    "e5m2": E5M2, "fp8_e5m2": E5M2,
    "e4m3": E4M3, "e3m4": E3M4,
    "e4m3fnuz": E4M3FNUZ, "e5m2fnuz": E5M2FNUZ, "e4m3b11fnuz": E4M3B11FNUZ,
    "e2m3fn": E2M3FN, "fp6_e2m3": E2M3FN,
    "e3m2fn": E3M2FN, "fp6_e3m2": E3M2FN,
    "e2m1fn": E2M1FN, "fp4_e2m1": E2M1FN, "fp4": E2M1FN,
    "e8m0fnu": E8M0FNU, "e8m0": E8M0FNU,
} | {"p3109_k8" + f.name[len("binary8"):]: f for f in P3109_FORMATS}
_BY_NAME: dict[str, Format] = ({f.name: f for f in P3109_FORMATS}
                               | {f.name: f for f in CATALOG} | _ALIASES)


# What a reader must know to pick between two formats whose names are easily confused: shown
# by ``fpsim formats`` (NOTES, per format) and in the error for an unknown name near them.
NOTES: dict[str, str] = {
    E4M3FN.name: (f"the alias fp8_e4m3 means this format (OCP FP8 E4M3: no inf, max "
                  f"{E4M3FN.max:g}); e4m3 is another format, {E4M3.name} (max {E4M3.max:g})"),
    E4M3.name: (f"IEEE-style E4M3 with inf (max {E4M3.max:g}), alias e4m3; the alias fp8_e4m3 "
                f"is not this format but {E4M3FN.name} (max {E4M3FN.max:g})"),
}
_E4M3_NOTE = (f"fp8_e4m3 is {E4M3FN.name} (no inf, max {E4M3FN.max:g}); e4m3 is {E4M3.name} "
              f"(inf, max {E4M3.max:g})")
# a name that asks for a width only: fp8, float8, f8, fp6, float4, 8bit, 8-bit ...
_WIDTH = re.compile(r"(?:fp|float|f|binary)?[ _-]?(\d+)(?:[ _-]?bits?)?")
def known_names() -> list[str]:
    """Every name and alias get_format accepts, sorted."""
    return sorted(_BY_NAME)


def _short_alias(fmt: Format) -> str:
    """The name a message suggests for a format: its shortest ``fp...`` alias, else its
    shortest alias, else its name."""
    aliases = sorted((n for n, f in _ALIASES.items() if f is fmt and not n.startswith("p3109")),
                     key=lambda n: (not n.startswith("fp"), len(n), n))
    return aliases[0] if aliases else fmt.name


def families() -> str:
    """The formats of the catalog in a few words (``float8_{e4m3fn,e5m2,...}``, P3109 as a
    pattern), for messages; every name and alias is in ``known_names()`` and
    ``fpsim formats``."""
    groups: dict[str, list[str]] = {}
    for f in CATALOG:
        if f not in P3109_FORMATS:
            head, _, tail = f.name.partition("_")
            groups.setdefault(head, []).append(tail)
    named = [head if tails == [""] else f"{head}_{tails[0]}" if len(tails) == 1
             else f"{head}_{{{','.join(tails)}}}" for head, tails in groups.items()]
    return (", ".join(named) + ", binary8p{1..7}{s|u}{e|f} (P3109); aliases such as fp16, "
            "bf16, fp8_e4m3: `fpsim formats` or fpsim.known_names()")


def _width_hint(key: str) -> str:
    """"did you mean one of the 8-bit formats: ...?" when ``key`` names a width only."""
    m = _WIDTH.fullmatch(key)
    width = int(m.group(1)) if m else 0
    same = [f for f in CATALOG if f.bits == width and f not in P3109_FORMATS]
    if not same:
        return ""
    shown = ", ".join(repr(_short_alias(f)) for f in same)
    more = " or a P3109 binary8p{1..7}{s|u}{e|f}" if width == 8 else ""
    return f"did you mean one of the {width}-bit formats: {shown}{more}?"


def unknown_format(name: str) -> str:
    """The message for an unknown format name: the closest names (for a width such as ``fp8``
    or ``float8``, the formats of that width), the families (not every alias), and the
    fp8_e4m3 / e4m3 note when the name or a suggestion is an E4M3."""
    key = name.strip().lower()
    hint = _width_hint(key) or suggest(name, known_names())
    message = f"unknown format {name!r}; " + (f"{hint} " if hint else "")
    message += f"formats: {families()}"
    return message + (f"; note: {_E4M3_NOTE}" if "e4m3" in key + hint else "")


def get_format(x: object) -> Format:
    """Look up a format by Format, name or alias (case-insensitive), or numpy/ml_dtypes dtype.

    An unknown name raises ``ValueError`` with the closest names (for ``fp8`` or ``float8``,
    the 8-bit formats) and the families, not every alias.

    >>> get_format("half") is FP16, get_format(np.float16) is FP16
    (True, True)
    """
    if isinstance(x, Format):
        return x
    if isinstance(x, str):
        key = x.strip().lower()
        if key in _BY_NAME:
            return _BY_NAME[key]
        raise ValueError(unknown_format(x))
    try:
        dtype = np.dtype(x)  # type: ignore[call-overload]
    except TypeError:
        raise ValueError(
            f"cannot make a format from {x!r} (a {type(x).__name__}); pass a Format, a name "
            f"or alias ({families()}) or a numpy/ml_dtypes dtype"
        ) from None
    if dtype.name in _BY_NAME:
        return _BY_NAME[dtype.name]
    raise ValueError(
        f"dtype {dtype.name} has no fpsim format (values must fit float32); formats: "
        f"{families()}"
    )
