"""benchmarks/bench_models.py runs every variant, and its models are the layers' CNN and LM."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import nn

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_models.py"
_spec = importlib.util.spec_from_file_location("bench_models", _PATH)
bench_models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_models)


def test_bench_reports_a_step_time_for_every_model_and_policy():
    cnn = {"batch": 2, "image": (4, 4, 1), "filters": (2, 2), "classes": 3}
    lm = {"batch": 2, "length": 4, "vocab": 5, "dim": 4, "heads": 2, "ff": 4}
    times = bench_models.bench(1, cnn, lm, with_torch=False)
    assert set(times) == {f"{m} {p}" for m in ("cnn", "lm") for p in bench_models.POLICIES}
    assert all(len(t) == 1 and t[0] > 0 for t in times.values())


def test_an_sgd_step_lowers_the_loss_of_the_language_model():
    model = bench_models.lm_model("mixed_float16", vocab=5, length=4, dim=4, heads=2, ff=4)
    ids = np.tile(np.arange(5), (4, 1))
    loss_fn = nn.losses.SparseCategoricalCrossentropy(from_logits=True)
    bench_models.LR = 0.1
    losses = [bench_models.nn_step(model, loss_fn, ids[:, :-1], ids[:, 1:]) for _ in range(5)]
    assert losses[-1] < losses[0]


def test_rotated_rounds_start_one_step_later_each_round_group_after_group():
    calls: list[str] = []
    nn_steps = {k: (lambda k=k: calls.append(k) or 1.0) for k in "abc"}
    torch_steps = {k: (lambda k=k: calls.append(k) or 2.0) for k in "xy"}
    times = bench_models.rotated_times([nn_steps, torch_steps], 3)
    assert calls == list("abcxy" "abcxy" "bcayx" "cabxy")  # warm-up, then three rounds
    assert times == {**{k: [1.0] * 3 for k in "abc"}, **{k: [2.0] * 3 for k in "xy"}}


def test_the_torch_child_answers_with_no_steps_where_torch_is_not_importable():
    import sys

    sys.path.insert(0, str(_PATH.parent))
    from torch_models import TorchProcess

    try:
        import torch  # noqa: F401
    except ImportError:
        child = TorchProcess(np.zeros((1, 4, 4, 1), np.float32), np.zeros(1, np.int64),
                             np.zeros((1, 4), np.int64), np.zeros((1, 4), np.int64), {}, {}, 0.1)
        assert child.names == []
        assert child.close() == 0
    else:
        pytest.skip("torch is importable here")
