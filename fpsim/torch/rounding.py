"""``fpsim.torch.round``: fpsim's rounding on torch tensors, in torch integer and bit operations.

The algorithm is fpsim's general kernel (``fpsim.kernels.general``), written as whole-tensor
operations so that it runs on any device torch runs on, with no custom extension, and
``torch.compile`` may fuse it. A non-negative carrier value has magnitude bits ``a`` that are
monotone in the value and, within one binade, linear in it:

    a = EEEEEEEE|MMMMMMMMMM|grrrrrrrrrrrr      s = CM - M (+ how far below the normal range)
                  kept      g = guard bit, r.. = round and sticky bits (the s dropped bits)

so rounding to the format's spacing is rounding ``a`` to a multiple of ``2^s``: "add something
below the kept bits, then clear them" (``fpsim.kernels.general.MODE_KERNELS`` says what each
mode adds; this module reads that one table). The carrier is float32 (float16 and bfloat16
input are widened to it exactly), or float64 for float64 input and for formats reaching below
float32's normal range, as ``fpsim.round`` chooses. Formats without zero (E8M0FNU) take
fpsim's exponent-only rule (``fpsim._exponent_only``), here in torch.

float32 input rounded to nearest even (the common call) takes a float32 path of a few passes
instead of the twenty of the integer path: torch's own cast where torch has the format as a
dtype (``NATIVE_CASTS``), else fpsim's float32 addition trick (``fpsim.kernels.fast_f32``).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from fpsim import _kernels
from fpsim._exponent_only import _UP_RULE  # the one rule table of exponent-only formats
from fpsim.catalog import BF16, E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, FP16, get_format
from fpsim.formats import Format
from fpsim.kernels.constants import Carrier, FormatBits, NearestEvenF32
from fpsim.kernels.general import ModeBits
from fpsim.monitor import is_active as monitor_is_active
from fpsim.monitor import record as monitor_record
from fpsim.quantize import _needs_wide_carrier, format_constants, nearest_even_f32_constants
from fpsim.rounding import (
    RoundingMode,
    check_rng_bits,
    get_mode,
    resolve_overflow,
    resolve_subnormals,
)
from fpsim.torch.powers import exp2

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_NUMPY_CARRIER: dict[torch.dtype, np.dtype] = {torch.float32: np.dtype(np.float32),
                                               torch.float64: np.dtype(np.float64)}
_INT_VIEW = {torch.float32: torch.int32, torch.float64: torch.int64}

# Formats torch holds as dtypes, with the overflow policy of torch's float32 -> dtype cast:
# round to nearest even, as fpsim.round does, except where fpsim's policy differs, which one
# comparison fixes. None: the cast's overflow is not the same everywhere, so the policy is
# always applied (float8_e4m3fn: torch 2.13's CPU cast saturates, torch 2.11's CUDA cast gives
# NaN, seen on an H200 by tests/torch run with FPSIM_TORCH_DEVICE=cuda).
# tests/torch/test_torch_round.py checks every entry under every policy over every code,
# midpoint and neighbour; getattr: older torch lacks the fp8 dtypes.
NATIVE_CASTS: dict[Format, tuple[torch.dtype, str | None]] = {
    fmt: (dtype, policy) for fmt, dtype, policy in (
        (FP16, torch.float16, "inf"),
        (BF16, torch.bfloat16, "inf"),
        (E4M3FN, getattr(torch, "float8_e4m3fn", None), None),
        (E5M2, getattr(torch, "float8_e5m2", None), "inf"),
        (E4M3FNUZ, getattr(torch, "float8_e4m3fnuz", None), "nan"),
        (E5M2FNUZ, getattr(torch, "float8_e5m2fnuz", None), "nan"),
    ) if dtype is not None
}
_EXPONENT_FIELD = ((1 << 8) - 1) << 23  # 0|11111111|000...0 of a float32


@torch.compiler.disable  # (plain Python on cached numpy tables: torch.compile skips it)
def _nearest_even_constants(fmt: Format, subnormals: bool, policy: str) -> NearestEvenF32 | None:
    return nearest_even_f32_constants(fmt, subnormals, policy, finite_input=True)


def _nearest_even_f32(x: torch.Tensor, fmt: Format, subnormals: bool, policy: str
                      ) -> torch.Tensor | None:
    """float32 x rounded to nearest even in float32 arithmetic, or None where no such path
    applies: torch's cast (NATIVE_CASTS) with the overflow fixed to the policy, else
    fpsim.kernels.fast_f32's addition trick (its docstring shows why it is exact):

        |x| = 0|EEEEEEEE|MMMMMMMMMMMMMMMMMMMMMMM
        B   = 0|EEEEEEEE + (23 - M)|00000000000000000000000   (at least C_SUB)

    (|x| + B) - B is |x| rounded on the format's grid; overflow is |x| >= THRESHOLD."""
    native = NATIVE_CASTS.get(fmt)
    p = _nearest_even_constants(fmt, subnormals, policy)
    if native is not None and subnormals:
        dtype, own = native
        q = x.to(dtype)
        assert p is not None  # (it exists for every NATIVE_CASTS format)
        # (the cast's NaN lacks fpsim's sign)
        fix_overflow = own is None or policy != own or policy == "nan"
        # on the CPU, skip the fix-ups when nothing needs them: one reading pass (min and max,
        # NaN if any is NaN) instead of passes over three tensors (on a GPU the test would
        # cost a synchronisation); then no code is NaN, and fp8 codes take the fast decoding
        if x.device.type == "cpu" and x.numel():
            lo, hi = (float(v) for v in torch.aminmax(x))
            limit = float(p.THRESHOLD) if fix_overflow else math.inf
            if -limit < lo and hi < limit or not fix_overflow and lo == lo and hi == hi:
                return _decode_fp8(q, fmt) if _DECODES.get(fmt) else q.to(torch.float32)
        r = q.to(torch.float32)
        if fix_overflow:
            over = x.abs() >= float(p.THRESHOLD)
            if fmt.inf:
                over = over & ~torch.isinf(x)  # inf input stays inf
            r = torch.where(over, torch.copysign(torch.tensor(float(p.OVERFLOW)), x), r)
        return torch.where(torch.isnan(x), x, r)  # NaN keeps its payload
    if p is None or (fmt.inf and policy != "inf"):
        return None
    av = x.abs()
    big = av >= 2.0**64  # scaled by 2^-64 first so that B stays inside float32's range
    avs = torch.where(big, av * 2.0**-64, av)
    b = ((avs.view(torch.int32) & _EXPONENT_FIELD) + int(p.SHIFT)).view(torch.float32)
    b = torch.clamp(b, min=float(p.C_SUB))
    ra = (avs + b) - b
    ra = torch.where(big, ra * 2.0**64, ra)
    r = torch.copysign(ra, x)
    if p.NO_NEG_ZERO:
        r = torch.where(ra == 0, ra, r)
    r = torch.where(av >= float(p.THRESHOLD), torch.copysign(torch.tensor(float(p.OVERFLOW)),
                                                             x), r)
    return torch.where(torch.isnan(x), x, r)


