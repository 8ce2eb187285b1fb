"""Block-scaled formats (OCP MX v1.0, NVFP4) on torch tensors, bit for bit ``fpsim.mx``'s.

The rules (block formats, shared exponents and their ``scale_rounding`` variants, NVFP4's
two-level scale, NaN and all-zero blocks, MXINT8) are ``fpsim.mx``'s, stated in its module
docstring; this module takes its tables (``BLOCK_FORMATS``, the scale rules) from there and
redoes its reference path in torch operations, in float64 (every quotient and product there
is exact or rounded once, as in fpsim.mx), with elements rounded by ``fpsim.torch.round``.

>>> fpsim.torch.mx.quantize(torch.tensor([500.0, 1.0, -3.3]), "mxfp8_e4m3")
tensor([448.0000,   1.0000,  -3.2500])
"""

from __future__ import annotations

from functools import cache

import numpy as np
import torch

from fpsim.bits import from_bits
from fpsim.catalog import E4M3FN, E8M0FNU
from fpsim.formats import Format
from fpsim.kernels.mx import SCALE_EMAX, SCALE_EMIN
from fpsim.monitor import is_active as monitor_is_active
from fpsim.monitor import record_blocks
from fpsim.mx import (
    BlockFormat,
    _check_axis,
    _check_scale_codes,
    _check_tensor_scale,
    get_block_format,
    scale_rule,
    tensor_scale_of,
    two_level_pair,
)
from fpsim.rounding import RoundingMode, check_rng_bits, get_mode
from fpsim.torch.powers import exp2
from fpsim.torch.rounding import check_tensor, round_checked

__all__ = ["decode", "encode", "quantize"]

# how NVFP4's E4M3 block scale is rounded under each scale rule (fpsim.mx's rule)
_E4M3_SCALE_MODE = {"even": RoundingMode.NEAREST_EVEN, "ceil": RoundingMode.UP,
                    "floor": RoundingMode.DOWN}


def _rows(t: torch.Tensor, axis: int) -> torch.Tensor:
    """t with ``axis`` moved last, as a contiguous 2-D tensor (rows, n)."""
    moved = torch.movedim(t.reshape(1) if t.ndim == 0 else t, axis, -1)
    return moved.reshape(-1, moved.shape[-1])


def _unrows(rows: torch.Tensor, shape: tuple[int, ...], axis: int) -> torch.Tensor:
    """Inverse of _rows for a tensor whose blocked axis has length rows.shape[-1]."""
    full = list(shape) if shape else [1]
    moved = full[:axis] + full[axis + 1:] + [full[axis]]
    out = torch.movedim(rows.reshape(moved), -1, axis)
    return out.reshape(shape)


