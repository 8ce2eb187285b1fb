"""Format.contains is exact over value sets (finite values, subnormals, inf, NaN; zero counted
once), checked against brute-force enumeration; both promotion policies wrap it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given
from strategies import custom_formats

import fpsim
from fpsim.emulated import promote

SMALL = [f for f in fpsim.CATALOG if f.bits <= 16]
WIDE = [f for f in fpsim.CATALOG if f.bits > 16]
FTZ = [f.replace(name=f"{f.name}_ftz", subnormals=False) for f in SMALL]


def value_set(fmt: fpsim.Format) -> set[float | str]:
    """Every value fmt holds, by decoding every code (fpsim.values: subnormals only where the
    format keeps them, zero once), plus its specials."""
    vals: set[float | str] = {float(v) for v in fpsim.values(fmt)}
    if fmt.inf:
        vals |= {math.inf, -math.inf}
    if fmt.has_nan:
        vals.add("nan")
    return vals


def holds_by_rounding(wide: fpsim.Format, narrow: fpsim.Format) -> bool:
    """Whether every value of the small ``narrow`` survives rounding into ``wide`` unchanged
    (works when ``wide`` is too large to enumerate: a value of wide rounds to itself)."""
    finite = fpsim.values(narrow).astype(np.float64)
    r = fpsim.round(finite, wide)
    if not np.array_equal(r, finite):
        return False
    return (wide.inf or not narrow.inf) and (wide.has_nan or not narrow.has_nan)


@pytest.mark.parametrize("narrow", SMALL + FTZ, ids=lambda f: f.name)
def test_contains_matches_brute_force_for_every_pair_of_small_catalog_formats(narrow):
    for wide in SMALL + FTZ:
        assert wide.contains(narrow) == (value_set(narrow) <= value_set(wide)), (wide, narrow)


@pytest.mark.parametrize("narrow", SMALL + FTZ, ids=lambda f: f.name)
def test_contains_of_a_small_format_in_fp32_and_tf32_matches_rounding_its_values(narrow):
    for wide in WIDE + [f.replace(name=f"{f.name}_ftz", subnormals=False) for f in WIDE]:
        assert wide.contains(narrow) == holds_by_rounding(wide, narrow), (wide, narrow)


def test_no_small_format_contains_fp32_or_tf32():
    for wide in SMALL:
        for narrow in WIDE:
            assert not wide.contains(narrow)
            assert narrow.max > wide.max or narrow.mantissa_bits > wide.mantissa_bits


def test_every_format_contains_itself_and_fp32_contains_every_format():
    for f in fpsim.CATALOG + tuple(FTZ):
        assert f.contains(f) and fpsim.FP32.contains(f)


@given(custom_formats(), custom_formats())
def test_contains_matches_brute_force_for_custom_formats(a, b):
    assume(a.bits <= 16 and b.bits <= 16)
    assert a.contains(b) == (value_set(b) <= value_set(a))
    assert b.contains(a) == (value_set(a) <= value_set(b))


def test_fnuz_formats_contain_formats_with_negative_zero_as_zero_counts_once():
    assert fpsim.E4M3FNUZ.contains(fpsim.E2M1FN)
    assert float(fpsim.round(np.float32(-0.0), fpsim.E4M3FNUZ)) == 0.0


def test_a_flush_to_zero_format_does_not_contain_its_subnormal_twin_but_is_contained_by_it():
    ftz = fpsim.FP16.replace(name="fp16_ftz", subnormals=False)
    assert not ftz.contains(fpsim.FP16) and fpsim.FP16.contains(ftz)


# --- the promotion policies wrap contains ----------------------------------------------------
@pytest.mark.parametrize("a", SMALL + FTZ + WIDE, ids=lambda f: f.name)
def test_fpsim_promotion_picks_the_containing_format_or_raises(a):
    for b in SMALL + FTZ + WIDE:
        if a.contains(b) or b.contains(a):
            assert promote(a, b) is (a if a.contains(b) else b)
        else:
            with pytest.raises(TypeError, match="neither format holds every value"):
                promote(a, b)