# one-byte formats whose codes float16 decodes as above: at most 4 exponent bits, or 5 with the
# top field holding inf/NaN as float16's does (not E5M2FNUZ, whose top field holds normals)
_DECODES: dict[Format, bool] = {
    fmt: fmt.bits == 8 and (fmt.exponent_bits <= 4 or (fmt.exponent_bits == 5 and fmt.inf))
    for fmt in NATIVE_CASTS
}


def _decode_fp8(q: torch.Tensor, fmt: Format) -> torch.Tensor:
    """The float32 values of fp8 codes without NaN (torch's own fp8 -> float32 cast is a slow
    per-element conversion on the CPU): each code moved into a float16 bit pattern, in int16
    passes, then one float16 product and torch's fast float16 -> float32 cast. With M the
    format's mantissa bits and b its bias, the code S|E..E|M..M shifted left by 10 - M is

        S|0..0E..E|M..M0..0   as float16: 2^(e - 15) (1 + m / 2^M)  (e = 0: m 2^(-14 - M))

    (the int8 view sign-extends, so the mask clears the copies of S between S and E..E), which
    is the code's value times 2^(b - 15), exact for normals and subnormals alike; multiplying by
    2^(15 - b) gives the value (``_DECODES``: the formats where this holds)."""
    shift = 10 - fmt.mantissa_bits
    field = (1 << (fmt.exponent_bits + fmt.mantissa_bits)) - 1
    mask = -(1 << 15) | (field << shift)  # S and the shifted E..E|M..M, as an int16
    w = q.view(torch.int8).to(torch.int16)
    w.bitwise_left_shift_(shift).bitwise_and_(mask)
    h = w.view(torch.float16)
    if fmt.bias != 15:
        h.mul_(2.0 ** (15 - fmt.bias))
    return h.to(torch.float32)


