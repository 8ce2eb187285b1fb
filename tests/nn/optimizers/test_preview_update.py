"""Optimizer.preview_update: the update the next step would make, with nothing changed.

Oracle: the optimizer's own ``apply_gradients`` on an identical copy (same variable, same
slots, same iteration): the weight it stores is ``w - preview``, element for element."""

from __future__ import annotations

import numpy as np
import pytest

import nn


def _pair(make):
    """Two identical (variable, optimizer) pairs after two identical steps."""
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((3, 4)).astype(np.float32)
    grads = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(3)]
    pairs = []
    for _ in range(2):
        var = nn.Variable(w0.copy())
        opt = make()
        for g in grads[:2]:
            opt.apply_gradients([(g, var)])
        pairs.append((var, opt))
    return pairs, grads[2]


@pytest.mark.parametrize("make", [lambda: nn.Adam(1e-2), lambda: nn.SGD(0.1, momentum=0.9),
                                  lambda: nn.SGD(0.1)], ids=["adam", "sgd-momentum", "sgd"])
def test_preview_is_the_update_the_next_step_applies(make):
    ((var, opt), (twin, twin_opt)), g = _pair(make)
    before = var.data.copy()
    preview = opt.preview_update(var, g)
    twin_opt.apply_gradients([(g, twin)])
    np.testing.assert_array_equal(before - preview, twin.data)


@pytest.mark.parametrize("make", [lambda: nn.Adam(1e-2), lambda: nn.SGD(0.1, momentum=0.9)],
                         ids=["adam", "sgd-momentum"])
def test_preview_changes_no_slot_iteration_or_weight(make):
    ((var, opt), _), _ = _pair(make)
    slots = {name: opt.get_slot(var, name).copy() for name in opt.slot_names}
    weight, iterations = var.data.copy(), opt.iterations
    opt.preview_update(var, np.ones_like(var.data), weight=np.zeros_like(var.data))
    assert opt.iterations == iterations
    np.testing.assert_array_equal(var.data, weight)
    for name, value in slots.items():
        np.testing.assert_array_equal(opt.get_slot(var, name), value)


def test_preview_before_any_step_starts_from_zero_slots():
    var, twin = nn.Variable(np.ones(5, np.float32)), nn.Variable(np.ones(5, np.float32))
    g = np.linspace(-1, 1, 5).astype(np.float32)
    opt, twin_opt = nn.Adam(1e-3), nn.Adam(1e-3)
    preview = opt.preview_update(var, g)
    twin_opt.apply_gradients([(g, twin)])
    np.testing.assert_array_equal(np.ones(5, np.float32) - preview, twin.data)
    assert opt.variables == []  # previewing does not start tracking the variable


def test_preview_refuses_a_gradient_of_another_shape():
    var = nn.Variable(np.ones((2, 2), np.float32))
    with pytest.raises(ValueError, match=r"preview_update: grad for .* shape \(3,\)"):
        nn.SGD(0.1).preview_update(var, np.ones(3, np.float32))
