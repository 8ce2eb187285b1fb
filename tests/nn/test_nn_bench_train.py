"""benchmarks/bench_train.py runs, and its hand-written numpy step agrees with nn's step."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

import nn

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_train.py"
_spec = importlib.util.spec_from_file_location("bench_train", _PATH)
bench_train = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_train)


def test_numpy_reference_step_equals_the_nn_float32_step():
    sizes, rng = [6, 8, 8, 3], np.random.default_rng(0)
    x = rng.random((5, 6), dtype=np.float32)
    y = rng.integers(0, 3, 5)
    model = bench_train.nn_model(sizes, "float32", seed=0)
    params = [v.numpy() for v in model.trainable_variables]
    loss_fn = nn.losses.SparseCategoricalCrossentropy(from_logits=True)
    for _ in range(3):
        ref_loss = bench_train.numpy_step(params, x, y)
        loss = bench_train.nn_step(model, loss_fn, x, y)
        assert np.isclose(loss, ref_loss, rtol=1e-5)
    for p, v in zip(params, model.trainable_variables, strict=True):
        np.testing.assert_allclose(v.data, p, rtol=1e-5, atol=1e-6)


def test_bench_reports_every_variant():
    times = bench_train.bench([6, 8, 8, 3], batch=4, repeats=1)
    assert set(times) == {"numpy float32", "nn float32", "nn mixed_float16"}
    assert all(len(t) == 1 and t[0] > 0 for t in times.values())
