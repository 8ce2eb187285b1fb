"""Block-scaled formats: OCP Microscaling (MX v1.0) and NVFP4, exactly.

A block of consecutive elements along ``axis`` shares one scale; each element is stored in a
narrow element format and means ``element * scale``.

========== ========== ===== ======================== ==========================================
name       element    block scale                    element max (emax)
========== ========== ===== ======================== ==========================================
mxfp8_e4m3 E4M3FN     32    E8M0FNU (2^-127..2^127)  448 (8)
mxfp8_e5m2 E5M2       32    E8M0FNU                  57344 (15)
mxfp6_e3m2 E3M2FN     32    E8M0FNU                  28 (4)
mxfp6_e2m3 E2M3FN     32    E8M0FNU                  7.5 (2)
mxfp4_e2m1 E2M1FN     32    E8M0FNU                  6 (2)
mxint8     int8 / 64  32    E8M0FNU                  127/64 (0)
nvfp4      E2M1FN     16    E4M3FN, times one fp32   6 (2)
                            tensor scale
========== ========== ===== ======================== ==========================================

Decisions (each one a rule of ``quantize``, ``encode`` and ``decode`` alike):

- MX shared exponent (OCP MX v1.0, section 6.3): ``e = floor(log2(amax)) - emax_elem``, the
  scale is ``2^e``. ``scale_rounding`` picks the alternatives in use: ``"floor"`` (the spec;
  the block's largest element can exceed the element max and clip: E4M3 amax 500 -> e = 0,
  500 -> 448), ``"ceil"`` (the smallest e with ``amax <= max_elem * 2^e``: never clips, may
  waste a binade), ``"even"`` (amax first rounded to nearest even at the element's precision,
  then floor: clips less). ``e`` is clamped to E8M0's -127..127.
- Elements: ``x / 2^e`` rounded in the element format with any fpsim rounding mode
  (nearest-even by default, stochastic with ``rng``), saturating to +-max in every mode
  (E5M2 overflow gives 57344, never inf). Flush-to-zero is not applied: subnormal elements
  are kept, as the spec's element formats have them.
- Partial blocks: a trailing block shorter than the block size is its own block (its own
  amax); ``scales`` has the blocked axis shrunk to ``ceil(n / block)``.
- Specials: a NaN or inf anywhere in a block gives the NaN scale (E8M0 code 0xFF; NVFP4:
  E4M3 code 0x7F) and the whole block decodes to NaN, as the spec says. The element codes of
  such a block are 0.
- All-zero block: scale 2^-127 (E8M0 code 0x00, the smallest), elements zero; any scale would
  decode them to zero, and this is what the reference implementation (microxcaling) stores.
  Signs of zero are kept (E4M3's -0 code 0x80), except MXINT8, whose integers have no -0.
- MXINT8: element code ``c`` (uint8) means ``int8(c) / 64`` (two's complement, 2^-6 steps);
  rounding saturates symmetrically to +-127/64, so code 0x80 (-2) is never produced, but
  ``decode`` reads it as -2.
- NVFP4 (two-level scaling): ``tensor_scale = float32(amax) / (6 * 448)`` over the finite
  elements of the whole tensor (1.0 when that amax is 0); each block's scale
  ``amax_b / (6 * tensor_scale)`` is rounded to E4M3FN (nearest even by default;
  ``scale_rounding`` "ceil" / "floor" round it up / down), saturating at 448; elements are
  ``x / (block_scale * tensor_scale)`` rounded to E2M1 and saturated. A block scale that
  rounds to 0 flushes its block to signed zero. An amax beyond float32's range (float64
  input) is clamped to float32's max before the tensor scale is formed, so such values
  saturate to about float32's max, as the MX formats saturate (ours: the fp32 tensor scale
  would otherwise overflow and make every value NaN). Quotients are computed in float64, which
  for float32 input rounds once correctly (a quotient of 24-bit by 28-bit numbers is never
  within 2^-53 of an E2M1 or E4M3 midpoint unless on it); float64 input's quotient is first
  rounded to float64. The dequantized value ``element * block_scale *
  tensor_scale`` is computed exactly in float64 and rounded once (nearest even) to x's dtype.
- MX dequantized values ``element * 2^e`` are exact in float32 (they lie within float32's
  range, on its grid), so quantize returns x's carrier (float32 or float64, other input
  becomes float64) and ``decode`` returns float32.
- Codes: ``element_codes`` has x's shape (uint8; fp6 and fp4 codes in the low bits), scale
  codes are uint8 (E8M0 codes are the biased exponent ``e + 127``). ``decode`` takes uint8
  codes only (a code 300, 127.5 or -1 is refused, never wrapped), an NVFP4 block scale code
  without its sign bit and a positive finite tensor scale.
- Kernels and memory: every path runs in a numba kernel that writes only its outputs. The
  float32 nearest-even MX path runs in fpsim.kernels.mx (an addition trick; ``encode`` writes
  codes from the same rounding), float32 nearest-even NVFP4 with its default scale rule in
  fpsim.kernels.mx_nvfp4 (the same trick in float64; values or codes; rows of whole blocks
  in chunks of blocks, their scales first), float32 stochastic
  rounding (MX, and NVFP4 with its default scale rule; the full draw or ``rng_bits``) in
  fpsim.kernels.mx_stochastic; these fused kernels share one block walk
  (fpsim.kernels.mx.next_block), except NVFP4's for rows of whole blocks, which step by
  block index in chunks. Every other path (float64 input, the other modes and scale
  rules, a monitored call) runs in fpsim.kernels.mx_general, the same decisions through the
  general rounding kernel (the fused kernels are tested bit for bit against it). ``decode``
  looks both factors up in 256-entry tables (fpsim.kernels.mx_decode). NVFP4's tensor amax
  is one kernel pass over the bits; for rows of whole blocks it also keeps each block's amax
  (1/16 of the input's bytes), which the kernel after it reads instead of the elements. A
  copy made to put ``axis`` last takes the result in
  place, so every path peaks within 2x the input. ``explain`` keeps the numpy reference path
  (float64). Every kernel takes a range of whole blocks, and large arrays are split by blocks
  over threads (fpsim.kernels.threads, ``FPSIM_NUM_THREADS``): blocks are independent and
  each element draws its random bits from its own index, so any thread count gives the same
  bits.

Monitor: with ``fpsim.monitor()`` active, each call records under its site (default
``"mx"``) in ``Monitor.blocks``: blocks, elements, elements saturated (scaled magnitude above
the element max), flushed to zero (non-zero, rounded to 0), and blocks whose scale clipped
the maximum (the scaled amax exceeds the element max: possible with "floor" and "even").
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from fpsim import _kernels
from fpsim._names import unknown_name
from fpsim.bits import from_bits
from fpsim.blockwise import blockwise_scales as blockwise_scales  # re-exported: fpsim.mx's
from fpsim.blockwise import quantize_blockwise as quantize_blockwise  # Float8BlockScaling
from fpsim.catalog import E2M1FN, E2M3FN, E3M2FN, E4M3FN, E5M2, E8M0FNU
from fpsim.formats import Format
from fpsim.kernels.general import RANDOM_BITS
from fpsim.kernels.mx import SCALE_RULES, mx_encode_f32, mx_quantize_f32
from fpsim.kernels.mx_decode import mx_decode
from fpsim.kernels.mx_general import finite_amax_bits, finite_amax_f32, mx_blocks
from fpsim.kernels.mx_nvfp4 import (
    WHOLE,
    nvfp4_encode_f32,
    nvfp4_encode_f32_whole,
    nvfp4_quantize_f32,
    nvfp4_quantize_f32_whole,
    whole_block_amax_f32,
)
from fpsim.kernels.mx_stochastic import mx_stochastic_f32, nvfp4_stochastic_f32_whole
from fpsim.monitor import is_active as monitor_is_active
from fpsim.monitor import record_blocks
from fpsim.quantize import _seed, as_float_array, format_constants, nearest_even_f32_constants
from fpsim.rounding import RoundingMode, check_rng_bits, get_mode

# int8 / 64 as a float format: exponent field 0 holds m/64 (m < 64), field 1 holds 1 + m/64,
# so every value is k/64 for |k| <= 127 (a fixed-point grid with spacing 2^-6)
INT8_64 = Format("int8_over_64", 1, 6, bias=1, inf=False, nan="none")
MAX_BLOCK = 1 << 16  # the largest block BlockFormat accepts (ours: the formats use 16 and 32)
_FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class BlockFormat:
    """A block-scaled format: element format, block size and scale format.

    Every field is checked on construction: ``block`` is an int from 1 to ``MAX_BLOCK``;
    ``scale`` is E8M0FNU (an MX format) or E4M3FN (two-level, NVFP4-style, with one fp32
    tensor scale); ``element`` is a Format; ``integer`` (bool)
    marks MXINT8's two's complement codes and needs the element format ``INT8_64``.
    """

    name: str
    element: Format
    block: int
    scale: Format
    integer: bool = False  # element codes are two's complement int8 (MXINT8)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"BlockFormat name must be a non-empty str, got {self.name!r}")
        if not isinstance(self.element, Format):
            raise TypeError(f"BlockFormat element must be a fpsim Format, got "
                            f"{self.element!r}")
        if (isinstance(self.block, bool) or not isinstance(self.block, (int, np.integer))
                or not 1 <= self.block <= MAX_BLOCK):
            raise ValueError(f"BlockFormat block must be an int from 1 to {MAX_BLOCK}, got "
                             f"{self.block!r}")
        object.__setattr__(self, "block", int(self.block))
        if self.scale is not E8M0FNU and self.scale is not E4M3FN:
            raise ValueError(f"BlockFormat scale must be E8M0FNU (MX) or E4M3FN (two-level, "
                             f"as NVFP4), got {getattr(self.scale, 'name', self.scale)!r}")
        if not isinstance(self.integer, (bool, np.bool_)):
            raise TypeError(f"BlockFormat integer must be a bool, got {self.integer!r}")
        if self.integer and self.element != INT8_64:
            raise ValueError(f"BlockFormat integer=True needs the element format INT8_64 "
                             f"(int8 / 64), got {self.element.name!r}")

    @property
    def two_level(self) -> bool:
        """NVFP4: an E4M3 block scale times one fp32 tensor scale."""
        return self.scale is E4M3FN


BLOCK_FORMATS: dict[str, BlockFormat] = {
    "mxfp8_e4m3": BlockFormat("mxfp8_e4m3", E4M3FN, 32, E8M0FNU),
    "mxfp8_e5m2": BlockFormat("mxfp8_e5m2", E5M2, 32, E8M0FNU),
    "mxfp6_e3m2": BlockFormat("mxfp6_e3m2", E3M2FN, 32, E8M0FNU),
    "mxfp6_e2m3": BlockFormat("mxfp6_e2m3", E2M3FN, 32, E8M0FNU),
    "mxfp4_e2m1": BlockFormat("mxfp4_e2m1", E2M1FN, 32, E8M0FNU),
    "mxint8": BlockFormat("mxint8", INT8_64, 32, E8M0FNU, integer=True),
    "nvfp4": BlockFormat("nvfp4", E2M1FN, 16, E4M3FN),
}


def get_block_format(fmt: BlockFormat | str) -> BlockFormat:
    """A BlockFormat by name (see BLOCK_FORMATS); an unknown name lists the known ones."""
    if isinstance(fmt, BlockFormat):
        return fmt
    if isinstance(fmt, str) and fmt.strip().lower() in BLOCK_FORMATS:
        return BLOCK_FORMATS[fmt.strip().lower()]
    raise ValueError(unknown_name("block format", fmt, BLOCK_FORMATS, "known block formats"))


def scale_rule(scale_rounding: str | None, bf: BlockFormat) -> str:
    """The block-scale rounding rule in force: ``scale_rounding`` checked ("floor", "ceil" or
    "even"), or the format's default for None ("floor", the OCP rule, for MX; "even" for
    NVFP4's E4M3 block scales)."""
    rule = scale_rounding if scale_rounding is not None else ("even" if bf.two_level else "floor")
    if rule not in SCALE_RULES:
        raise ValueError(f"scale_rounding must be one of {SCALE_RULES} (or None for the "
                         f"format's default), got {scale_rounding!r}")
    return rule


