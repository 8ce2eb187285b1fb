"""Checks for exercise 13: delayed scaling by hand (the scale Transformer Engine's recipe uses at
each step, from an amax history).

They follow ``checks.py`` (whose report helpers they use): ``check_delayed_scales(answer)``
runs the answer on named amax sequences, compares with ``nn.fp8``'s own ``ScalingState`` (the
oracle), prints one line of feedback naming the first failing sequence with expected vs got and
a hint for the mistake it recognises, and returns True or False; an exception raised by the
answer is reported, never raised.

    >>> from checks_fp8 import check_delayed_scales
    >>> check_delayed_scales(lambda a, m, n: [1.0] * len(a))  # doctest: +ELLIPSIS
    ❌ FAIL check_delayed_scales: ... sequences differ. First: ...
    False
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np
from checks import Failure, _call, _raised, _report

from nn.fp8 import ScalingState

RTOL = 1e-6  # float32 (the recipe's arithmetic) and float64 answers both pass


def delayed_reference(amaxes: Sequence[float], fp8_max: float, history_len: int) -> list[float]:
    """The scale used at each step: 1 at step 0, then what ``ScalingState.update`` returned after
    the previous step's amax (the oracle: nn.fp8's implementation of the rule)."""
    state = ScalingState(fp8_max, history_len)
    used = []
    for a in amaxes:
        used.append(state.scale)
        state.update(a)
    return used


def delayed_cases() -> list[tuple[str, list[float], float, int]]:
    """(description, amaxes, fp8_max, history_len)."""
    rng = np.random.default_rng(13)
    noisy = [float(v) for v in np.float32(rng.lognormal(-8, 1.0, 40))]
    return [
        ("amax 2.0 at every step, fp8_max 448, history 4", [2.0] * 6, 448.0, 4),
        ("a growing amax 1, 2, 4, 8, 16, fp8_max 448, history 16",
         [1.0, 2.0, 4.0, 8.0, 16.0], 448.0, 16),
        ("a spike: 1, 1, 100, then 1 six times, fp8_max 448, history 4",
         [1.0, 1.0, 100.0] + [1.0] * 6, 448.0, 4),
        ("an all-zero tensor at step 2: 1, 2, 0, 4, fp8_max 448, history 1",
         [1.0, 2.0, 0.0, 4.0], 448.0, 1),
        ("an inf at step 2: 1, 1, inf, then 2 five times, fp8_max 57344, history 3",
         [1.0, 1.0, math.inf] + [2.0] * 5, 57344.0, 3),
        ("40 seeded gradient-sized amaxes (about 3e-4), fp8_max 57344, history 16",
         noisy, 57344.0, 16),
    ]


def _hint(got: np.ndarray, want: np.ndarray, amaxes: list[float], fp8_max: float,
          history_len: int) -> str:
    """The mistake these scales look like."""
    n = len(want)
    after = delayed_reference(amaxes + [1.0], fp8_max, history_len)[1:]  # after each update
    if n > 1 and np.allclose(got, after, rtol=RTOL):
        return ("these are the scales one step early: step t's scale comes from the amaxes "
                "of steps before t (that is what 'delayed' means), not from step t's own.")
    if got[0] != 1.0:
        return "the first step has no history yet: its scale is 1."
    if any(math.isinf(a) for a in amaxes) and np.allclose(
            got, delayed_reference([0.0 if math.isinf(a) else a for a in amaxes], fp8_max,
                                   history_len), rtol=RTOL):
        return ("your window dropped the inf: it stays in the window like any amax, so the "
                "max is inf and the scale stays frozen at its previous value until the inf "
                "drops out, history_len steps later (Transformer Engine's behaviour).")
    if history_len > 1 and np.allclose(got, delayed_reference(amaxes, fp8_max, 1), rtol=RTOL):
        return ("you used only the newest amax (amax_compute_algo 'most_recent'); the default, "
                "'max', takes the largest of the last history_len amaxes.")
    for other in (history_len - 1, history_len + 1):
        if other >= 1 and np.allclose(got, delayed_reference(amaxes, fp8_max, other), rtol=RTOL):
            return (f"your window holds {other} amaxes; it holds the last history_len = "
                    f"{history_len}, the newest one included.")
    if any(not (math.isfinite(a) and a > 0) for a in amaxes):
        return ("when the window's max is 0 or not finite, keep the previous scale (and an "
                "inf stays in the window, freezing the scale, until it drops out).")
    bad = int(np.flatnonzero(~np.isclose(got, want, rtol=RTOL))[0]) if n else 0
    return (f"scale = fp8_max / max(amaxes of the last history_len steps before it); first "
            f"wrong at step {bad}.")


def check_delayed_scales(
        delayed_scales: Callable[[list[float], float, int], Sequence[float]]) -> bool:
    """``delayed_scales(amaxes, fp8_max, history_len)`` must return the scale used at each step
    under delayed scaling: 1 at step 0; at step t, ``fp8_max / max(amaxes[t-history_len:t])``
    (the previous scale when that max is 0 or not finite)."""
    name = "check_delayed_scales"
    failures = []
    cases = delayed_cases()
    for text, amaxes, fp8_max, history_len in cases:
        want = np.array(delayed_reference(amaxes, fp8_max, history_len))
        want_text = np.array2string(want, precision=6, threshold=12)
        got, error = _call(delayed_scales, list(amaxes), fp8_max, history_len)
        if error is not None:
            failures.append(_raised(f"amaxes {text}", want_text, error))
            break
        try:
            values = np.asarray(got, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            failures.append(Failure(f"amaxes {text}", want_text, f"{got!r}",
                                    "return one scale (a float) per step."))
            continue
        got_text = np.array2string(values, precision=6, threshold=12)
        if values.shape != want.shape:
            failures.append(Failure(f"amaxes {text}", want_text, got_text,
                                    f"return one scale per step ({len(want)} here)."))
            continue
        if np.allclose(values, want, rtol=RTOL):
            continue
        failures.append(Failure(f"amaxes {text}", want_text, got_text,
                                _hint(values, want, amaxes, fp8_max, history_len)))
    return _report(name, len(cases), failures,
                   f"the scales of all {len(cases)} sequences match nn.fp8's delayed scaling. "
                   "Well done!", unit="sequences")


def all_checks() -> Iterable[str]:
    """The names of this module's checks."""
    return ("check_delayed_scales",)
