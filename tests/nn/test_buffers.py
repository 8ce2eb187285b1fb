"""nn._buffers: recycled output arrays are handed out again only when nothing refers to them,
and a training step gives bit-identical results with and without them."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fpsim
import nn
from nn import _buffers
from nn.functions import linalg

SHAPE = (64, 512)  # 128 KiB: above MIN_BYTES


@pytest.fixture(autouse=True)
def _fresh_pool():
    _buffers.clear()
    yield
    _buffers.ENABLED = True
    _buffers.clear()


def test_a_freed_array_is_handed_out_again():
    a = _buffers.empty(SHAPE)
    address = a.ctypes.data
    del a
    b = _buffers.empty(SHAPE)
    assert b.ctypes.data == address and b.shape == SHAPE and b.dtype == np.float32


@pytest.mark.parametrize("holder", ["name", "view", "view_of_view", "tensor", "list",
                                    "memoryview", "reshaped"])
def test_an_array_still_referred_to_is_never_handed_out(holder):
    a = _buffers.empty(SHAPE)
    address = a.ctypes.data
    keep = {"name": lambda arr: arr, "view": lambda arr: arr[1:],
            "view_of_view": lambda arr: arr[1:][:, 2:],
            "tensor": lambda arr: nn.Tensor._make(arr, None), "list": lambda arr: [arr],
            "memoryview": memoryview, "reshaped": lambda arr: arr.reshape(-1)}[holder](a)
    del a
    others = [_buffers.empty(SHAPE) for _ in range(3)]
    assert all(o.ctypes.data != address for o in others)
    del keep, others
    assert _buffers.empty(SHAPE).ctypes.data == address  # released: recycled again


def test_small_arrays_and_a_disabled_pool_are_not_pooled():
    _buffers.empty((4, 4))
    _buffers.ENABLED = False
    _buffers.empty(SHAPE)
    assert _buffers.pooled_bytes() == 0


def test_the_pool_keeps_at_most_max_bytes_and_drops_unused_arrays_to_make_room(monkeypatch):
    monkeypatch.setattr(_buffers, "MAX_BYTES", 3 * 64 * 512 * 4)
    monkeypatch.setattr(_buffers, "DROP_EVERY", 3)
    held = [_buffers.empty(SHAPE) for _ in range(4)]  # the fourth is over budget: not pooled
    assert _buffers.pooled_bytes() == 3 * held[0].nbytes
    del held
    first = _buffers.empty((128, 512))  # 256 KiB: over budget a second time, not pooled
    assert _buffers.pooled_bytes() == 3 * 64 * 512 * 4
    other = _buffers.empty((128, 512))  # the third time: unused arrays make room for it
    assert _buffers.pooled_bytes() == other.nbytes and first is not other


def test_each_thread_has_its_own_pool():
    del_me = _buffers.empty(SHAPE)
    del del_me
    seen = []

    def other_thread():
        seen.append(_buffers.pooled_bytes())
        kept = _buffers.empty(SHAPE)
        seen.append(_buffers.pooled_bytes())
        del kept

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    nbytes = 64 * 512 * 4
    assert seen == [0, nbytes] and _buffers.pooled_bytes() == nbytes


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 300), st.integers(1, 300), st.integers(1, 70), st.booleans(),
       st.booleans(), st.sampled_from([(), (3,), (2, 1)]), st.sampled_from([(), (1,), (2, 3)]))
def test_matmul_into_a_recycled_array_equals_numpy_matmul(n, k, m, transpose_a, transpose_b,
                                                           lead_a, lead_b):
    rng = np.random.default_rng(n * 1000 + k * 10 + m)
    a = rng.standard_normal((*lead_a, k, n) if transpose_a else (*lead_a, n, k),
                            dtype=np.float32)
    b = rng.standard_normal((*lead_b, m, k) if transpose_b else (*lead_b, k, m),
                            dtype=np.float32)
    a = np.swapaxes(a, -1, -2) if transpose_a else a
    b = np.swapaxes(b, -1, -2) if transpose_b else b
    want = np.matmul(a, b)
    min_bytes, _buffers.MIN_BYTES = _buffers.MIN_BYTES, 0  # every size recycled
    try:
        junk = _buffers.empty(want.shape)
        junk[...] = np.nan  # a recycled array holds old values: each must be overwritten
        address = junk.ctypes.data
        del junk
        got = linalg._matmul(a, b)
    finally:
        _buffers.MIN_BYTES = min_bytes
    assert got.ctypes.data == address  # (the recycled array)
    assert got.shape == want.shape and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("monitored", [False, True])
@pytest.mark.parametrize("policy", ["float32", "mixed_float16", "mixed_bfloat16"])
def test_training_steps_are_bit_identical_with_and_without_recycled_arrays(policy, monitored):
    rng = np.random.default_rng(0)
    x = rng.random((128, 32), dtype=np.float32)  # activations of 64 KiB: recycled
    y = rng.integers(0, 10, 128)
    results = []
    for enabled in (True, False):
        _buffers.ENABLED = enabled
        with nn.policy_scope(policy):
            model = nn.Sequential([nn.Dense(128, activation="relu", seed=1, name="d1"),
                                   nn.Dense(128, activation="relu", seed=2, name="d2"),
                                   nn.Dense(10, seed=3, name="d3")])
        loss_fn = nn.losses.SparseCategoricalCrossentropy(from_logits=True)
        losses = []
        with fpsim.monitor() if monitored else contextlib.nullcontext() as m:
            for _ in range(3):
                for v in model.trainable_variables:
                    v.zero_grad()
                loss = loss_fn(y, model(x, training=True))
                loss.backward()
                for v in model.trainable_variables:
                    v.data -= np.float32(0.01) * v.grad.data
                losses.append(loss.item())
        counts = m.counts if monitored else None
        results.append((losses, [v.numpy() for v in model.trainable_variables], counts))
    assert results[0][0] == results[1][0]
    for a, b in zip(results[0][1], results[1][1], strict=True):
        np.testing.assert_array_equal(a, b)
    assert results[0][2] == results[1][2]  # the same events at the same sites
    assert not monitored or policy == "float32" or results[0][2]


def _bench_train():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_train.py"
    spec = importlib.util.spec_from_file_location("bench_train_for_buffers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts glibc's page faults")
def test_a_warm_mixed_float16_mlp_step_touches_almost_no_fresh_pages():
    # before nn._buffers: about 350 faults a step here (its arrays' pages, every step)
    bench_train = _bench_train()
    steps = bench_train.make_steps([64, 256, 256, 10], batch=256)
    counts = bench_train.page_faults({"mixed": steps["nn mixed_float16"]}, repeats=10)
    assert counts is not None and counts["mixed"] < 32


def test_a_matmul_whose_batch_shapes_do_not_broadcast_raises_numpys_error():
    a, b = np.ones((2, 3, 4), np.float32), np.ones((3, 4, 5), np.float32)
    with pytest.raises(ValueError) as want:
        np.matmul(a, b)
    with pytest.raises(ValueError) as got:
        linalg._matmul(a, b)
    assert str(got.value) == str(want.value)