def _check_axis(axis: object, ndim: int) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"axis must be an integer, got {axis!r}")
    if not -max(ndim, 1) <= axis < max(ndim, 1):
        raise ValueError(f"axis {axis} is out of range for an array of {ndim} dimension(s)")
    return int(axis) % max(ndim, 1)


# --- the blocked view --------------------------------------------------------------------------
def _rows(x: np.ndarray, axis: int, contiguous: bool = True) -> np.ndarray:
    """x with ``axis`` moved last, as a 2-D array (rows, n): C-contiguous, or (for the chunked
    reference path, which copies each chunk anyway) a view where numpy can make one."""
    moved = np.moveaxis(np.atleast_1d(x), axis, -1)
    rows = moved.reshape(math.prod(moved.shape[:-1]), moved.shape[-1])
    return np.ascontiguousarray(rows) if contiguous else rows


def _unrows(rows: np.ndarray, shape: tuple[int, ...], axis: int) -> np.ndarray:
    """Inverse of _rows for an array whose blocked axis has length rows.shape[-1]."""
    full = shape if shape else (1,)
    moved = list(full)
    moved.append(moved.pop(axis))
    out = np.moveaxis(rows.reshape(moved), -1, axis)
    return out.reshape(shape) if shape else out.reshape(())


def tensor_scale_of(amax: float, bf: BlockFormat) -> float:
    """NVFP4's fp32 tensor scale ``float32(amax) / float32(max_elem * 448)`` from the tensor's
    finite amax (1.0 for amax 0). An amax beyond float32's range is first clamped to float32's
    max, so such values saturate to the largest representable magnitude (as the MX formats
    saturate) instead of making every value NaN; an amax that is 0 in float32 gives 1.0. A
    quotient that underflows float32 (amax below about 4e-42) is raised to float32's smallest
    subnormal, 2^-149, so the scale stays positive and the tiny values keep their codes (ours:
    a zero tensor scale would divide by zero)."""
    t = np.float32(min(amax, _FLOAT32_MAX))
    if t == 0:
        return 1.0
    q = t / np.float32(bf.element.max * E4M3FN.max)
    return float(max(q, np.float32(2.0**-149)))


