"""Helpers shared by the tests: one home for "the same value" (the ``same`` that was re-typed
in many files, with three meanings, now three names)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def same_values(a: object, b: object, *, signed_zeros: bool = True) -> np.ndarray:
    """Elementwise: equal values, or both NaN; with ``signed_zeros`` -0.0 differs from +0.0.
    (Compared in float64, which holds every float16/32 and fpsim format value exactly.)"""
    with np.errstate(invalid="ignore"):  # signalling-NaN codes warn when widened
        x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    equal = x == y
    if signed_zeros:
        equal &= np.signbit(x) == np.signbit(y)
    return np.asarray(equal | (np.isnan(x) & np.isnan(y)))


def all_same(a: object, b: object, *, signed_zeros: bool = True) -> bool:
    """``same_values`` everywhere, and the same shape."""
    x, y = np.asarray(a), np.asarray(b)
    return x.shape == y.shape and bool(same_values(x, y, signed_zeros=signed_zeros).all())


def same_arrays(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> bool:
    """Two lists of arrays (weights, slots) equal one by one (``np.array_equal``)."""
    return len(a) == len(b) and all(np.array_equal(p, q) for p, q in zip(a, b, strict=True))