def _blocks(rows: torch.Tensor, block: int) -> torch.Tensor:
    """(rows, nb, block), the trailing partial block padded with zeros (amax unchanged)."""
    r, n = rows.shape
    nb = -(-n // block)
    return torch.nn.functional.pad(rows, (0, nb * block - n)).reshape(r, nb, block)


def _mx_exponent(amax: torch.Tensor, rule: str, elem: Format) -> torch.Tensor:
    """The shared exponent per block (fpsim.mx._mx_exponent): floor(log2 amax) - emax, with
    the "ceil" and "even" variants, clamped to E8M0's range; all-zero blocks the smallest."""
    fr, ex = torch.frexp(torch.where(torch.isfinite(amax) & (amax > 0), amax, 1.0))
    e = ex.to(torch.int64) - 1 - elem.emax
    if rule == "ceil":
        e = e + (amax > elem.max * exp2(e, amax.dtype)).long()
    elif rule == "even":
        e = e + (2.0 * fr >= 2.0 - 2.0 ** -(elem.mantissa_bits + 1)).long()
    e = torch.where(amax == 0, SCALE_EMIN, e)
    return e.clamp(SCALE_EMIN, SCALE_EMAX)


class _Blocks:
    """One quantization, block by block (float64 throughout), as fpsim.mx._Blocks."""

    def __init__(self, rows: torch.Tensor, bf: BlockFormat, rule: str, mode: RoundingMode,
                 generator: torch.Generator | None, rng_bits: int | None = None) -> None:
        blocks = _blocks(rows.to(torch.float64), bf.block)
        amax = blocks.abs().amax(dim=-1)  # NaN if any NaN, inf if any inf
        bad = ~torch.isfinite(amax)
        tensor_scale = 1.0
        if bf.two_level:
            finite = rows[torch.isfinite(rows)].abs()
            t_amax = float(finite.max()) if finite.numel() else 0.0
            tensor_scale = tensor_scale_of(t_amax, bf)  # fpsim.mx's rule, float32 arithmetic
            target = torch.where(bad, 0.0, amax) / (6.0 * tensor_scale)
            scale = round_checked(target, E4M3FN, _E4M3_SCALE_MODE[rule], None, True,
                                  "saturate", None, counting=False)
            scale_codes = _to_codes(scale, E4M3FN)
            divisor = scale * tensor_scale
        else:
            e = _mx_exponent(amax, rule, bf.element)
            scale = exp2(e, amax.dtype)
            scale_codes = (e + E8M0FNU.bias).to(torch.uint8)
            divisor = scale
        live = ~bad & (divisor > 0)
        scaled = blocks / torch.where(live, divisor, 1.0)[..., None]
        elements = round_checked(scaled, bf.element, mode, generator, True, "saturate", None,
                                 counting=False, rng_bits=rng_bits)
        # a zero scale (NVFP4 scale underflow, all-zero block) keeps each element's sign of 0
        zeros = torch.copysign(torch.zeros_like(blocks),
                               torch.where(bad[..., None], 1.0, blocks))
        elements = torch.where(live[..., None], elements, zeros)
        if bf.integer:
            elements = elements + 0.0  # integers have no -0: -0 + 0 = +0
        values = torch.where(bad[..., None], float("nan"), elements * divisor[..., None])
        self.scale = torch.where(bad, float("nan"), scale)
        nan_code = E4M3FN.max_code + 1 if bf.two_level else 0xFF
        self.scale_codes = torch.where(bad, nan_code, scale_codes.to(torch.int64)).to(
            torch.uint8)
        self.tensor_scale = tensor_scale
        self.scaled, self.elements, self.values = scaled, elements, values

    def record(self, site: str, bf: BlockFormat, n: int) -> None:
        """fpsim.mx's block counts: blocks, elements, saturated, flushed, clipped blocks."""
        live = torch.isfinite(self.scale)[..., None]
        big = self.scaled.abs() > bf.element.max
        counts = torch.stack([
            (live & big).sum(),
            (live & (self.scaled != 0) & (self.elements == 0)).sum(),
            (live[..., 0] & big.any(dim=-1)).sum(),
        ]).tolist()
        record_blocks(site, bf.name, (self.scale.numel(), n, *counts))


def _flat(a: torch.Tensor, n: int) -> torch.Tensor:
    """(r, nb, block) -> (r, n): the blocks joined, the padding dropped."""
    return a.reshape(a.shape[0], -1)[:, :n]


@cache
def _code_table(fmt: Format) -> tuple[np.ndarray, np.ndarray]:
    """(values of every code of fmt as float64, the magnitudes of codes 0..max_code)."""
    values = np.asarray(from_bits(np.arange(2**fmt.bits, dtype=np.uint32), fmt), np.float64)
    return values, values[: fmt.max_code + 1]


def _to_codes(v: torch.Tensor, fmt: Format) -> torch.Tensor:
    """uint8 codes of finite values of an element or scale format (signed: sign bit on top).

    Magnitude codes 0..max_code hold increasing values, so a magnitude's code is its index in
    that list (searchsorted finds the exact match)."""
    _, magnitudes = _code_table(fmt)
    table = torch.from_numpy(magnitudes).to(v.device)
    codes = torch.searchsorted(table, v.abs().to(torch.float64).contiguous())
    if fmt.signed:
        codes = codes | (torch.signbit(v).long() << (fmt.bits - 1))
    return codes.to(torch.uint8)


def _from_codes(codes: torch.Tensor, fmt: Format) -> torch.Tensor:
    """float64 values of uint8 codes (fpsim.from_bits, as a table)."""
    values, _ = _code_table(fmt)
    return torch.from_numpy(values).to(codes.device)[codes.long()]


def _checked_generator(generator: object) -> torch.Generator | None:
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got "
                        f"{type(generator).__name__}")
    return generator


def _prepare(t: object, fmt: BlockFormat | str, axis: int, scale_rounding: str | None
             ) -> tuple[torch.Tensor, BlockFormat, int, str]:
    t = check_tensor("t", t)
    bf = get_block_format(fmt)
    return t, bf, _check_axis(axis, t.ndim), scale_rule(scale_rounding, bf)


