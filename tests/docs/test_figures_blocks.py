"""The numbers docs/hardware.md quotes beside block_scale_rules.png and float8_tiles.png, from
the data functions of benchmarks/figures_blocks.py (the same sizes and seed as the figures)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import figures_blocks  # noqa: E402 (found through the path above)

STEP = 2.0**-10
PER_TENSOR, TILES_128, TILES_1X128 = "per-tensor (one tile)", "128x128 tiles", "1x128 tiles"


@pytest.fixture(scope="module")
def rules():
    return figures_blocks.scale_rule_sweep("mxfp4_e2m1", step=STEP, seed=0)


@pytest.fixture(scope="module")
def tiles():
    spreads = np.arange(0.0, 41.0, 5.0)  # 0, 5, ..., 40: a subset of the figure's spreads
    return spreads, figures_blocks.tile_errors(spreads, n=256, seed=0)


def _pct(value: float, digits: int = 0) -> float:
    return round(100 * float(value), digits)


def test_the_sweep_is_one_binade_of_float32_values_in_blocks_of_32():
    a, x = figures_blocks.binade_block("mxfp4_e2m1", STEP, seed=0)
    assert x.dtype == np.float32 and x.shape == (1024, 32)
    assert a[0] == 1.0 and a[-1] == 2.0 - STEP and np.all(np.diff(a) == STEP)
    assert np.all(x[:, 1:] == x[0, 1:])  # the other 31 elements: one draw for every a
    assert np.all((np.abs(x[:, 1:]) >= 0.1) & (np.abs(x[:, 1:]) <= 0.3))


def test_the_floor_rule_clips_the_top_of_the_binade_and_ceil_never_clips(rules):
    a, sweep = rules
    assert np.array_equal(sweep["floor"].clipped, a > 1.5)  # 4a > 6, E2M1's max
    assert np.all(sweep["floor"].exponent == -2)
    assert not sweep["ceil"].clipped.any()
    assert np.array_equal(sweep["ceil"].exponent, np.where(a > 1.5, -1, -2))
    assert np.array_equal(sweep["even"].clipped, (a > 1.5) & (a < 1.75))


def test_floor_error_climbs_to_25_percent_at_the_top_of_the_binade(rules):
    a, sweep = rules
    top = sweep["floor"].top
    assert np.argmax(top) == a.size - 1 and top.max() < 0.25
    assert _pct(top.max(), 2) == 24.96  # a = 2 - 2^-10: 4a -> 6
    np.testing.assert_allclose(top[a > 1.5], 1 - 6 / (4 * a[a > 1.5]), rtol=1e-6)


def test_ceil_and_even_never_exceed_the_20_percent_e2m1_tie_that_all_rules_share(rules):
    a, sweep = rules
    for rule in ("floor", "ceil", "even"):
        assert sweep[rule].top[a == 1.25] == pytest.approx(0.2)  # 4a = 5: 4 or 6, tie to 4
    for rule in ("ceil", "even"):
        assert sweep[rule].top.max() == pytest.approx(0.2)
        assert a[np.argmax(sweep[rule].top)] == 1.25


def test_the_three_rules_agree_below_one_and_three_quarters(rules):
    a, sweep = rules
    low = a < 1.75  # clipping to 6 * 2^-2 gives the same 1.5 as 3 * 2^-1
    assert np.array_equal(sweep["floor"].top[low], sweep["ceil"].top[low])
    assert np.array_equal(sweep["floor"].top[low], sweep["even"].top[low])


def test_above_one_and_three_quarters_floor_is_worse_than_one_seventh_and_the_others_better(
        rules):
    a, sweep = rules
    high = a > 1.75
    assert sweep["floor"].top[high].min() > 1 / 7
    for rule in ("ceil", "even"):
        assert sweep[rule].top[high].max() < 1 / 7
        assert np.array_equal(sweep[rule].top[high], sweep["ceil"].top[high])


def test_a_scale_one_binade_up_costs_the_small_elements_precision_and_flushes_six(rules):
    a, sweep = rules
    up = {"floor": np.zeros_like(a, bool), "ceil": a > 1.5, "even": a >= 1.75}
    for rule, r in sweep.items():
        assert np.array_equal(r.exponent == -1, up[rule])
        assert {_pct(v, 1) for v in r.rest[~up[rule]]} == {13.3}
        assert {_pct(v, 1) for v in r.rest[up[rule]]} <= {29.4}
        assert np.array_equal(r.flushed, np.where(up[rule], 6, 0))
    assert sweep["ceil"].rest[a > 1.5].size and sweep["even"].rest[a >= 1.75].size


def test_the_normwise_error_is_the_same_for_every_tiling_and_spread(tiles):
    _, errors = tiles
    ref = errors[TILES_1X128].normwise
    for e in errors.values():
        assert {_pct(v, 1) for v in e.normwise} <= {2.6, 2.7}
        np.testing.assert_allclose(e.normwise, ref, rtol=1e-4)


def test_1x128_tiles_keep_every_row_at_the_unscaled_error(tiles):
    _, errors = tiles
    e = errors[TILES_1X128]
    assert {_pct(v, 1) for v in e.rowwise} <= {2.6, 2.7}
    assert np.all(e.flushed == 0)


def test_one_scale_per_tensor_loses_the_small_rows_once_the_spread_passes_e4m3s_range(tiles):
    spreads, errors = tiles
    e, at = errors[PER_TENSOR], {float(s): i for i, s in enumerate(spreads)}
    assert _pct(e.rowwise[at[10.0]], 1) == 2.6
    assert _pct(e.rowwise[at[15.0]], 1) == 4.6
    assert _pct(e.rowwise[at[20.0]]) == 24
    assert _pct(e.rowwise[at[30.0]]) == 49
    assert _pct(e.rowwise[at[40.0]]) == 60
    assert _pct(e.flushed[at[40.0]]) == 60


def test_128x128_tiles_span_half_the_rows_so_lose_small_rows_later(tiles):
    spreads, errors = tiles
    e, at = errors[TILES_128], {float(s): i for i, s in enumerate(spreads)}
    assert _pct(e.rowwise[at[20.0]], 1) == 2.7
    assert _pct(e.rowwise[at[30.0]], 1) == 3.8
    assert _pct(e.rowwise[at[40.0]]) == 20
    assert _pct(e.flushed[at[40.0]]) == 20


def test_the_row_wise_loss_is_the_fraction_of_elements_flushed_to_zero(tiles):
    spreads, errors = tiles
    for name in (PER_TENSOR, TILES_128):
        e = errors[name]
        assert abs(e.rowwise[-1] - e.flushed[-1]) < 0.01


def test_main_writes_both_figures(tmp_path, capsys):
    figures_blocks.main(["--out", str(tmp_path), "--n", "128", "--points", "3"])
    for name in ("block_scale_rules.png", "float8_tiles.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert "wrote" in capsys.readouterr().out
