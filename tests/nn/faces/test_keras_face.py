"""Small Keras-face pieces: ``nn.mixed_precision``, ``Policy.compute_dtype``/``variable_dtype``,
``from nn import layers``, fixed-scale ``LossScaleOptimizer``, ``policy_scope``'s meaning."""

from __future__ import annotations

import numpy as np
import pytest

import fpsim
import nn
from nn import layers
from nn.precision import mixed_precision


def test_mixed_precision_names_are_the_ones_in_their_home_modules():
    assert mixed_precision.Policy is nn.Policy is mixed_precision.DTypePolicy
    assert mixed_precision.set_global_policy is nn.set_global_policy
    assert mixed_precision.global_policy is nn.global_policy is mixed_precision.dtype_policy
    assert mixed_precision.LossScaleOptimizer is nn.LossScaleOptimizer


def test_set_global_policy_through_mixed_precision_sets_new_layers_policy():
    mixed_precision.set_global_policy("mixed_float16")
    policy = mixed_precision.global_policy()
    assert (policy.compute_dtype, policy.variable_dtype) == ("float16", "float32")
    assert layers.Dense(2).dtype_policy == "mixed_float16"


@pytest.mark.parametrize("name, compute, variable", [
    ("float32", "float32", "float32"),
    ("mixed_float16", "float16", "float32"),
    ("mixed_bfloat16", "bfloat16", "float32"),
    ("float16", "float16", "float16"),
    ("bfloat16", "bfloat16", "bfloat16"),
    ("mixed_e4m3fn", "float8_e4m3fn", "float32"),
    ("float64", "float64", "float64"),
])
def test_policy_dtypes_are_keras_strings_and_formats_stay_formats(name, compute, variable):
    p = nn.Policy(name)
    assert (p.compute_dtype, p.variable_dtype) == (compute, variable)
    assert isinstance(p.compute_dtype, str) and isinstance(p.variable_dtype, str)
    assert nn.DType.of(p.compute_format) == p.compute_dtype
    assert p.variable_format is None or isinstance(p.variable_format, fpsim.Format)


def test_from_nn_import_layers_has_the_guide_layers():
    for name in ("Dense", "Activation", "Dropout", "Flatten", "ReLU", "Layer"):
        assert getattr(layers, name) is getattr(nn, name)


def test_a_fixed_scale_loss_scale_optimizer_has_no_growth_steps():
    opt = nn.LossScaleOptimizer(nn.SGD(), dynamic=False)
    assert opt.dynamic_growth_steps is None and opt.dynamic_counter is None
    assert nn.LossScaleOptimizer(nn.SGD()).dynamic_growth_steps == 2000
    with pytest.raises(ValueError, match="dynamic_growth_steps must be None when dynamic=False"):
        nn.LossScaleOptimizer(nn.SGD(), dynamic=False, dynamic_growth_steps=100)


def test_a_fixed_scale_survives_save_and_load(tmp_path):
    nn.set_global_policy("mixed_float16")
    nn.set_random_seed(0)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(16, 4)).astype(np.float32), rng.integers(0, 3, 16)
    model = nn.Sequential([nn.Dense(3)]).compile("sgd", "sparse_categorical_crossentropy")
    model.fit(x, y, epochs=1, verbose=0, loss_scale=128)
    model.save(tmp_path / "m.npz")
    loaded = nn.load_model(tmp_path / "m.npz")
    scaler = loaded.loss_scale_optimizer
    assert scaler.loss_scale == 128 and not scaler.dynamic
    assert scaler.dynamic_growth_steps is None


def test_policy_scope_sets_the_policy_of_layers_created_inside_only():
    nn.set_random_seed(0)
    model = nn.Sequential([nn.Dense(3)])
    x = np.ones((2, 4), np.float32)
    before = model(x).numpy()
    with nn.policy_scope("mixed_float16"):
        out = model(x)  # built before the block: keeps its float32 policy
        inner = nn.Dense(3)
    assert out.dtype == "float32" and np.array_equal(out.numpy(), before)
    assert inner.dtype_policy == "mixed_float16"