def quantize(
    t: torch.Tensor,
    fmt: BlockFormat | str,
    *,
    axis: int = -1,
    scale_rounding: str | None = None,
    mode: str | RoundingMode = "nearest_even",
    generator: torch.Generator | None = None,
    site: str | None = None,
    rng_bits: int | None = None,
) -> torch.Tensor:
    """``t`` block-quantized to ``fmt`` and dequantized: fpsim.mx.quantize's values, in t's
    dtype and on its device (float16 / bfloat16 input: the values cast back by torch).

    Blocks run along ``axis``; ``scale_rounding`` is "floor" (the OCP rule, the MX default),
    "ceil" or "even" (the NVFP4 default); ``mode`` rounds the elements (``generator`` drives
    "stochastic", ``rng_bits`` sets its random bits per element as in ``fpsim.round``: an
    element goes up with probability floor(f * 2^r) / 2^r for its dropped fraction f). The
    scales do not depend on ``mode``: fpsim.mx's bit for bit in every mode. ``site`` names the
    call's block counts in an active fpsim.monitor (default ``"mx"``).

    >>> x = torch.tensor([6.0, 4.5, 4.5, 4.5])  # scale 1; 4.5 lies between 4 and 6: f = 1/4
    >>> fpsim.torch.mx.quantize(x, "mxfp4_e2m1", mode="stochastic", rng_bits=1)  # never up
    tensor([6., 4., 4., 4.])
    """
    t, bf, ax, rule = _prepare(t, fmt, axis, scale_rounding)
    mode = get_mode(mode)
    rng_bits = check_rng_bits(rng_bits, mode)
    rows = _rows(t, ax)
    b = _Blocks(rows, bf, rule, mode, _checked_generator(generator), rng_bits)
    if monitor_is_active():
        b.record(site or "mx", bf, rows.numel())
    return _unrows(_flat(b.values, rows.shape[1]), tuple(t.shape), ax).to(t.dtype)


Scales = torch.Tensor | tuple[torch.Tensor, torch.Tensor]


def encode(
    t: torch.Tensor,
    fmt: BlockFormat | str,
    *,
    axis: int = -1,
    scale_rounding: str | None = None,
    mode: str | RoundingMode = "nearest_even",
    generator: torch.Generator | None = None,
    rng_bits: int | None = None,
) -> tuple[Scales, torch.Tensor]:
    """``(scale_codes, element_codes)`` as fpsim.mx.encode gives them, as uint8 tensors
    (NVFP4: ``((block_scale_codes, tensor_scale), element_codes)``, the tensor scale a
    float32 0-d tensor); ``mode``, ``generator`` and ``rng_bits`` as ``quantize``'s.
    ``decode`` inverts it."""
    t, bf, ax, rule = _prepare(t, fmt, axis, scale_rounding)
    mode = get_mode(mode)
    rng_bits = check_rng_bits(rng_bits, mode)
    rows = _rows(t, ax)
    b = _Blocks(rows, bf, rule, mode, _checked_generator(generator), rng_bits)
    elements = _flat(b.elements, rows.shape[1])
    if bf.integer:
        codes = torch.round(elements * 64).to(torch.int64).to(torch.int8).view(torch.uint8)
    else:
        codes = _to_codes(elements, bf.element)
    shape = tuple(t.shape)
    scale_shape = (shape[:ax] + (b.scale_codes.shape[-1],) + shape[ax + 1:]) if shape else ()
    scale_codes = _unrows(b.scale_codes, scale_shape, ax)
    element_codes = _unrows(codes, shape, ax)
    if bf.two_level:
        tensor_scale = torch.tensor(b.tensor_scale, dtype=torch.float32, device=t.device)
        return (scale_codes, tensor_scale), element_codes
    return scale_codes, element_codes


def decode(scales: Scales, element_codes: torch.Tensor, fmt: BlockFormat | str, *,
           axis: int = -1) -> torch.Tensor:
    """float32 values of ``(scales, element_codes)`` from ``encode``; a NaN scale code makes
    its whole block NaN (fpsim.mx.decode)."""
    bf = get_block_format(fmt)
    tensor_scale = 1.0
    block: object = scales
    if bf.two_level:
        block, ts = two_level_pair(scales)
        tensor_scale = _check_tensor_scale(ts.item() if isinstance(ts, torch.Tensor) else ts)
    if not isinstance(block, torch.Tensor):
        raise TypeError(f"scales must be a uint8 tensor of codes (as encode returns), got "
                        f"{type(block).__name__}")
    scales = block
    _check_scale_codes(scales.detach().cpu().numpy(), bf)  # fpsim.mx.decode's rule (small copy)
    if not isinstance(element_codes, torch.Tensor) or element_codes.dtype != torch.uint8:
        raise TypeError("element_codes must be a uint8 tensor of codes (as encode returns), "
                        f"got {getattr(element_codes, 'dtype', type(element_codes).__name__)}")
    ax = _check_axis(axis, element_codes.ndim)
    rows = _rows(element_codes, ax)
    nb = -(-rows.shape[1] // bf.block)
    srows = _rows(scales, ax) if scales.ndim else scales.reshape(1, 1)
    if tuple(srows.shape) != (rows.shape[0], nb):
        raise ValueError(f"scales must have the codes' shape {tuple(element_codes.shape)} with "
                         f"axis {ax} shrunk to {nb} blocks; got shape {tuple(scales.shape)}")
    if bf.integer:
        elements = rows.view(torch.int8).to(torch.float64) / 64
    else:
        elements = _from_codes(rows, bf.element)
    scale = _from_codes(srows.to(torch.uint8), bf.scale) * tensor_scale
    per_element = scale.repeat_interleave(bf.block, dim=1)[:, :rows.shape[1]]
    values = (elements * per_element).to(torch.float32)
    return _unrows(values, tuple(element_codes.shape), ax)
