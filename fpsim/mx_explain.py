"""fpsim.mx's numpy reference path, block by block in float64, and ``explain``, which shows
one block's quantization step by step with it. The same decisions as the kernels of
fpsim.kernels.mx and fpsim.kernels.mx_general (see fpsim.mx's module docstring); the tests
hold both to an independent reference."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fpsim.bits import to_bits
from fpsim.catalog import E4M3FN, E8M0FNU
from fpsim.formats import Format
from fpsim.kernels.mx import SCALE_EMAX, SCALE_EMIN
from fpsim.mx import (
    BlockFormat,
    _tensor_amax,
    get_block_format,
    scale_rule,
    tensor_scale_of,
)
from fpsim.quantize import as_float_array
from fpsim.quantize import round as _round
from fpsim.rounding import RoundingMode, get_mode


def _padded(rows: np.ndarray, block: int) -> np.ndarray:
    """(rows, nb, block) with the trailing partial block padded by zeros (amax unchanged)."""
    r, n = rows.shape
    nb = -(-n // block)
    pad = np.zeros((r, nb * block), dtype=rows.dtype)
    pad[:, :n] = rows
    return pad.reshape(r, nb, block)


@dataclass
class _Blocks:
    """One quantization, block by block (float64 throughout)."""

    scale: np.ndarray  # (r, nb) scale values (NaN for a NaN block)
    scale_codes: np.ndarray  # (r, nb) uint8
    tensor_scale: float  # NVFP4; 1.0 for MX
    scaled: np.ndarray  # (r, nb, block) x / (scale * tensor_scale)
    elements: np.ndarray  # (r, nb, block) element values (0 in NaN or zero-scale blocks)
    values: np.ndarray  # (r, nb, block) dequantized float64
    amax: np.ndarray  # (r, nb)


def _mx_exponent(amax: np.ndarray, rule: str, elem: Format) -> np.ndarray:
    fr, ex = np.frexp(np.where(np.isfinite(amax) & (amax > 0), amax, 1.0))
    e = ex.astype(np.int64) - 1 - elem.emax
    if rule == "ceil":
        e = e + (amax > elem.max * np.ldexp(1.0, e))
    elif rule == "even":
        e = e + (2.0 * fr >= 2.0 - 2.0 ** -(elem.mantissa_bits + 1))
    e = np.where(amax == 0, SCALE_EMIN, e)
    return np.clip(e, SCALE_EMIN, SCALE_EMAX)


def _quantize_blocks(rows: np.ndarray, bf: BlockFormat, rule: str, mode: RoundingMode,
                     rng: object, tensor_scale: float = 1.0, rng_bits: int | None = None
                     ) -> _Blocks:
    blocks = _padded(rows.astype(np.float64), bf.block)
    amax = np.max(np.abs(blocks), axis=-1)  # NaN if any NaN, inf if any inf
    bad = ~np.isfinite(amax)
    if bf.two_level:
        target = np.where(bad, 0.0, amax) / (bf.element.max * tensor_scale)
        e4m3_mode = {"even": "nearest_even", "ceil": "up", "floor": "down"}[rule]
        scale = np.asarray(_round(target, E4M3FN, e4m3_mode, overflow="saturate"), np.float64)
        scale_codes = np.asarray(to_bits(scale, E4M3FN)).astype(np.uint8)
        divisor = scale * tensor_scale
    else:
        e = _mx_exponent(amax, rule, bf.element)
        scale = np.ldexp(1.0, e)
        scale_codes = (e + E8M0FNU.bias).astype(np.uint8)
        divisor = scale
    live = ~bad & (divisor > 0)
    scaled = blocks / np.where(live, divisor, 1.0)[..., None]
    elements = np.asarray(_round(scaled, bf.element, mode, rng=rng, overflow="saturate",
                                 rng_bits=rng_bits))
    # a zero scale (NVFP4 scale underflow, all-zero block) keeps each element's sign of zero
    elements = np.where(live[..., None], elements, np.copysign(0.0, np.where(bad[..., None],
                                                                               1.0, blocks)))
    if bf.integer:
        elements = elements + 0.0  # integers have no -0: -0 + 0 = +0
    values = elements * divisor[..., None]
    values = np.where(bad[..., None], np.nan, values)
    scale = np.where(bad, np.nan, scale)
    scale_codes = np.where(bad, np.uint8(E4M3FN.max_code + 1 if bf.two_level else 0xFF),
                           scale_codes).astype(np.uint8)
    return _Blocks(scale, scale_codes, tensor_scale, scaled, elements, values, amax)



def explain(block: object, fmt: BlockFormat | str, *, scale_rounding: str | None = None,
            mode: str | RoundingMode = "nearest_even") -> str:
    """One block's quantization as text: amax, the chosen scale, each element before and
    after, and which saturated or flushed to zero. ``block`` is 1-D, at most one block long
    (for nvfp4 it is a one-block tensor: its own amax sets the tensor scale).

    >>> print(explain(np.float32([500.0, 1.0, 1e-4]), "mxfp8_e4m3"))  # doctest: +ELLIPSIS
    mxfp8_e4m3 block of 3 (element float8_e4m3fn, max 448, emax 8; scale float8_e8m0fnu)
    amax 500 -> shared exponent floor(log2 500) - 8 = 0 (scale_rounding 'floor'): scale 2^0 ...
    ...
    """
    bf = get_block_format(fmt)
    x = as_float_array(block)
    if x.ndim != 1 or not 0 < x.size <= bf.block:
        raise ValueError(f"block must be 1-D with 1..{bf.block} elements for {bf.name}, got "
                         f"shape {x.shape}")
    rule = scale_rule(scale_rounding, bf)
    amax = _tensor_amax(np.ascontiguousarray(x.reshape(1, -1)))
    ts = tensor_scale_of(amax, bf) if bf.two_level else 1.0
    b = _quantize_blocks(x.reshape(1, -1), bf, rule, get_mode(mode), 0, ts)
    elem = bf.element
    lines = [f"{bf.name} block of {x.size} (element {elem.name}, max {elem.max:g}, emax "
             f"{elem.emax}; scale {bf.scale.name})"]
    amax, scale, code = float(b.amax[0, 0]), float(b.scale[0, 0]), int(b.scale_codes[0, 0])
    if not np.isfinite(scale):
        lines.append(f"amax {amax:g}: the block holds NaN or inf -> NaN scale (code "
                     f"0x{code:02x}); every element decodes to NaN")
    elif bf.two_level:
        lines.append(f"amax {amax:g}, tensor scale {b.tensor_scale:g}: block scale "
                     f"{amax:g} / (6 * {b.tensor_scale:g}) -> {scale:g} in E4M3 (code "
                     f"0x{code:02x}, scale_rounding {rule!r})")
    else:
        e = code - E8M0FNU.bias
        how = ("all zero: the smallest scale" if amax == 0 else
               f"floor(log2 {amax:g}) - {elem.emax} = {int(np.floor(np.log2(amax))) - elem.emax}"
               + (f", {rule} rule -> {e}" if rule != "floor" else ""))
        lines.append(f"amax {amax:g} -> shared exponent {how} (scale_rounding {rule!r}): "
                     f"scale 2^{e} (E8M0 code 0x{code:02x})")
    for i in range(x.size):
        v, s, q, r = (float(x[i]), float(b.scaled[0, 0, i]), float(b.elements[0, 0, i]),
                      float(b.values[0, 0, i]))
        note = ""
        if np.isfinite(scale) and abs(s) > elem.max:
            note = f"  saturated to +-{elem.max:g}"
        elif np.isfinite(scale) and s != 0 and q == 0:
            note = "  flushed to zero"
        lines.append(f"  [{i:2d}] {v:<14.7g} / scale = {s:<14.7g} -> element {q:<10g} -> "
                     f"{r:.7g}{note}")
    return "\n".join(lines)
