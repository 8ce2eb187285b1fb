"""Checks for exercise 14: LayerNorm statistics in fp16 (notebook 09's silent failure, fixed).

They follow ``checks.py`` (whose report helpers they use): ``check_layer_norm_fp16(answer)``
runs the answer on named rows of fp16 activations, compares with the exact layer norm computed
in float64 (the oracle), prints one line of feedback naming the first failing input with
expected vs got and a hint for the mistake it recognises, and returns True or False; an
exception raised by the answer is reported, never raised.

    >>> from checks_transformer import check_layer_norm_fp16
    >>> check_layer_norm_fp16(lambda x: x)  # doctest: +ELLIPSIS
    ❌ FAIL check_layer_norm_fp16: ... inputs differ. First: ...
    False
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
from checks import Failure, _call, _raised, _report

import fpsim

EPSILON = 1e-3  # Keras's LayerNormalization default
TOLERANCE = 2.0**-7  # relative to max(1, |expected|): a few fp16 roundings of each step


def layer_norm_reference(x: np.ndarray, epsilon: float = EPSILON) -> np.ndarray:
    """``(x - mean) / sqrt(var + epsilon)`` over the last axis, biased variance, in float64."""
    x = np.asarray(x, np.float64)
    d = x - x.mean(axis=-1, keepdims=True)
    return d / np.sqrt(np.mean(d * d, axis=-1, keepdims=True) + epsilon)


def layer_norm_cases() -> list[tuple[str, np.ndarray]]:
    """Rows of fp16 activations (2-D arrays) that break a naive fp16 layer norm in turn."""
    rng = np.random.default_rng(14)
    outlier = rng.normal(0, 1, (1, 32))
    outlier[0, 3] = 300.0
    near_200 = 200 + rng.normal(0, 10, (1, 512))
    big = rng.choice([-30000.0, 30000.0], (2, 16)) + rng.normal(0, 100, (2, 16))
    cases = [
        ("4 rows of 32 values, N(0, 1)", rng.normal(0, 1, (4, 32))),
        ("a row of 32 with one outlier of 300 (notebook 09: its square is inf in fp16)",
         outlier),
        ("4 rows of 64 values, N(0, 100^2) (squares up to about 1e5)",
         rng.normal(0, 100, (4, 64))),
        ("a row of 512 values near 200 (their sum, 102400, is past 65504)", near_200),
        ("2 rows of 16 values near +-30000 (squares about 9e8)", big),
        ("a constant row of 1000 (variance 0: the answer is all zeros)", np.full((1, 8), 1000.0)),
        ("4 rows of 32 values, N(0, 0.01^2) (variance 1e-4 < epsilon)",
         rng.normal(0, 0.01, (4, 32))),
    ]
    return [(text, fpsim.round(np.asarray(x, np.float64), "float16")) for text, x in cases]


def _implied_epsilon(x: np.ndarray, got: np.ndarray, row: int) -> float | None:
    """The epsilon that would explain ``got`` on ``row`` (from its largest output), or None."""
    d = x[row] - x[row].mean()
    i = int(np.argmax(np.abs(got[row])))
    if not (np.isfinite(got[row, i]) and got[row, i] != 0 and d[i] != 0):
        return None
    return float((d[i] / got[row, i]) ** 2 - np.mean(d * d))


def _hint(x: np.ndarray, got: np.ndarray, want: np.ndarray, bad: np.ndarray) -> str:
    """The mistake this output looks like."""
    row, col = (int(v) for v in np.argwhere(bad)[0])
    if np.isnan(got[row]).any() and not want[row].any():
        return ("NaN on a constant row: 0 / 0. Its deviations are 0 and so is its variance; "
                "if epsilon (scaled with the variance) flushed to 0 too, divide only where the "
                "denominator is not 0 (the answer there is 0).")
    if not np.isfinite(got[row]).all():
        return ("inf or NaN: a sum or a square overflowed fp16. (x - mean)^2 is inf once "
                "|x - mean| > 256 (and a sum of 512 values near 200 passes 65504). Multiply the "
                "row by a power of two 2^-k first (exact in binary) so its entries are at most "
                "1; the normalized row does not depend on that scale.")
    if not got[row].any() and want[row].any():
        return ("all zeros: the variance overflowed to inf and 1 / sqrt(inf) = 0, the silent "
                "failure of notebook 09. Scale the row by 2^-k before squaring.")
    implied = _implied_epsilon(x, got, row)
    if implied is not None and implied < EPSILON / 4:
        return (f"this row is normalized with epsilon about {max(implied, 0.0):.2g}: add "
                f"epsilon = {EPSILON:g} to the variance (after scaling the row by 2^-k, add "
                f"epsilon * 4^-k, which is what it becomes).")
    if implied is not None and implied > 4 * EPSILON:
        return (f"this row is normalized with epsilon about {implied:.3g}, not {EPSILON:g}: "
                "after scaling the row by 2^-k its variance is 4^-k times smaller, and epsilon "
                "must be scaled by 4^-k too.")
    return (f"row {row}, entry {col} is off by more than 2^-7 (relative to max(1, |expected|)): "
            "compute the mean, the deviations, the mean of their squares and "
            "(x - mean) / sqrt(var + epsilon), rounding each step with r16.")


def check_layer_norm_fp16(layer_norm_fp16: Callable[[np.ndarray], np.ndarray]) -> bool:
    """``layer_norm_fp16(x)`` must normalize each row of the fp16 array ``x`` (2-D) to
    ``(x - mean) / sqrt(var + 1e-3)`` (biased variance), computed in fp16, finite and within
    2^-7 * max(1, |expected|) of the exact result in every entry."""
    name = "check_layer_norm_fp16"
    failures = []
    cases = layer_norm_cases()
    for text, x in cases:
        want = layer_norm_reference(x)
        want_text = np.array2string(want[0], precision=4, threshold=6) + " (row 0)"
        got, error = _call(layer_norm_fp16, x.copy())
        if error is not None:
            failures.append(_raised(text, want_text, error))
            break
        try:
            y = np.asarray(got, np.float64)
        except (TypeError, ValueError):
            failures.append(Failure(text, want_text, f"{got!r} (not an array)"))
            continue
        if y.shape != want.shape:
            failures.append(Failure(text, f"an array of shape {want.shape}", f"shape {y.shape}"))
            continue
        with np.errstate(invalid="ignore"):
            bad = ~(np.abs(y - want) <= TOLERANCE * np.maximum(1.0, np.abs(want)))
        if not bad.any():
            continue
        row = int(np.argwhere(bad)[0][0])
        failures.append(Failure(
            text, np.array2string(want[row], precision=4, threshold=6) + f" (row {row})",
            np.array2string(y[row], precision=4, threshold=6), _hint(x, y, want, bad)))
    return _report(name, len(cases), failures,
                   f"finite and right for all {len(cases)} inputs. Well done!")


def all_checks() -> Iterable[str]:
    """The names of this module's checks."""
    return ("check_layer_norm_fp16",)