def _tensor_amax(rows: np.ndarray) -> float:
    """The largest finite magnitude of the C-contiguous rows (0.0 if none): one kernel pass
    over their bits, no temporaries."""
    if not rows.size:
        return 0.0
    if rows.dtype == np.float32:
        ints = np.int32
        parts = _kernels.run(finite_amax_f32, rows.size, (rows.reshape(-1).view(ints),), ())
    else:
        ints = np.int64
        c = _kernels.carrier_constants(rows.dtype)
        parts = _kernels.run(finite_amax_bits, rows.size, (rows.reshape(-1).view(ints),),
                             (c.ABS_MASK, c.INF_BITS))
    top = max(parts)
    return float(np.array(top, ints).view(rows.dtype))


def _whole_block_amax(rows: np.ndarray) -> tuple[np.ndarray, float]:
    """(every block's amax bits, the finite amax) of float32 rows of whole blocks of
    fpsim.kernels.mx_nvfp4.WHOLE: the tensor-amax pass, keeping each block's amax for the
    kernel that follows (1/16 of the input's bytes), so that one reads the input once."""
    amax = np.empty(rows.size // WHOLE, np.int32)
    parts = _kernels.run(whole_block_amax_f32, amax.size, (rows.reshape(-1).view(np.int32),
                                                           amax), (), work=rows.size)
    return amax, float(np.array(max(parts), np.int32).view(np.float32))


def _two_level_amax(rows: np.ndarray, bf: BlockFormat) -> tuple[np.ndarray | None, float]:
    """(every block's amax bits for rows of whole blocks, else None; the tensor scale) of
    float32 rows of a two-level format: the one pass that finds the tensor amax."""
    amax, top = (_whole_block_amax(rows) if _whole_blocks(rows.shape[1], bf)
                 else (None, _tensor_amax(rows)))
    return amax, tensor_scale_of(top, bf)


def _run_blocks(rows: np.ndarray, out: np.ndarray | None, codes: np.ndarray | None,
                scodes: np.ndarray | None, bf: BlockFormat, rule: str, mode: RoundingMode,
                rng: object, rng_bits: int | None, counting: bool) -> tuple[np.ndarray, float]:
    """The general kernel (fpsim.kernels.mx_general) over C-contiguous rows: dequantized values
    into ``out`` and/or element and block-scale codes into ``codes``/``scodes``. Returns
    (the monitor's counts, the tensor scale)."""
    r, n = rows.shape
    ts = tensor_scale_of(_tensor_amax(rows), bf) if bf.two_level else 1.0
    if not rows.size:
        return np.zeros(4, np.int64), ts
    f64 = np.dtype(np.float64)
    seed = _seed(rng) if mode is RoundingMode.STOCHASTIC else 0
    scale_mode = get_mode({"even": "nearest_even", "ceil": "up", "floor": "down"}[rule])
    elem = bf.element
    none = np.empty(1, rows.dtype)
    parts = _kernels.run(
        mx_blocks, r * -(-n // bf.block),
        (rows.reshape(-1), none if out is None else out.reshape(-1),
         np.empty(1, np.uint8) if codes is None else codes.reshape(-1),
         np.empty(1, np.uint8) if scodes is None else scodes.reshape(-1)),
        (n, bf.block, bf.two_level, ts, SCALE_RULES.index(rule), elem.emax, elem.max,
         elem.mantissa_bits, bf.integer, _kernels.mode_bits(mode, rng_bits), seed,
         _kernels.carrier_constants(f64), format_constants(elem, f64, True, "saturate"),
         _kernels.mode_bits(scale_mode), format_constants(E4M3FN, f64, True, "saturate"),
         out is not None, codes is not None, counting,
         (elem.bias, elem.emin, 1 << (elem.bits - 1), E4M3FN.max_code + 1 if bf.two_level
          else 0xFF, E4M3FN.bias, E4M3FN.mantissa_bits, E4M3FN.emin, E8M0FNU.bias)),
        work=rows.size)
    return np.sum(parts, axis=0), ts


def _nearest_constants(fmt: Format) -> tuple[int, float, float]:
    """(SHIFT, C_SUB, max) of fmt for the float64 addition trick (fpsim.kernels.mx_nvfp4)."""
    return ((52 - fmt.mantissa_bits) << 52, 2.0 ** (fmt.emin - fmt.mantissa_bits + 52),
            float(fmt.max))


def _run_nvfp4_f32(rows: np.ndarray, out: np.ndarray, bf: BlockFormat) -> None:
    """NVFP4 of float32 rows, elements and block scales to nearest even, dequantized into
    ``out`` (fpsim.kernels.mx_nvfp4: the same decisions as _run_blocks; rows of whole blocks
    in its chunked kernel, others in one fused pass)."""
    r, n = rows.shape
    constants = (_nearest_constants(bf.element), _nearest_constants(E4M3FN))
    flat = (rows.reshape(-1), out.reshape(-1))
    amax, ts = _two_level_amax(rows, bf)
    if amax is not None:
        _kernels.run(nvfp4_quantize_f32_whole, amax.size, (*flat, amax), (ts, *constants),
                     work=rows.size)
    else:
        _kernels.run(nvfp4_quantize_f32, r * -(-n // bf.block), flat,
                     (n, bf.block, ts, *constants), work=rows.size)


def _whole_blocks(n: int, bf: BlockFormat) -> bool:
    """Whether rows of n elements are whole blocks of fpsim.kernels.mx_nvfp4.WHOLE of a float
    element format (its faster kernels, which write -0 as the float formats keep it)."""
    return bf.block == WHOLE and n % WHOLE == 0 and not bf.integer


def _run_stochastic_f32(rows: np.ndarray, out: np.ndarray, bf: BlockFormat, rule: str,
                        rng: object, rng_bits: int | None) -> None:
    """float32 rows with stochastic elements (``rng_bits`` random bits, None: the full draw),
    dequantized into ``out`` (fpsim.kernels.mx_stochastic: _run_blocks's decisions and random
    stream, one fused pass)."""
    r, n = rows.shape
    f64 = np.dtype(np.float64)
    elem = bf.element
    flat = (rows.reshape(-1), out.reshape(-1))
    rb = RANDOM_BITS if rng_bits is None else rng_bits
    fe = format_constants(elem, f64, True, "saturate")
    amax, ts = _two_level_amax(rows, bf) if bf.two_level else (None, 1.0)
    if amax is not None:
        _kernels.run(nvfp4_stochastic_f32_whole, amax.size, (*flat, amax),
                     (ts, elem.max, _nearest_constants(E4M3FN), rb, _seed(rng), fe),
                     work=rows.size)
        return
    _kernels.run(
        mx_stochastic_f32, r * -(-n // bf.block), flat,
        (n, bf.block, bf.two_level, ts, SCALE_RULES.index(rule), elem.emax, elem.max,
         elem.mantissa_bits, bf.integer, _nearest_constants(E4M3FN), rb, _seed(rng), fe,
         _stochastic_f32_constants(elem)),
        work=rows.size)


def _stochastic_f32_constants(elem: Format) -> tuple[int, int, int, int, int]:
    """(mantissa bits, emin, bits of the smallest subnormal 2^qe and of max as float32, qe)
    of an MX element format, for fpsim.kernels.mx_stochastic's float32 rounding."""
    f = format_constants(elem, np.dtype(np.float32), True, "saturate")
    return f.M, f.EMIN, f.Q_BITS, f.MAX_BITS, elem.emin - elem.mantissa_bits


def _fused_nvfp4(arr: np.ndarray, bf: BlockFormat, rule: str, mode: RoundingMode,
                 counting: bool) -> bool:
    """Whether fpsim.kernels.mx_nvfp4 takes the call: float32 input, two-level scaling with
    its default rule and a float element format (its kernels write -0 and sign-magnitude
    codes, not an integer format's), nearest-even elements, no monitor."""
    return (bf.two_level and not bf.integer and not counting and arr.dtype == np.float32
            and rule == "even" and mode is RoundingMode.NEAREST_EVEN)


def _prepare(x: object, fmt: BlockFormat | str, axis: int
             ) -> tuple[np.ndarray, BlockFormat, int]:
    bf = get_block_format(fmt)
    arr = as_float_array(x)
    return arr, bf, _check_axis(axis, arr.ndim)


# --- the public API --------------------------------------------------------------------------
def quantize(
    x: object,
    fmt: BlockFormat | str,
    *,
    axis: int = -1,
    scale_rounding: str | None = None,
    mode: str | RoundingMode = "nearest_even",
    rng: object = None,
    site: str | None = None,
    rng_bits: int | None = None,
) -> np.ndarray:
    """``x`` block-quantized to ``fmt`` and dequantized, in x's dtype (float32 or float64).

    Blocks run along ``axis``; ``scale_rounding`` is "floor" (the OCP rule, the MX default),
    "ceil" or "even" (the NVFP4 default); ``mode`` rounds the elements (``rng`` drives
    "stochastic", ``rng_bits`` sets its random bits per element as in ``fpsim.round``). See
    the module docstring for every rule.

    Stochastic elements draw as ``fpsim.round`` does: one 63-bit seed from ``rng`` (an int
    seed, a Generator, which advances, or None), then for the element at flat index i of the
    array with ``axis`` moved last, the top 56 bits of splitmix64 of (seed, i), or their top
    ``rng_bits``. An element rounds only to one of its two neighbours, away from zero with
    probability ``floor(f * 2^r) / 2^r`` for its fraction ``f`` of the spacing (``r`` the
    random bits, exactly ``f`` once ``r`` covers the dropped bits), and the same seed gives
    the same bits whatever the thread count.

    >>> quantize(np.float32([500.0, 1.0, -3.3]), "mxfp8_e4m3")
    array([448. ,   1. ,  -3.25], dtype=float32)
    """
    arr, bf, ax = _prepare(x, fmt, axis)
    rule = scale_rule(scale_rounding, bf)
    mode = get_mode(mode)
    rng_bits = check_rng_bits(rng_bits, mode)
    counting = monitor_is_active()
    p = None
    if arr.dtype == np.float32 and mode is RoundingMode.NEAREST_EVEN and not bf.two_level:
        p = nearest_even_f32_constants(bf.element, True, "saturate", finite_input=True)
    rows = _rows(arr, ax)
    # a copy made for the kernel (axis not last) takes the result in place: each block is
    # read whole (its amax) before it is written
    out = rows if not np.shares_memory(rows, arr) else np.empty_like(rows)
    r, n = rows.shape
    nblocks = r * -(-n // bf.block)
    if not rows.size:
        counts = np.zeros(4, np.int64)
    elif _fused_nvfp4(arr, bf, rule, mode, counting):
        _run_nvfp4_f32(rows, out, bf)
        counts = np.zeros(4, np.int64)
    elif (mode is RoundingMode.STOCHASTIC and not counting and arr.dtype == np.float32
          and (rule == "even" or not bf.two_level)):
        _run_stochastic_f32(rows, out, bf, rule, rng, rng_bits)
        counts = np.zeros(4, np.int64)
    elif p is not None:
        elem = bf.element
        counts = np.sum(_kernels.run(
            mx_quantize_f32, nblocks, (rows.reshape(-1), out.reshape(-1)),
            (n, bf.block, SCALE_RULES.index(rule), elem.emax, elem.max, elem.mantissa_bits, p,
             bf.integer, counting), work=rows.size), axis=0)
    else:
        counts = _run_blocks(rows, out, None, None, bf, rule, mode, rng, rng_bits, counting)[0]
    if counting:
        record_blocks(site or "mx", bf.name, (nblocks, rows.size, int(counts[1]),
                                              int(counts[2]), int(counts[3])))
    return _unrows(out, arr.shape, ax)


Scales = np.ndarray | tuple[np.ndarray, np.float32]


def encode(
    x: object,
    fmt: BlockFormat | str,
    *,
    axis: int = -1,
    scale_rounding: str | None = None,
    mode: str | RoundingMode = "nearest_even",
    rng: object = None,
    rng_bits: int | None = None,
) -> tuple[Scales, np.ndarray]:
    """``(scales, element_codes)`` of ``x`` in ``fmt`` (NVFP4: ``((block_scale_codes,
    tensor_scale), element_codes)``); ``decode`` inverts it: ``decode(*encode(x, f), f) ==
    quantize(x, f)`` for float32 x.

    ``scales`` has x's shape with the blocked axis shrunk to ``ceil(n / block)``; codes are
    uint8. Arguments as in ``quantize``.

    >>> scales, codes = encode(np.float32([500.0, 1.0, -3.3]), "mxfp8_e4m3")
    >>> scales, codes
    (array([127], dtype=uint8), array([126,  56, 197], dtype=uint8))
    """
    arr, bf, ax = _prepare(x, fmt, axis)
    rule = scale_rule(scale_rounding, bf)
    rows = _rows(arr, ax)
    r, n = rows.shape
    mode = get_mode(mode)
    rng_bits = check_rng_bits(rng_bits, mode)
    codes = np.empty(rows.shape, np.uint8)
    scodes = np.empty((r, -(-n // bf.block)), np.uint8)
    ts = 1.0
    p = None
    elem = bf.element
    if arr.dtype == np.float32 and mode is RoundingMode.NEAREST_EVEN and not bf.two_level:
        p = nearest_even_f32_constants(elem, True, "saturate", finite_input=True)
    if _fused_nvfp4(arr, bf, rule, mode, False) and rows.size:
        flat = (rows.reshape(-1), codes.reshape(-1), scodes.reshape(-1))
        amax, ts = _two_level_amax(rows, bf)
        after = (ts, _nearest_constants(elem), _nearest_constants(E4M3FN),
                 (elem.mantissa_bits, elem.bias, elem.emin, 1 << (elem.bits - 1),
                  E4M3FN.mantissa_bits, E4M3FN.bias, E4M3FN.emin, E4M3FN.max_code + 1))
        if amax is not None:
            _kernels.run(nvfp4_encode_f32_whole, scodes.size, (*flat, amax), after,
                         work=rows.size)
        else:
            _kernels.run(nvfp4_encode_f32, scodes.size, flat, (n, bf.block, *after),
                         work=rows.size)
    elif p is not None and rows.size:
        _kernels.run(
            mx_encode_f32, scodes.size, (rows.reshape(-1), codes.reshape(-1),
                                         scodes.reshape(-1)),
            (n, bf.block, SCALE_RULES.index(rule), elem.emax, elem.max, elem.mantissa_bits, p,
             (elem.bias, elem.emin, 1 << (elem.bits - 1), bf.integer)), work=rows.size)
    else:
        _, ts = _run_blocks(rows, None, codes, scodes, bf, rule, mode, rng, rng_bits, False)
    scale_shape = arr.shape[:ax] + (scodes.shape[-1],) + arr.shape[ax + 1:] if arr.ndim else ()
    scale_codes = _unrows(scodes, scale_shape, ax)
    element_codes = _unrows(codes, arr.shape, ax)
    if bf.two_level:
        return (scale_codes, np.float32(ts)), element_codes
    return scale_codes, element_codes


def _check_tensor_scale(value: object) -> float:
    """NVFP4's tensor scale: a positive finite float (encode returns a float32)."""
    real = isinstance(value, (float, int, np.floating, np.integer)) and not isinstance(
        value, (bool, np.bool_))
    t = float(value) if real else math.nan  # type: ignore[arg-type]
    if not (math.isfinite(t) and t > 0):
        raise ValueError(f"nvfp4 tensor_scale must be a positive finite number (encode returns "
                         f"a float32), got {value!r}")
    return t


def _check_scale_codes(scales: object, bf: BlockFormat) -> np.ndarray:
    """Scale codes as encode returns them: uint8; a two-level (E4M3) block scale has no sign."""
    s = np.asarray(scales)
    if s.dtype != np.uint8:
        bad = ""
        if s.size and s.dtype.kind in "biuf":
            flat = s.reshape(-1)
            wrong = flat[(flat != np.floor(flat)) | (flat < 0) | (flat > 255)] if (
                s.dtype.kind == "f") else flat[(flat < 0) | (flat > 255)]
            if wrong.size:
                bad = f"; {wrong[0].item()!r} is not a code 0..255"
        raise TypeError(f"scales must be uint8 codes (as encode returns), got dtype {s.dtype}"
                        f"{bad}")
    if bf.two_level:
        signed = s[(s & 0x80) != 0]
        if signed.size:
            raise ValueError(f"{bf.name} block scale codes must have the sign bit clear (a "
                             f"scale is positive; codes 0..127), got code {int(signed[0])}")
    return s


def two_level_pair(scales: object) -> tuple[object, object]:
    """NVFP4's scales as encode returns them: ``(block_scale_codes, tensor_scale)``."""
    if not (isinstance(scales, tuple) and len(scales) == 2):
        raise TypeError("nvfp4 scales are a pair (block_scale_codes, tensor_scale), as "
                        "encode returns them")
    return scales[0], scales[1]


def decode(
    scales: Scales, element_codes: object, fmt: BlockFormat | str, *, axis: int = -1
) -> np.ndarray:
    """float32 values of ``(scales, element_codes)`` from ``encode`` (NVFP4: scales is
    ``(block_scale_codes, tensor_scale)``). A NaN scale code makes its whole block NaN."""
    bf = get_block_format(fmt)
    tensor_scale = 1.0
    if bf.two_level:
        block, ts = two_level_pair(scales)
        scales, tensor_scale = np.asarray(block), _check_tensor_scale(ts)
    codes = np.asarray(element_codes)
    if codes.dtype != np.uint8:
        raise TypeError(f"element_codes must be uint8 codes (as encode returns), got dtype "
                        f"{codes.dtype}")
    s = _check_scale_codes(scales, bf)
    ax = _check_axis(axis, codes.ndim)
    rows = _rows(codes, ax)
    nb = -(-rows.shape[1] // bf.block)
    srows = _rows(s, ax) if s.ndim else s.reshape(1, 1)
    if srows.shape != (rows.shape[0], nb):
        raise ValueError(f"scales must have the codes' shape {codes.shape} with axis {ax} "
                         f"shrunk to {nb} blocks; got shape {s.shape}")
    if not bf.integer and rows.size and int(rows.max()) >> bf.element.bits:
        from_bits(rows.max(), bf.element)  # from_bits's error for a code beyond the format
    values = np.empty(rows.shape, np.float32)
    if rows.size:
        srows = np.ascontiguousarray(srows, np.uint8)
        _kernels.run(mx_decode, srows.size, (rows.reshape(-1), srows.reshape(-1),
                                             values.reshape(-1)),
                     (rows.shape[1], bf.block, _element_table(bf),
                      _scale_table(bf.scale) * tensor_scale), work=rows.size)
    return _unrows(values, codes.shape, ax)


@functools.cache
def _element_table(bf: BlockFormat) -> np.ndarray:
    """The float64 value of every uint8 element code of bf (MXINT8: int8 / 64; codes beyond
    the format's bits, which decode refuses, NaN)."""
    codes = np.arange(256, dtype=np.uint8)
    if bf.integer:
        table = codes.view(np.int8).astype(np.float64) / 64
    else:
        table = np.full(256, np.nan)
        table[:1 << bf.element.bits] = from_bits(codes[:1 << bf.element.bits], bf.element)
    table.flags.writeable = False  # (shared by every call)
    return table


@functools.cache
def _scale_table(scale: Format) -> np.ndarray:
    """The float64 value of every uint8 scale code (E8M0FNU, or E4M3FN's)."""
    return np.asarray(from_bits(np.arange(256, dtype=np.uint8), scale), np.float64)


# explain runs the numpy reference path, which builds on this module
from fpsim.mx_explain import explain as explain  # noqa: E402
