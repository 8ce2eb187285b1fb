"""``slot_dtype``: optimizer state kept in a narrow format (Adam's m and v in fp16), against a
reference written with numpy's IEEE float16, and the failure it is there to show."""

from __future__ import annotations

import numpy as np
import pytest

import nn


def _variable(values: list[float]) -> nn.Variable:
    with nn.policy_scope("float32"):
        return nn.Variable(np.array(values, np.float32), name="w")


def test_adam_with_float16_slots_matches_a_numpy_float16_reference_step_by_step():
    rng = np.random.default_rng(0)
    w = _variable([0.5, -1.0, 2.0, 0.25])
    opt = nn.Adam(0.01, slot_dtype="float16")
    m = np.zeros(4, np.float32)
    v = np.zeros(4, np.float32)
    ref = w.data.copy()
    for t in range(1, 6):
        g = (rng.standard_normal(4) * 0.05).astype(np.float32)
        opt.apply_gradients([(g, w)])
        # the reference: Keras's formulas in float32, each slot stored as IEEE float16
        m = (m + (g - m) * np.float32(0.1)).astype(np.float16).astype(np.float32)
        v = (v + (g * g - v) * np.float32(0.001)).astype(np.float16).astype(np.float32)
        alpha = np.float32(0.01) * np.sqrt(1 - np.float32(0.999) ** t) / (
            1 - np.float32(0.9) ** t)
        eps = np.float32(np.float16(1e-7))
        ref = ref - m * alpha / (np.sqrt(v) + eps)
        np.testing.assert_allclose(w.data, ref, rtol=1e-6)
        np.testing.assert_array_equal(opt.get_slot(w, "velocity"), v)
    assert np.all(opt.get_slot(w, "momentum") == opt.get_slot(w, "momentum").astype(np.float16))


def test_adam_float16_slots_flush_epsilon_1e_8_and_a_small_second_moment_to_zero():
    # g = 1e-4: m = 1e-5 survives in fp16, v = 1e-3 * 1e-8 = 1e-11 is below fp16's smallest
    # subnormal (2**-24 ~ 6e-8), and eps 1e-8 rounds to 0: the step divides by zero
    g = np.full(2, 1e-4, np.float32)
    narrow, wide = _variable([1.0, 1.0]), _variable([1.0, 1.0])
    fp16 = nn.Adam(1e-3, epsilon=1e-8, slot_dtype="float16")
    fp32 = nn.Adam(1e-3, epsilon=1e-8)
    fp16.apply_gradients([(g, narrow)])
    fp32.apply_gradients([(g, wide)])
    assert np.all(fp16.get_slot(narrow, "velocity") == 0)
    assert np.all(fp16.get_slot(narrow, "momentum") > 0)
    assert np.all(~np.isfinite(narrow.data))
    assert np.all(np.isfinite(wide.data)) and np.all(wide.data < 1.0)


def test_slot_dtype_none_is_the_default_and_changes_nothing():
    g = np.array([1e-4, -3e-3], np.float32)
    a, b = _variable([1.0, 2.0]), _variable([1.0, 2.0])
    nn.Adam(1e-3).apply_gradients([(g, a)])
    nn.Adam(1e-3, slot_dtype=None).apply_gradients([(g, b)])
    np.testing.assert_array_equal(a.data, b.data)


@pytest.mark.parametrize("cls", [nn.SGD, nn.RMSprop, nn.Adam])
def test_slot_dtype_round_trips_through_get_config(cls):
    kwargs = {"momentum": 0.9} if cls is not nn.Adam else {}
    opt = cls(0.01, slot_dtype="bf16", **kwargs)
    assert opt.get_config()["slot_dtype"] == "bfloat16"
    assert type(opt).from_config(opt.get_config()).slot_format == opt.slot_format
    assert "slot_dtype" not in cls(0.01).get_config()


def test_sgd_momentum_slot_in_bfloat16_holds_bfloat16_values():
    w = _variable([1.0, 1.0, 1.0])
    opt = nn.SGD(0.1, momentum=0.9, slot_dtype="bfloat16")
    opt.apply_gradients([(np.array([0.123456, 1e-3, 7.77], np.float32), w)])
    m = opt.get_slot(w, "momentum")
    import ml_dtypes

    np.testing.assert_array_equal(m, m.astype(ml_dtypes.bfloat16).astype(np.float32))
    assert m[0] != np.float32(-0.1 * 0.123456)


@pytest.mark.parametrize("bad", ["float17", "float64", 3])
def test_a_bad_slot_dtype_names_the_argument(bad):
    with pytest.raises((ValueError, TypeError), match="slot_dtype"):
        nn.Adam(0.01, slot_dtype=bad)
