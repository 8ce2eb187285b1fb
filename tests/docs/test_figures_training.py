"""benchmarks/figures_training.py: the numbers docs/hardware.md quotes beside its figures
nvfp4_recipe.png and bf16_remedies.png (the script's defaults, seed 0), each checked against
an oracle computed here (float64 products and sums, fpsim.mx's own NVFP4 quantization)."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

import fpsim
from fpsim.hadamard import random_hadamard_transform
from nn.fp8.nvfp4 import NVFP4BlockScaling

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import figures_training as ft  # noqa: E402

NO_RHT, RHT = ft.RHT_PAIRS["nearest"]


@pytest.fixture(scope="module")
def rht():
    return ft.rht_errors()


@pytest.fixture(scope="module")
def blocks():
    x = ft.gradient_like(0, 256)
    return x, {f: ft.block_errors(x, f) for f in (False, True)}


@pytest.fixture(scope="module")
def bf16():
    paths = ft.bf16_trajectories()
    return paths, ft.bf16_summary(paths)


# ---- nvfp4_recipe.png, left: the random Hadamard transform ------------------------------------
def test_the_recipe_transforms_both_wgrad_operands_into_fpsim_nvfp4_of_the_transformed_values():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 32)).astype(np.float32)
    on, off = NVFP4BlockScaling(disable_stochastic_rounding=True), NVFP4BlockScaling(
        disable_rht=True, disable_stochastic_rounding=True)
    q_on, _ = on.quantize(a, "d/Linear/input_t", "forward", axis=-2)
    q_off, _ = off.quantize(a, "d/Linear/input_t", "forward", axis=-2)
    transformed = random_hadamard_transform(a, axis=0)
    np.testing.assert_array_equal(q_on, fpsim.mx.quantize(transformed, "nvfp4", axis=0))
    np.testing.assert_array_equal(q_off, fpsim.mx.quantize(a, "nvfp4", axis=0))
    assert on.changes["rht_tensors"] == 1 and off.changes["rht_tensors"] == 0
    # the transform leaves the product summed over tokens unchanged: (Q a)^T (Q a) = a^T a
    a64 = a.astype(np.float64)
    t64 = random_hadamard_transform(a64, axis=0)
    np.testing.assert_allclose(t64.T @ t64, a64.T @ a64, rtol=0, atol=1e-12)


def test_the_outlier_model_puts_one_element_of_magnitude_m_in_every_16_token_block():
    g = ft.gradient_like(0, 64)
    gm = ft.with_outliers(g, 500.0, 0)
    big = np.abs(gm) == 500.0
    assert np.all(big.reshape(4, 16, ft.FEATURES).sum(axis=1) == 1)
    assert np.array_equal(gm[~big], g[~big]) and np.all(np.sign(gm[big]) == np.sign(g[big]))


def test_without_outliers_the_transform_leaves_the_wgrad_error_within_one_percent(rht):
    for no, yes in ft.RHT_PAIRS.values():
        assert ft.OUTLIERS[0] == 1
        assert abs(rht[yes][0] / rht[no][0] - 1) < 0.01


def test_from_m_5_to_1000_the_transform_raises_the_wgrad_error_with_either_rounding(rht):
    for ratios in ft.rht_ratios(rht).values():
        assert all(r > 1 for m, r in zip(ft.OUTLIERS, ratios, strict=True) if m >= 5)


def test_the_largest_rise_is_a_third_at_m_50_with_nearest_rounding(rht):
    ratios = ft.rht_ratios(rht)["nearest"]
    i = int(np.argmax(ratios))
    assert ft.OUTLIERS[i] == 50
    assert f"{rht[NO_RHT][i]:.3f} {rht[RHT][i]:.3f} {ratios[i]:.2f}" == "0.120 0.160 1.33"
    assert f"{max(ft.rht_ratios(rht)['stochastic gradient']):.2f}" == "1.31"


def test_stochastic_rounding_of_the_gradient_adds_error_at_every_m(rht):
    for rht_on in (False, True):
        near, stoch = (ft.RHT_CASES[i][0] for i in ((1, 3) if rht_on else (0, 2)))
        assert all(s > n for s, n in zip(rht[stoch], rht[near], strict=True))


# ---- nvfp4_recipe.png, right: 4/6 ---------------------------------------------------------------
def test_the_default_scale_is_fpsim_mx_nvfp4_and_4_over_6_never_raises_a_blocks_error(blocks):
    x, errs = blocks
    q, _ = NVFP4BlockScaling().quantize(x, "d/Linear/input", "forward")
    np.testing.assert_array_equal(q, fpsim.mx.quantize(x, "nvfp4"))
    default, fos = errs[False][0], errs[True][0]
    assert np.all(fos <= default)
    kept = ~(fos < default)
    assert np.array_equal(fos[kept], default[kept])  # a block that keeps 6 is unchanged


def test_4_over_6_scales_1848_of_4096_blocks_to_4_and_lowers_the_error_to_0_0870(blocks):
    _, errs = blocks
    default, fos = errs[False], errs[True]
    assert fos[2] == 1848 == np.count_nonzero(fos[0] < default[0]) and fos[0].size == 4096
    assert default[2] == 0
    assert f"{default[1]:.4f} -> {fos[1]:.4f}" == "0.0950 -> 0.0870"


# ---- bf16_remedies.png ------------------------------------------------------------------------
def test_each_update_is_1e_4_about_1_78_of_bf16s_last_place_in_1_2(bf16):
    paths, _ = bf16
    assert round(ft.BF16_ULP / float(np.float32(ft.LEARNING_RATE))) == 78
    assert np.all(paths["exact"] < 2) and paths["exact"][0] == 1.0
    for name in ft.REMEDIES:  # every weight a bf16 value at every step
        w = paths[name]
        assert np.array_equal(np.asarray(fpsim.round(w, "bfloat16"), np.float32), w)


def test_nearest_updates_leave_the_bf16_weight_at_1_while_the_exact_sum_reaches_1_2(bf16):
    paths, s = bf16
    assert np.all(paths["nearest"] == 1.0)
    assert f"{s['final_exact']:.4f}" == "1.2000"
    assert f"{s['nearest_ulp']:.1f}" == "25.6"


def test_stochastic_updates_stray_up_to_3_9_last_places_and_their_mean_within_0_26(bf16):
    paths, s = bf16
    assert f"{s['stochastic_0_ulp']:.1f}" == "3.9"
    assert s["stochastic_mean_ulp"] < 0.26
    assert s["final_stochastic_0"] == 1.203125
    assert paths["stochastic"].shape == (2001, 256)


def test_kahan_keeps_the_bf16_weight_within_1_2_last_places_of_the_exact_sum(bf16):
    paths, s = bf16
    assert f"{s['kahan_ulp']:.2f}" == "1.19" and s["kahan_ulp"] < 1.2
    assert s["final_kahan"] == 1.203125
    assert np.all(paths["kahan"] == paths["kahan"][:, :1])  # deterministic: all weights alike


def test_kahans_bf16_compensation_runs_ahead_by_2_8_percent_of_a_constant_update(bf16):
    paths, s = bf16
    assert f"{s['kahan_drift']:.4f}" == "0.0056" and f"{s['kahan_drift_share']:.1%}" == "2.8%"
    drift = paths["kahan"][:, 0] - paths["compensation"][:, 0].astype(np.float64) - paths["exact"]
    assert drift[-1] == drift.max() > 0


def test_with_an_update_the_bf16_compensation_holds_exactly_kahan_tracks_the_sum_exactly():
    # 2^-13: every compensation value is a multiple of 2^-13 below 2^-8, exact in bf16
    paths = ft.bf16_trajectories(steps=600, weights=2, learning_rate=2.0**-13)
    w_minus_c = paths["kahan"].astype(np.float64) - paths["compensation"]
    np.testing.assert_array_equal(w_minus_c, np.repeat(paths["exact"][:, None], 2, axis=1))
    assert np.all(paths["nearest"] == 1.0)


# ---- the script ---------------------------------------------------------------------------------
def test_main_writes_both_figures(tmp_path, capsys):
    ft.main(["--out", str(tmp_path), "--tokens", "32", "--steps", "40", "--weights", "4"])
    for name in ("nvfp4_recipe.png", "bf16_remedies.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert "blocks worse under 4/6: 0" in capsys.readouterr().out
