"""nn.fp8 scaling state and telemetry: the delayed-scaling rule, formats per role, the log."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fpsim
from fpsim import E4M3FN, E5M2
from nn.fp8 import BlockScaling, CurrentScaling, DelayedScaling, ScalingState


def te_rule(amaxes, fp8_max, history_len, algo, margin):
    """Transformer Engine's fused delayed-scaling update (kernel_bulk in
    transformer_engine/common/recipe/delayed_scaling.cu), written as a list: a zero amax is
    skipped (no roll, scale kept); otherwise the window holds the last history_len amaxes, the
    current one included; "max" is fmaxf over it (a NaN is dropped), "most_recent" the current
    amax; scale = float32(fp8_max * 2^-margin) / amax in float32, kept when that amax is 0 or not
    finite; the scale before the first update is 1."""
    scales, window, scale = [], [], np.float32(1.0)
    for a in amaxes:
        if a != 0:
            window = (window + [np.float32(a)])[-history_len:]
            if algo == "max":
                ref = max((w for w in window if not np.isnan(w)), default=np.float32(0))
            else:
                ref = window[-1]
            if math.isfinite(ref) and ref > 0:
                scale = np.float32(fp8_max) * np.float32(2.0**-margin) / np.float32(ref)
        scales.append(float(scale))
    return scales


AMAXES = [3.0, 0.5, 100.0, 0.0, 2.0, 7.5, 1e-3, 4.0, 4.0, 0.25]


@pytest.mark.parametrize("algo", ["max", "most_recent"])
@pytest.mark.parametrize("history_len,margin", [(1, 0), (3, 0), (4, 2)])
def test_delayed_scale_sequence_equals_the_transformer_engine_rule(algo, history_len, margin):
    state = DelayedScaling("hybrid", history_len, algo, margin).new_state("forward")
    assert state.scale == 1.0
    got = [state.update(a) for a in AMAXES]
    assert got == te_rule(AMAXES, 448.0, history_len, algo, margin)


def test_history_window_rotates_as_transformer_engine_documents():
    state = ScalingState(448.0, history_len=4)
    for a in (1.0, 2.0, 3.0):
        state.update(a)
    # position 0 is the staging slot (zeroed), then the window oldest to newest
    assert state.amax_history.tolist() == [0.0, 1.0, 2.0, 3.0]
    state.update(4.0)
    assert state.amax_history.tolist() == [0.0, 2.0, 3.0, 4.0]


def test_zero_amax_keeps_the_previous_scale():
    state = DelayedScaling(amax_history_len=1).new_state("backward")
    assert state.update(0.0) == 1.0  # nothing seen yet: the initial scale
    assert state.update(2.0**-10) == 57344.0 * 2**10
    assert state.update(0.0) == 57344.0 * 2**10


def test_inf_amax_freezes_the_scale_while_it_is_in_the_window():
    state = DelayedScaling(amax_history_len=3).new_state("forward")
    state.update(4.0)
    frozen = [state.update(a) for a in (math.inf, 1.0, 1.0)]
    assert frozen == [112.0, 112.0, 112.0]  # the inf is in the window for 3 updates
    assert state.update(1.0) == 448.0  # ... and then gone


def test_nan_amax_is_dropped_by_the_max_as_te_fused_kernel_fmaxf_does():
    state = DelayedScaling(amax_history_len=3).new_state("forward")
    state.update(4.0)
    # the NaN is in the window (TE's kernel writes it) but fmaxf skips it: 4.0 rules until
    # it rotates out, then 1.0
    assert state.update(math.nan) == 112.0 and np.isnan(state.amax_history[-1])
    assert [state.update(a) for a in (1.0, 1.0)] == [112.0, 448.0]


def test_zero_amax_skips_the_update_without_rolling_the_window():
    state = DelayedScaling(amax_history_len=3).new_state("forward")
    for a in (8.0, 1.0, 1.0):
        state.update(a)
    before = state.amax_history.copy()
    assert state.update(0.0) == 56.0 and state.steps == 4  # 448 / 8, kept
    np.testing.assert_array_equal(state.amax_history, before)
    assert state.update(1.0) == 448.0  # the window rolled once: 8.0 is out


def test_most_recent_recovers_on_the_next_finite_amax():
    state = DelayedScaling(amax_history_len=8, amax_compute_algo="most_recent").new_state(
        "forward")
    assert [state.update(a) for a in (4.0, math.nan, 2.0)] == [112.0, 112.0, 224.0]


def test_scale_of_a_tiny_amax_is_clamped_to_float32_max():
    state = ScalingState(57344.0, history_len=1)
    assert state.update(1e-40) == float(np.finfo(np.float32).max)


def test_hybrid_is_e4m3_forward_and_e5m2_backward():
    hybrid, e4m3 = DelayedScaling("hybrid"), DelayedScaling("e4m3")
    assert (hybrid.format("forward"), hybrid.format("backward")) == (E4M3FN, E5M2)
    assert (e4m3.format("forward"), e4m3.format("backward")) == (E4M3FN, E4M3FN)
    assert hybrid.new_state("backward").fp8_max == 57344.0
    assert hybrid.new_state("forward").fp8_max == 448.0


@pytest.mark.parametrize("make,match", [
    (lambda: DelayedScaling("e5m2"), "fp8_format must be one of"),
    (lambda: DelayedScaling(amax_compute_algo="mean"), "amax_compute_algo must be one of"),
    (lambda: DelayedScaling(amax_history_len=0), "amax_history_len must be an integer from 1 to"),
    (lambda: DelayedScaling(margin=-1), "margin must be an integer from 0 to 134"),
    (lambda: DelayedScaling().new_state("fwd"), "role must be one of"),
    (lambda: BlockScaling("mxfp9"), "mxfp9"),
])
def test_bad_recipe_arguments_raise_naming_them(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_delayed_scaling_casts_with_the_scale_from_earlier_steps():
    recipe = DelayedScaling("hybrid", amax_history_len=2)
    x1 = np.float32([3.0, -0.3])
    q1, inv1 = recipe.quantize(x1, "t", "forward")  # scale 1: a plain (saturating) cast
    assert inv1 == 1.0 and q1.tolist() == fpsim.round(x1, E4M3FN).tolist()
    x2 = np.float32([100.0, 0.01])
    q2, inv2 = recipe.quantize(x2, "t", "forward")  # scale 448 / 3 from step 1
    s = np.float32(448.0) / np.float32(3.0)
    np.testing.assert_array_equal(q2, fpsim.round(x2.astype(np.float64) * float(s), E4M3FN,
                                                  overflow="saturate"))
    assert inv2 == float(np.float32(1) / s)


def test_current_scaling_uses_the_amax_of_the_tensor_being_cast():
    recipe = CurrentScaling("hybrid")
    x = np.float32([0.5, -2.0, 0.25])
    q, inv = recipe.quantize(x, "g", "backward")
    assert recipe.states["g"].scale == 57344.0 / 2.0
    assert q.tolist() == [14336.0, -57344.0, 7168.0]
    assert inv == float(np.float32(1.0) / np.float32(28672.0))  # TE's scale_inv, in float32


def test_telemetry_of_a_scripted_tensor():
    recipe = DelayedScaling("hybrid", amax_history_len=4)
    x = np.float32([1000.0, 1e-4, 2.0, 0.0, -500.0])
    recipe.quantize(x, "dense/Linear/input", "forward")  # scale 1: 1000, -500 saturate,
    recipe.quantize(x, "dense/Linear/input", "forward")  # 1e-4 < 2^-10 flushes; then 0.448
    first, second = recipe.log.records
    assert (first.step, first.amax, first.scale, first.elements) == (0, 1000.0, 1.0, 5)
    assert (first.saturated, first.flushed) == (2, 1)
    assert first.saturated_share == 0.4 and first.flushed_share == 0.2
    s = float(np.float32(448.0) / np.float32(1000.0))
    # float32(448 / 1000) is a hair above 0.448: 1000 * s = 448.0000138 > 448 clips (a little)
    assert (second.step, second.scale, second.saturated) == (1, s, 1)
    assert second.flushed == 1  # 1e-4 * 0.448 is still below e4m3fn's half-subnormal
    series = recipe.log.series("dense/Linear/input")
    assert series["scale"].tolist() == [1.0, s] and series["saturated_share"].tolist() == [0.4, 0.2]
    assert recipe.states["dense/Linear/input"].amax_history.tolist() == [0, 0, 1000, 1000]
    assert "dense/Linear/input" in recipe.log.table()
    with pytest.raises(KeyError, match="logged"):
        recipe.log.series("nope")


def test_block_telemetry_counts_what_fpsim_mx_clips_and_flushes():
    recipe = BlockScaling("mxfp8_e4m3")
    x = np.float32([500.0, 1.0, 1e-4, -3.3])  # one block: e = floor(log2 500) - 8 = 0
    q, inv = recipe.quantize(x, "w", "forward")
    assert inv == 1.0
    np.testing.assert_array_equal(q, fpsim.mx.quantize(x, "mxfp8_e4m3"))
    (rec,) = recipe.log.records
    assert (rec.saturated, rec.flushed, rec.amax, rec.fmt) == (1, 1, 500.0, "mxfp8_e4m3")


def test_an_active_monitor_counts_each_cast_at_the_tensors_name():
    with fpsim.monitor() as m:
        DelayedScaling().quantize(np.float32([1000.0, 1.0]), "dense/Linear/input", "forward")
        BlockScaling("mxfp4_e2m1").quantize(np.float32([7.0, 1.0]), "dense/Linear/weight",
                                            "forward")
    assert m.counts["dense/Linear/input"]["overflow"] == 1  # 1000 saturated to 448
    assert m.blocks["dense/Linear/weight"]["saturated"] == 1  # 7 / 2^0 > 6


@pytest.mark.parametrize("bad", [0.0, math.inf, math.nan])
def test_current_scaling_of_a_zero_or_nonfinite_amax_is_one(bad):
    recipe = CurrentScaling("e4m3")
    recipe.quantize(np.float32([2.0]), "t", "forward")
    assert recipe.states["t"].scale == 224.0
    recipe.quantize(np.float32([bad, 0.0]), "t", "forward")
    assert recipe.states["t"].scale == 1.0 and recipe.log.records[-1].scale == 1.0


def test_a_calibrated_amax_is_staged_and_the_next_update_takes_the_larger():
    # TE: Float8Quantizer.calibrate copies the amax into position 0 of the history; the next
    # cast atomicMaxFloat's its own amax into that slot before the fused update
    state = ScalingState(448.0, 4)
    state.calibrate(3.0)
    state.calibrate(8.0)  # the last calibration wins
    assert (state.scale, state.steps, state.amax_history.tolist()) == (1.0, 0, [8, 0, 0, 0])
    assert state.update(2.0) == 56.0 and state.amax_history.tolist() == [0, 0, 0, 8]
    low = ScalingState(448.0, 4)
    low.calibrate(1.0)
    assert low.update(4.0) == 112.0
    zero = ScalingState(448.0, 2)
    zero.calibrate(4.0)
    assert zero.update(0.0) == 112.0  # the staged amax is not zero: no skip
    assert te_rule([4.0], 448.0, 2, "max", 0) == [112.0]
