"""Rounding to an exponent-only format without zero (``zero=False``: E8M0FNU), in numpy.

Such a format is a set of powers of two ``2^emin .. 2^emax``; rounding a positive ``x`` picks
``2^e`` or ``2^(e+1)`` around it. The rule (fpsim.rounding's module docstring states it, and
``round_scalar`` is the specification this equals) in one place per mode, with
``x = (1 + f) * 2^e``, ``0 <= f < 1``:

- nearest_even, nearest_away: up iff ``f >= 1/2`` (a tie goes up: ml_dtypes' E8M0 rule);
  in the lowest binade ``e == emin``: up iff ``f > 0`` (ml_dtypes);
- up: up iff ``f > 0``; toward_zero, down, odd: never (odd: every significand is 1, odd);
- stochastic: up with probability ``f``.

Below ``2^emin`` the result is ``2^emin``; past ``2^emax`` modes that round down clamp to max
and the others follow the overflow policy (``"nan"`` or ``"saturate"``); zero, negative
numbers, -inf and NaN give NaN; +inf follows the overflow policy.

These formats hold 254 values, so the arrays rounded to them are small (block scales):
vectorized numpy is fast enough, and fpsim.mx computes its scales in its own kernel.
"""

from __future__ import annotations

import numpy as np

from fpsim import _validate
from fpsim.formats import Format
from fpsim.rounding import RoundingMode

# (up iff f >= 1/2, up iff f > 0) per deterministic mode; stochastic draws
_UP_RULE: dict[RoundingMode, str] = {
    RoundingMode.NEAREST_EVEN: "half",
    RoundingMode.NEAREST_AWAY: "half",
    RoundingMode.UP: "nonzero",
    RoundingMode.TOWARD_ZERO: "never",
    RoundingMode.DOWN: "never",
    RoundingMode.ODD: "never",
    RoundingMode.STOCHASTIC: "draw",
}


def round_exponent_only(
    x: np.ndarray, fmt: Format, mode: RoundingMode, rng: object, policy: str,
    rng_bits: int | None = None,
) -> tuple[np.ndarray, tuple[int, int, int, int, int]]:
    """(x rounded to ``fmt`` in x's dtype, the five monitor event counts). Stochastic with
    ``rng_bits=r``: up with probability floor(f * 2^r) / 2^r (fpsim.rounding.check_rng_bits)."""
    try:
        rule = _UP_RULE[mode]
    except KeyError:
        raise ValueError(f"rounding mode {mode!r} has no rule for exponent-only formats") from None
    with np.errstate(invalid="ignore"):  # signalling NaN patterns warn when widened
        x64 = np.asarray(x, dtype=np.float64)
    positive = (x64 > 0) & np.isfinite(x64)
    safe = np.where(positive, x64, 1.0)
    frac, exp = np.frexp(safe)
    e = exp.astype(np.int64) - 1
    f = 2.0 * frac - 1.0  # x = (1 + f) * 2^e exactly
    if rule == "half":
        up = (f >= 0.5) | ((e == fmt.emin) & (f > 0))
    elif rule == "nonzero":
        up = f > 0
    elif rule == "never":
        up = np.zeros(x64.shape, dtype=bool)
    else:
        drawn = f if rng_bits is None else np.floor(np.ldexp(f, rng_bits)) / 2.0**rng_bits
        up = _validate.generator(rng).random(x64.shape) < drawn
    r_e = np.maximum(e + up, fmt.emin)
    over = r_e > fmt.emax
    clamp = mode in (RoundingMode.TOWARD_ZERO, RoundingMode.DOWN) or policy == "saturate"
    result = np.where(over, fmt.max if clamp else np.nan, np.ldexp(1.0, np.minimum(r_e, 1000)))
    result = np.where(positive, result, np.where(np.isnan(x64), x64, np.nan))  # NaN kept
    if policy == "saturate":
        result = np.where(x64 == np.inf, fmt.max, result)
    finite = np.isfinite(x64)
    isnan_in = np.isnan(x64)
    counts = (
        int(np.count_nonzero(finite & (result != x64))),
        int(np.count_nonzero(positive & over)),
        0,  # no zero: nothing underflows to it
        0,  # no subnormals
        int(np.count_nonzero(~isnan_in & np.isnan(result))),
    )
    return result.astype(x.dtype), counts
