"""nn.fp8's per-tensor recipes at the edges of their arguments: margin, amax_history_len, and
current scaling's options (TE's compute_scale_from_amax)."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

import nn
from nn.fp8 import CurrentScaling, DelayedScaling
from nn.fp8.state import MAX_AMAX_HISTORY_LEN, current_scale

F32_TINY = float(np.finfo(np.float32).tiny)


def _step(recipe, seed=0):
    """One forward and backward of a @ b under ``recipe``: (output, grad a, grad b)."""
    rng = np.random.default_rng(seed)
    a = nn.Tensor(rng.standard_normal((4, 16)).astype(np.float32), requires_grad=True)
    b = nn.Tensor(rng.standard_normal((16, 3)).astype(np.float32), requires_grad=True)
    with nn.fp8_autocast(recipe):
        out = a @ b
    out.sum().backward()
    return out.data, a.grad.data, b.grad.data


@pytest.mark.parametrize("make", [lambda: DelayedScaling(margin=100),
                                  lambda: CurrentScaling(margin=100)])
def test_a_margin_that_flushes_every_operand_gives_zeros_not_nan(make):
    recipe = make()
    for seed in range(3):  # delayed scaling: step 0 has scale 1, later steps the tiny scale
        results = _step(recipe, seed)
    for r in results:
        assert np.all(r == 0), r  # 2^-100-scaled values all flush in E4M3/E5M2


@pytest.mark.parametrize("fmt,largest", [("hybrid", 134), ("e4m3", 134)])
def test_the_largest_margin_runs_and_the_next_is_refused_naming_margin(fmt, largest):
    # the bound: E4M3's 448 * 2^-margin must stay a normal float32 (written out here)
    assert 448.0 * 2.0**-largest >= F32_TINY > 448.0 * 2.0**-(largest + 1)
    for make in (DelayedScaling, CurrentScaling):
        recipe = make(fp8_format=fmt, margin=largest)
        for seed in range(2):
            results = _step(recipe, seed)
        assert all(np.all(np.isfinite(r)) for r in results)
        with pytest.raises(ValueError, match=rf"margin must be an integer from 0 to {largest} "
                                             rf".*got {largest + 1}"):
            make(fp8_format=fmt, margin=largest + 1)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_a_margin_that_is_not_an_integer_in_range_is_refused(bad):
    with pytest.raises(ValueError, match="margin must be an integer from 0 to 134"):
        DelayedScaling(margin=bad)


def test_a_huge_amax_history_len_is_refused_before_anything_is_allocated():
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=rf"amax_history_len must be an integer from 1 to "
                                             rf"{MAX_AMAX_HISTORY_LEN}.*got 1000000000000"):
            DelayedScaling(amax_history_len=10**12)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20
    assert DelayedScaling(amax_history_len=MAX_AMAX_HISTORY_LEN).amax_history_len == 2**20


def test_delayed_scaling_keeps_1024_amaxes_by_default_as_transformer_engine():
    recipe = DelayedScaling()
    assert recipe.amax_history_len == 1024
    assert nn.Policy("fp8_hybrid_delayed").recipe.amax_history_len == 16  # ours, named so
    with nn.fp8_autocast() as ctx:
        assert ctx.recipe.amax_history_len == 1024
    # one outlier step: the scale stays at 448 / 100 for the next 1023 updates
    state = recipe.new_state("forward")
    state.update(100.0)
    scales = [state.update(1.0) for _ in range(1024)]
    assert scales[1022] == float(np.float32(448.0) / np.float32(100.0)) and scales[1023] == 448.0


def te_current_scale(amax, fp8_max, power_2, eps):
    """compute_scale_from_amax of transformer_engine/common/recipe/recipe_common.cuh, written
    with Python floats: amax raised to eps; 1 for 0, inf, NaN; fp8_max / amax in float32 (inf:
    float32's max); power_2: the float32's exponent bits only."""
    amax = max(amax, eps) if not math.isnan(amax) else amax
    if math.isinf(amax) or amax == 0 or math.isnan(amax):
        return 1.0
    with np.errstate(over="ignore"):
        s = float(np.float32(fp8_max) / np.float32(amax))
    s = float(np.finfo(np.float32).max) if math.isinf(s) else s
    if power_2:
        m, e = math.frexp(s)
        s = math.ldexp(0.5, e)  # 2^floor(log2 s): the mantissa bits cleared
    return s


@pytest.mark.parametrize("power_2", [False, True])
@pytest.mark.parametrize("eps", [0.0, 1e-3])
def test_current_scale_equals_transformer_engine_compute_scale_from_amax(power_2, eps):
    amaxes = [3.0, 0.1, 1e-4, 0.0, math.inf, math.nan, 1e-40, 448.0, 500.0, 7.0]
    for fp8_max in (448.0, 57344.0):
        got = [current_scale(a, fp8_max, 0, power_2, eps) for a in amaxes]
        assert got == [te_current_scale(a, fp8_max, power_2, eps) for a in amaxes]


def test_current_scaling_options_reach_the_cast():
    x = np.float32([0.3, -3.0, 1e-6])
    plain, pow2 = CurrentScaling(), CurrentScaling(use_power_2_scales=True, amax_epsilon=10.0)
    plain.quantize(x, "t", "forward")
    pow2.quantize(x, "t", "forward")
    assert plain.states["t"].scale == float(np.float32(448.0) / np.float32(3.0))
    assert pow2.states["t"].scale == 32.0  # 448 / max(3, 10) = 44.8 -> 32
    assert "use_power_2_scales=True" in repr(pow2) and plain.config()[-1] == 0
    with pytest.raises(ValueError, match="amax_epsilon"):
        CurrentScaling(amax_epsilon=-1.0)
    with pytest.raises(TypeError, match="use_power_2_scales must be True or False"):
        CurrentScaling(use_power_2_scales=1)


def test_nn_fp8_autocast_given_a_bool_for_the_recipe_names_both_spellings():
    with pytest.raises(TypeError, match=r"takes the recipe first.*nn.faces.te.fp8_autocast"):
        nn.fp8_autocast(True)


def test_an_fp8_autocast_exited_from_another_thread_is_refused_and_the_owner_keeps_it():
    import threading

    block, errors = nn.fp8_autocast(DelayedScaling()), []
    block.__enter__()

    def foreign_exit():
        try:
            block.__exit__(None, None, None)
        except RuntimeError as e:
            errors.append(str(e))

    worker = threading.Thread(target=foreign_exit)
    worker.start()
    worker.join()
    assert len(errors) == 1 and "exited from a thread that did not enter it" in errors[0]
    assert nn.fp8.active_recipe() is block.recipe  # still on in the owner
    block.__exit__(None, None, None)  # the owner's exit works
    assert nn.fp8.active_recipe() is None
    with pytest.raises(RuntimeError, match="exited without being entered"):
        block.__exit__(None, None, None)
