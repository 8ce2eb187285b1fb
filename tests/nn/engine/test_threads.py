"""nn's state is per thread: grad mode, name scopes and policy scopes (ContextVars).

``set_global_policy`` stays process-wide, as in Keras; ``policy_scope`` overrides it in the
current thread only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import same_arrays as _same

import nn
from nn.engine.autograd import current_scope, name_scope

REPEATS = 4  # the old shared-stack bug failed about every other run; bounded, each run < 1 s


def _run_together(*jobs: Callable[[], Any], timeout: float = 120.0) -> list[Any]:
    """Run ``jobs`` in threads released at the same moment; their results, or re-raise."""
    start = threading.Barrier(len(jobs))
    results: list[Any] = [None] * len(jobs)

    def run(i: int) -> None:
        start.wait()
        try:
            results[i] = jobs[i]()
        except BaseException as e:  # noqa: BLE001 (handed to the main thread)
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a thread hung"
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


def _data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((256, 8)).astype(np.float32), rng.integers(0, 3, 256)


def _model(policy: str, seed: int) -> nn.Model:
    model = nn.Sequential([nn.Dense(16, activation="relu", seed=seed, dtype=policy),
                           nn.Dense(3, seed=seed + 1, dtype=policy)])
    return model.compile("adam", "sparse_categorical_crossentropy")


def _train(policy: str, seed: int, telemetry: bool) -> list[np.ndarray]:
    x, y = _data(seed)
    model = _model(policy, seed)
    model.fit(x, y, batch_size=16, epochs=2, seed=seed, verbose=0, telemetry=telemetry)
    return [v.data.copy() for v in model.trainable_variables]


@pytest.mark.parametrize("telemetry", [False, True])
def test_two_fits_in_two_threads_at_once_train_as_they_do_alone(telemetry):
    jobs = [("float32", 1), ("mixed_float16", 2)]
    alone = [_train(policy, seed, telemetry) for policy, seed in jobs]
    for _ in range(REPEATS):
        together = _run_together(*[
            (lambda p=p, s=s: _train(p, s, telemetry)) for p, s in jobs
        ])
        assert all(_same(t, a) for t, a in zip(together, alone, strict=True))


def test_no_grad_in_one_thread_leaves_another_thread_recording():
    inside, release = threading.Event(), threading.Event()

    def hold_no_grad() -> bool:
        with nn.no_grad():
            inside.set()
            release.wait(30)
            return nn.is_grad_enabled()

    def record() -> bool:
        inside.wait(30)
        try:
            t = nn.Tensor([1.0, 2.0], requires_grad=True)
            y = (t * t).sum()
            return nn.is_grad_enabled() and y.requires_grad
        finally:
            release.set()

    held, recorded = _run_together(hold_no_grad, record)
    assert held is False and recorded is True


def test_a_policy_scope_held_in_one_thread_does_not_reach_layers_another_thread_creates():
    inside, release = threading.Event(), threading.Event()

    def hold_scope() -> str:
        with nn.policy_scope("mixed_bfloat16"):
            inside.set()
            release.wait(30)
            return nn.Dense(2).dtype_policy.name

    def build() -> str:
        inside.wait(30)
        try:
            return nn.Dense(2).dtype_policy.name
        finally:
            release.set()

    held, built = _run_together(hold_scope, build)
    assert held == "mixed_bfloat16" and built == "float32"


def test_set_global_policy_is_process_wide_and_a_policy_scope_overrides_it_per_thread():
    nn.set_global_policy("mixed_float16")
    seen = _run_together(lambda: nn.global_policy().name)
    assert seen == ["mixed_float16"]
    with nn.policy_scope("bfloat16"):
        nn.set_global_policy("float16")  # the process default changes; this scope still wins
        assert nn.global_policy().name == "bfloat16"
        assert _run_together(lambda: nn.global_policy().name) == ["float16"]
    assert nn.global_policy().name == "float16"


def test_name_scopes_in_two_threads_do_not_nest_into_each_other():
    inside, release = threading.Event(), threading.Event()

    def hold(name: str, first: bool) -> str:
        if not first:
            inside.wait(30)
        with name_scope(name):
            if first:
                inside.set()
                release.wait(30)
            else:
                release.set()
            return current_scope()

    assert _run_together(lambda: hold("a", True), lambda: hold("b", False)) == ["a", "b"]