# A positive value below the smallest subnormal 2^q goes up to 2^q when its bits exceed this
# threshold; fpsim.kernels.general's TINY rules, indexed by their codes there.
_NONZERO, _ABOVE_HALF, _HALF_OR_MORE, _NEVER = 0, 1, 2, 3


def _tiny_threshold(rule: int, half_q_bits: int) -> int:
    return {_ABOVE_HALF: half_q_bits, _HALF_OR_MORE: half_q_bits - 1, _NONZERO: 0,
            _NEVER: 2**63 - 1}[rule]


def check_tensor(name: str, t: object) -> torch.Tensor:
    """t if it is a floating-point torch tensor fpsim rounds (float16/bfloat16/32/64)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be a float16, bfloat16, float32 or float64 tensor, got "
                        f"dtype {t.dtype}")
    return t


def round(  # noqa: A001  (fpsim.round's name)
    t: torch.Tensor,
    fmt: Format | str,
    mode: str | RoundingMode = "nearest_even",
    *,
    generator: torch.Generator | None = None,
    subnormals: bool | None = None,
    overflow: str | None = None,
    site: str | None = None,
    rng_bits: int | None = None,
) -> torch.Tensor:
    """Every element of ``t`` rounded to ``fmt`` under ``mode``: ``fpsim.round``'s values, in
    t's dtype and on t's device.

    float32 and float64 input is rounded from its own bits (float64 once, with no detour through
    float32); float16 and bfloat16 input is widened exactly, rounded, and cast back (exact where
    the format's values are values of t's dtype, else torch's cast to t's dtype rounds them
    once more). NaN stays NaN, +-0 keeps its sign (not in formats without -0), inf follows the
    format's inf and overflow rules; ``subnormals=False`` flushes results below
    ``smallest_normal`` to signed zero; ``overflow`` overrides the format's policy.
    ``mode="stochastic"`` rounds up with probability equal to the distance fraction, drawing
    56 random bits per element from ``generator`` (torch's default generator when None), so a
    seeded generator reproduces it; ``rng_bits=r`` (1..56) uses r of them, as fpsim.round's
    ``rng_bits``: up with probability floor(f * 2^r) / 2^r for the dropped fraction f.
    ``site`` names the call in an active ``fpsim.monitor`` (default ``"round"``), which counts
    the same events as fpsim.round's.

    >>> fpsim.torch.round(torch.tensor([65519.99, 65520.0, 1e-8]), "fp16")
    tensor([65504.,    inf,     0.])
    """
    t = check_tensor("t", t)
    fmt = get_format(fmt)
    mode = get_mode(mode)
    rng_bits = check_rng_bits(rng_bits, mode)
    policy = resolve_overflow(fmt, overflow)
    subnormals = resolve_subnormals(fmt, subnormals)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got "
                        f"{type(generator).__name__}")
    return round_checked(t, fmt, mode, generator, subnormals, policy, site,
                         counting=monitor_is_active(), rng_bits=rng_bits)


def round_checked(t: torch.Tensor, fmt: Format, mode: RoundingMode,
                  generator: torch.Generator | None, subnormals: bool, policy: str,
                  site: str | None, counting: bool, rng_bits: int | None = None
                  ) -> torch.Tensor:
    """``round`` on validated arguments; ``counting`` records the events under ``site``."""
    if t.dtype == torch.float32 and mode is RoundingMode.NEAREST_EVEN and (
            not counting or (policy != "saturate" and fmt.signed)):
        fast = _nearest_even_f32(t, fmt, subnormals, policy)
        if fast is not None:
            if counting:
                monitor_record(site or "round", fmt, t.numel(),
                               tuple(_events_of_values(t, fast, fmt, subnormals, policy)))
            return fast
    if t.dtype == torch.float64 or _needs_wide_carrier(fmt, subnormals):
        carrier = torch.float64
    else:
        carrier = torch.float32
    x = t.to(carrier)
    if not fmt.zero:
        result, events = round_exponent_only(x, fmt, mode, generator, policy, counting,
                                             rng_bits)
    else:
        result, events = round_in_carrier(x, fmt, mode, generator, subnormals, policy, counting,
                                          rng_bits)
    if events is not None:
        monitor_record(site or "round", fmt, t.numel(), tuple(events))
    return result.to(t.dtype)


@torch.compiler.disable  # (plain Python on cached numpy-keyed tables: torch.compile skips it)
def _constants(fmt: Format, carrier: torch.dtype, subnormals: bool, policy: str
               ) -> tuple[Carrier, FormatBits]:
    dtype = _NUMPY_CARRIER[carrier]
    return _kernels.carrier_constants(dtype), format_constants(fmt, dtype, subnormals, policy)


def _draw(shape: torch.Size, device: torch.device, generator: torch.Generator | None
          ) -> torch.Tensor:
    """56 uniform random bits per element (int64), as the numpy kernel draws them."""
    return torch.randint(0, 2**56, shape, generator=generator, device=device, dtype=torch.int64)


def round_in_carrier(
    x: torch.Tensor, fmt: Format, mode: RoundingMode, generator: torch.Generator | None,
    subnormals: bool, policy: str, counting: bool, rng_bits: int | None = None,
) -> tuple[torch.Tensor, list[int] | None]:
    """(x rounded to fmt in x's dtype, the five monitor event counts when counting).

    x is float32 or float64 (the carrier) and the format has zero."""
    c, f = _constants(fmt, x.dtype, subnormals, policy)
    bits = x.view(_INT_VIEW[x.dtype]).to(torch.int64)
    m = _kernels.mode_bits(mode, rng_bits)
    u = _draw(bits.shape, bits.device, generator) if m.STOCHASTIC else None
    res, overflowed = round_bits(bits, m, u, c, f)
    result = res.to(_INT_VIEW[x.dtype]).view(x.dtype)
    return result, (events(bits, res, overflowed, c, f) if counting else None)


def round_bits(bits: torch.Tensor, m: ModeBits, u: torch.Tensor | None, c: Carrier,
               f: FormatBits) -> tuple[torch.Tensor, torch.Tensor]:
    """(carrier bits of ``bits``'s values rounded to the format, overflowed): the general
    kernel's ``_round_bits_overflow`` on whole int64 tensors (float32 bits sign-extended).

    ``m`` is the mode's switches (MODE_KERNELS), ``u`` its 56 random bits per element
    (stochastic only; the top m.STOCHASTIC of them are used); overflowed is True where the
    rounded magnitude exceeded max (and for inf and NaN input)."""
    CM, CBIAS, INF_BITS = c.CM, c.CBIAS, c.INF_BITS
    M, EMIN = f.M, f.EMIN
    a_in = bits & c.ABS_MASK
    a = a_in.clamp(max=INF_BITS)  # NaN payloads must not carry out of the int64 when rounded
    sign = bits & c.SIGN_MASK
    negative = sign != 0
    eb = a >> CM
    # s dropped bits: CM - M, plus the distance below the normal range (subnormal spacing)
    s_full = CM - M + ((EMIN + CBIAS - eb.clamp(min=1)).clamp(min=0) if f.SUBNORMALS
                       else torch.zeros_like(a))
    s = s_full.clamp(max=CM)
    one = torch.ones_like(a)
    mask = torch.bitwise_left_shift(one, s) - 1
    # the last bit of the kept code: the lowest kept carrier bit; at s == CM with M > 0 the
    # code is ...0001 (odd); with M == 0 the format's exponent field's last bit
    parity_shift = (1 - EMIN - CBIAS) if M == 0 else 0
    lsb = ((a >> s) + parity_shift) & 1
    if M > 0:
        lsb = lsb | (s >= CM).to(torch.int64)
    add = torch.zeros_like(a)
    if m.HALF:
        add = add + (mask >> 1)
    if m.LSB:
        add = add + lsb
    if m.ONE:
        add = add + 1
    add = add & mask
    if m.ALL_POS or m.ALL_NEG:
        away = (negative & bool(m.ALL_NEG)) | (~negative & bool(m.ALL_POS))
        add = add + torch.where(away, mask, 0)
    rb = m.STOCHASTIC
    v = None if u is None else u >> (56 - rb)  # the rb random bits used, uniform in [0, 2^rb)
    if u is not None and v is not None:
        # rb random bits added at the top of the s dropped bits (below them when s < rb: then
        # all s bits are random), so up with probability floor(f * 2^rb) / 2^rb
        add = add + (u & mask if rb >= 56 else torch.bitwise_left_shift(
            v, (s - rb).clamp(min=0)) >> (rb - s).clamp(min=0))
    if m.ODD:  # truncate; if anything was dropped and the kept code is even, add 1
        bump = (((a & mask) != 0) & (lsb == 0)).to(torch.int64)
        r = (a & ~mask) + torch.bitwise_left_shift(bump, s)
    else:
        r = (a + add) & ~mask

    # 0 <= value < 2^q (the smallest subnormal) becomes 0 or 2^q (see the numpy kernel)
    h = f.HALF_Q_BITS
    threshold = torch.where(negative, _tiny_threshold(m.TINY_NEG, h),
                            _tiny_threshold(m.TINY_POS, h))
    if v is not None:  # P(up) = floor(sig * 2^rb / 2^s) / 2^rb (sig / 2^s for s <= rb)
        sig = (a & ((1 << CM) - 1)) | ((eb > 0).to(torch.int64) << CM)
        up = v < (torch.bitwise_left_shift(sig, (rb - s_full).clamp(min=0))
                  >> (s_full - rb).clamp(min=0, max=63))
    else:
        up = a > threshold
    if f.SUBNORMALS:
        r = torch.where(a >= f.Q_BITS, r, torch.where(up, f.Q_BITS, 0))
    else:
        r = torch.where(r < f.MIN_NORMAL_BITS, 0, r)  # flush to zero after rounding
    if f.NO_NEG_ZERO:
        sign = torch.where(r == 0, 0, sign)
    res = sign | r
    over = r > f.MAX_BITS  # overflow, or an inf/NaN input
    toward_zero = (negative & bool(m.ZERO_NEG)) | (~negative & bool(m.ZERO_POS))
    res = torch.where(over, sign | torch.where(toward_zero, f.MAX_BITS, f.OVER_BITS), res)
    # NaN stays NaN; inf stays inf if the format has inf, else follows the policy
    special = a_in >= INF_BITS
    keep = (a_in > INF_BITS) | bool(f.HAS_INF)
    res = torch.where(special, torch.where(keep, bits, sign | f.OVER_BITS), res)
    if f.UNSIGNED:  # a negative number lies outside an unsigned format: NaN (+0 without NaN)
        outside = negative & (a_in > 0) & (a_in <= INF_BITS)
        res = torch.where(outside, f.NEGATIVE_BITS, res)
        over = over & ~outside
    return res, over


def events(b: torch.Tensor, r: torch.Tensor, overflowed: torch.Tensor, c: Carrier,
           f: FormatBits) -> list[int]:
    """The five monitor events (fpsim.monitor.EVENTS) of input bits b rounded to r, counted as
    the numpy kernel counts them (fpsim.kernels.general._events)."""
    a = b & c.ABS_MASK
    ra = r & c.ABS_MASK
    finite_in = a < c.INF_BITS
    flags = (
        finite_in & (ra != a),
        finite_in & overflowed,
        finite_in & (a != 0) & (ra == 0),
        (ra != 0) & (ra < f.MIN_NORMAL_BITS),
        (a <= c.INF_BITS) & (ra > c.INF_BITS),
    )
    return torch.stack([torch.count_nonzero(flag) for flag in flags]).tolist()


def _events_of_values(x: torch.Tensor, r: torch.Tensor, fmt: Format, subnormals: bool,
                      policy: str) -> list[int]:
    """``events`` of float32 x rounded to r by the float32 nearest-even path, read from the
    values alone. Where the policy sends an overflow to inf or NaN (not "saturate") and the
    format is signed (no NaN for a negative input), a finite input overflowed exactly where
    its result is inf or NaN, so ``events``'s "overflowed" is that."""
    c, f = _constants(fmt, torch.float32, subnormals, policy)
    b = x.view(torch.int32)
    rb = r.view(torch.int32)
    overflowed = (rb & c.ABS_MASK) >= c.INF_BITS
    return events(b, rb, overflowed, c, f)


def round_exponent_only(
    x: torch.Tensor, fmt: Format, mode: RoundingMode, generator: torch.Generator | None,
    policy: str, counting: bool, rng_bits: int | None = None,
) -> tuple[torch.Tensor, list[int] | None]:
    """x rounded to a format without zero (powers of two 2^emin..2^emax, E8M0FNU), as
    fpsim._exponent_only rounds it: with x = (1 + f) * 2^e, nearest modes go up iff f >= 1/2
    (iff f > 0 in the lowest binade), up iff f > 0; below 2^emin the result is 2^emin; zero,
    negatives, -inf and NaN give NaN; past 2^emax the overflow policy (clamped in modes that
    round down)."""
    try:
        rule = _UP_RULE[mode]
    except KeyError:
        raise ValueError(f"rounding mode {mode!r} has no rule for exponent-only formats") from None
    x64 = x.to(torch.float64)
    positive = (x64 > 0) & torch.isfinite(x64)
    frac, exp = torch.frexp(torch.where(positive, x64, 1.0))
    e = exp.to(torch.int64) - 1
    f = 2.0 * frac - 1.0  # x = (1 + f) * 2^e exactly
    if rule == "half":
        up = (f >= 0.5) | ((e == fmt.emin) & (f > 0))
    elif rule == "nonzero":
        up = f > 0
    elif rule == "never":
        up = torch.zeros_like(positive)
    else:  # stochastic: up with probability f (floor(f * 2^r) / 2^r with r random bits)
        drawn = f if rng_bits is None else torch.floor(f * 2.0**rng_bits) / 2.0**rng_bits
        up = torch.rand(x64.shape, generator=generator, device=x64.device,
                        dtype=torch.float64) < drawn
    r_e = (e + up.to(torch.int64)).clamp(min=fmt.emin)
    over = r_e > fmt.emax
    clamp = mode in (RoundingMode.TOWARD_ZERO, RoundingMode.DOWN) or policy == "saturate"
    power = exp2(r_e.clamp(max=1000))
    result = torch.where(over, fmt.max if clamp else float("nan"), power)
    result = torch.where(positive, result, torch.where(torch.isnan(x64), x64, float("nan")))
    if policy == "saturate":
        result = torch.where(x64 == float("inf"), fmt.max, result)
    counts = None
    if counting:
        finite = torch.isfinite(x64)
        flags = torch.stack([finite & (result != x64), positive & over,
                             torch.zeros_like(over), torch.zeros_like(over),
                             ~torch.isnan(x64) & torch.isnan(result)]).reshape(5, -1)
        counts = [int(k) for k in flags.sum(dim=1).tolist()]
    return result.to(x.dtype), counts
