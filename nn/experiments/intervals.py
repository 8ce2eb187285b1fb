"""Student's t intervals and the verdict of a claim, in plain Python (no scipy).

``t_cdf`` is the closed form for an integer number of degrees of freedom (Abramowitz and
Stegun 26.7.3 and 26.7.4); ``t_quantile`` inverts it by bisection to float64 resolution.
``mean_interval`` is the usual two-sided t interval of a mean, ``mean +- t * s / sqrt(n)``;
``claim_verdict`` turns the per-seed gaps of a claim into its verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

LEVEL = 0.95  # two-sided
SHOWN, NOT_SHOWN = "shown", "not shown at this size"


def t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with ``df`` (a positive integer) degrees of freedom."""
    if df < 1 or int(df) != df:
        raise ValueError(f"t_cdf: df must be a positive integer, got {df!r}")
    theta = math.atan(t / math.sqrt(df))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2 == 1:  # A(t|df) = (2/pi) (theta + sin cos (1 + 2/3 c^2 + ... )) (26.7.3)
        total, term = 0.0, 1.0
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        a = 2 / math.pi * (theta + (s * math.cos(theta) * (1 + total) if df > 1 else 0.0))
    else:  # A(t|df) = sin (1 + 1/2 c^2 + 1*3/(2*4) c^4 + ...) (26.7.4)
        total, term = 0.0, 1.0
        for k in range(1, df // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        a = s * (1 + total)
    return 0.5 + 0.5 * a


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (0 < p < 1)."""
    if not 0 < p < 1:
        raise ValueError(f"t_quantile: p must lie strictly between 0 and 1, got {p!r}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return 0.5 * (lo + hi)


def mean_interval(values: Sequence[float], level: float = LEVEL
                  ) -> tuple[float, float, float]:
    """(mean, low, high): the two-sided ``level`` t interval of the mean of ``values`` (at
    least two finite numbers); with identical values the interval is the mean itself."""
    n = len(values)
    if n < 2:
        raise ValueError(f"mean_interval: needs at least 2 values, got {n}")
    mean = math.fsum(values) / n
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile(0.5 + level / 2, n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


@dataclass(frozen=True)
class Verdict:
    """A claim's verdict from its per-seed gaps (variant minus reference, paired by seed).
    ``gap_mean`` and ``gap_ci95`` are None when a gap is not finite (a run diverged);
    ``diverged`` counts the seeds whose variant diverged while the reference did not."""

    verdict: str
    gap_mean: float | None
    gap_ci95: tuple[float, float] | None
    diverged: int
    reason: str


def claim_verdict(gaps: Sequence[float]) -> Verdict:
    """"shown" only when the 95% t interval of the mean gap lies above 0 (the variant's loss is
    higher), or when the variant diverged from every seed and the reference from none (the
    gap is unbounded every time: inf); otherwise "not shown at this size". A NaN gap (both
    runs diverged) or a mix of finite and diverged seeds is not shown."""
    n = len(gaps)
    diverged = sum(1 for g in gaps if g == math.inf)
    if n and diverged == n:
        return Verdict(SHOWN, None, None, diverged,
                       f"the variant diverged from all {n} seeds, the reference from none")
    if any(not math.isfinite(g) for g in gaps):
        return Verdict(NOT_SHOWN, None, None, diverged,
                       f"{n - diverged} of {n} seeds finite: no interval")
    if n < 2:
        return Verdict(NOT_SHOWN, gaps[0] if gaps else None, None, 0,
                       "one seed: no interval (never a single run's gap)")
    mean, lo, hi = mean_interval(gaps)
    shown = lo > 0
    return Verdict(SHOWN if shown else NOT_SHOWN, mean, (lo, hi), 0,
                   "the 95% interval lies above 0" if shown
                   else "the 95% interval reaches 0 or below")


def paired_gap(variant: float, reference: float) -> float:
    """One seed's gap: variant minus reference held-out loss; inf when only the variant
    diverged (its loss is not finite), -inf when only the reference did, NaN when both did."""
    v, r = math.isfinite(variant), math.isfinite(reference)
    if v and r:
        return variant - reference
    if r:
        return math.inf
    return -math.inf if v else math.nan
