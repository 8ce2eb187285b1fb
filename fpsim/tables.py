"""The format table that ``fpsim formats`` prints, importable without the command line.

Columns: name, total bits, E and M (exponent and mantissa bits), bias, max, the smallest normal
and subnormal, eps (the gap above 1), ``overflow`` (what a finite value too large for the
format becomes under round to nearest: inf, NaN or saturate to max) and the special codes.
"""

from __future__ import annotations

from collections.abc import Sequence

from fpsim.bits import nan_code
from fpsim.catalog import CATALOG, NOTES, get_format, known_names
from fpsim.explain import field_string
from fpsim.formats import Format


def _specials(fmt: Format) -> str:
    """The special codes of a format in words, read from the codes themselves."""
    def shown(code: int, with_sign: bool = False) -> str:  # the fields, sign bit dropped
        text = field_string(code, fmt).replace(" ", ".")
        return text if with_sign or not fmt.signed else text[2:]

    ones_e = "1" * fmt.exponent_bits
    if fmt.nan == "ieee":
        return f"inf = S.{ones_e}.{'0' * fmt.mantissa_bits}, NaN = S.{ones_e}.(not 0)"
    inf_code = fmt.inf_code
    head = "no inf" if inf_code is None else f"inf = {'S.' * fmt.signed}{shown(inf_code)}"
    head += "" if fmt.signed else "; unsigned"
    head += "" if fmt.zero else "; no zero"
    code = nan_code(fmt)
    if fmt.nan == "fn":
        return f"{head}; NaN = {'S.' * fmt.signed}{shown(code or 0)} only"
    if fmt.nan == "fnuz":
        return f"{head}, no -0; one NaN = {shown(code or 0, True)} (the -0 code)"
    return f"{head}, no NaN"


def format_table(formats: Sequence[Format] = CATALOG) -> str:
    """The ``fpsim formats`` table: layout, range, precision and special-value rules."""
    header = ("name", "bits", "E", "M", "bias", "max", "min normal", "min subnormal", "eps",
              "overflow", "inf / NaN")
    rows = [header]
    for f in formats:
        rows.append((
            f.name, str(f.bits), str(f.exponent_bits), str(f.mantissa_bits), str(f.bias),
            f"{f.max:.6g}", f"{f.smallest_normal:.6g}", f"{f.smallest_subnormal:.6g}",
            f"{f.eps:.6g}", str(f.overflow), _specials(f),
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=False)) + "  " + r[-1]
             for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    aliases = []
    for f in formats:
        names = [n for n in known_names() if n != f.name and get_format(n) is f]
        if names:
            aliases.append(f"  {f.name}: {', '.join(names)}")
    notes = [f"  {f.name}: {NOTES[f.name]}" for f in formats if f.name in NOTES]
    return "\n".join(lines + ["", "aliases:"] + aliases + (["", "notes:"] + notes if notes else []))
