"""The transformer LM's fast paths (softmax along the last axis, the embedding gradient) give
the numpy composition's results bit for bit, with the same monitor sites and counts.

Each test runs the same work twice: through the kernel path (nn's kernels on) and through the
old composition (the kernel entry points patched out), and compares the float bits.
"""

from __future__ import annotations

import contextlib
import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fpsim
import nn
from nn.engine import kernels as _kernels
from nn.engine import rounding
from nn.functions import activations

# (nn.functions.embedding is also the name of a function, so import the module by its path)
embedding = importlib.import_module("nn.functions.embedding")

POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")
FORMATS = (fpsim.FP32, fpsim.FP16, fpsim.BF16)


def bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


def assert_same_bits(new: np.ndarray, old: np.ndarray) -> None:
    assert new.shape == old.shape and new.dtype == old.dtype
    np.testing.assert_array_equal(bits(new), bits(old))


def old_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """Route softmax, logsumexp (log_softmax, the cross-entropy), the embedding gradient and
    the last-axis sums (Sum, Mean, gradients summed to a broadcast shape) through numpy."""
    monkeypatch.setattr(activations, "_rows", lambda *arrays, axis: None)
    monkeypatch.setattr(embedding, "scatter_add", np.add.at)
    monkeypatch.setattr(_kernels, "sum_last_axis", lambda a: None)


# rows of 1..300 elements: every branch of numpy's pairwise sum (< 8, <= 128, split halves)
shapes = st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 300)).map(
    lambda s: s[: 1 + s[0] % 3] if s[0] > 1 else s[1:])
specials = st.sampled_from([0.0, -0.0, 1e30, -1e30, float("-inf"), float("inf"), float("nan")])


@st.composite
def logits_and_grads(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    shape = draw(shapes)
    scale = draw(st.sampled_from([1e-3, 1.0, 30.0, 1e4]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    if draw(st.booleans()):  # a few special values (the kernels fall back around NaNs)
        flat = x.reshape(-1)
        for _ in range(draw(st.integers(1, 3))):
            flat[draw(st.integers(0, flat.size - 1))] = draw(specials)
    return x, g


def softmax_step(x: np.ndarray, g: np.ndarray, fmt: fpsim.Format, axis: int,
                 monitor: bool, op: str = "softmax") -> tuple[np.ndarray, np.ndarray, dict]:
    """op(x) (softmax or log_softmax) along ``axis`` in ``fmt``, its gradient for the output
    gradient ``g``, and the monitor's counts (empty without a monitor)."""
    t = nn.Tensor(fpsim.round(x, fmt), fmt=fmt, requires_grad=True)
    m = fpsim.monitor() if monitor else None
    with m if m is not None else contextlib.nullcontext(), np.errstate(all="ignore"):
        y = getattr(nn.functions, op)(t, axis=axis)
        y.backward(fpsim.round(g, fmt))
    return y.data, t.grad.data, ({} if m is None else m.counts)


@settings(max_examples=100, deadline=None)
@given(data=logits_and_grads(), fmt=st.sampled_from(FORMATS), last=st.booleans(),
       monitor=st.booleans(), op=st.sampled_from(["softmax", "log_softmax"]))
def test_softmax_kernels_equal_the_numpy_composition_bit_for_bit(data, fmt, last, monitor, op):
    x, g = data
    axis = -1 if last else 0
    with pytest.MonkeyPatch.context() as mp:
        rounding.KERNELS_ENABLED = True
        new = softmax_step(x, g, fmt, axis, monitor, op)
        old_paths(mp)
        old = softmax_step(x, g, fmt, axis, monitor, op)
    assert_same_bits(new[0], old[0])
    assert_same_bits(new[1], old[1])
    assert new[2] == old[2]


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 40), dim=st.integers(1, 20), table=st.integers(1, 6),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**32 - 1),
       huge=st.booleans())
def test_scatter_add_kernel_sums_repeated_indices_exactly_as_np_add_at(rows, dim, table, dtype,
                                                                       seed, huge):
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, table, rows)  # few table rows: many repeats, in no particular order
    scale = np.finfo(dtype).max / 4 if huge else 1.0  # huge: sums overflow to inf, then NaN
    full_new, full_old = np.zeros((table, dim), dtype), np.zeros((table, dim), dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        g = (rng.standard_normal((rows, dim)) * scale).astype(dtype)
        g[rng.random((rows, dim)) < 0.1] = -0.0
        _kernels.scatter_add_rows(full_new, idx, g)
        np.add.at(full_old, idx, g)
    assert_same_bits(full_new, full_old)


def lm_step(policy: str, ids: np.ndarray, monitor: bool) -> tuple[float, list, dict]:
    """One forward and backward of a small causal LM: loss, weight gradients, monitor counts."""
    nn.set_random_seed(0)
    with nn.policy_scope(policy):
        model = nn.Sequential([
            nn.layers.TokenAndPositionEmbedding(11, ids.shape[1] - 1, 8, name="embed"),
            nn.layers.TransformerBlock(8, 2, 16, name="block"),
            nn.Dense(11, name="head"),  # (fixed names: the same sites in both runs)
        ])
    loss_fn = nn.losses.SparseCategoricalCrossentropy(from_logits=True)
    m = fpsim.monitor() if monitor else None
    with m if m is not None else contextlib.nullcontext():
        loss = loss_fn(ids[:, 1:], model(ids[:, :-1], training=True))
        loss.backward()
    grads = [v.grad.data.copy() for v in model.trainable_variables]
    return loss.item(), grads, ({} if m is None else m.counts)


@pytest.mark.parametrize("monitor", [False, True])
@pytest.mark.parametrize("policy", POLICIES)
def test_lm_step_with_the_kernels_equals_the_composition_bit_for_bit(policy, monitor):
    ids = np.random.default_rng(3).integers(0, 11, (3, 10))
    rounding.KERNELS_ENABLED = True
    with pytest.MonkeyPatch.context() as mp:
        new = lm_step(policy, ids, monitor)
        old_paths(mp)
        old = lm_step(policy, ids, monitor)
    assert np.float32(new[0]).tobytes() == np.float32(old[0]).tobytes()
    assert len(new[1]) == len(old[1])
    for a, b in zip(new[1], old[1], strict=True):
        assert_same_bits(a, b)
    assert new[2] == old[2]
    if monitor and policy != "float32":
        assert new[2]  # the monitor saw the step's roundings (fp32 results count nothing)


def test_warmup_compiles_the_transformer_kernels_for_the_types_the_ops_pass():
    from nn.warmup import tasks

    dict(tasks())["nn transformer kernels"]()
    for kernel in (_kernels.shift_by_row_max, _kernels.divide_by_row_sum, _kernels.softmax_grad):
        assert len(kernel.signatures) >= 1
    assert len(_kernels.scatter_add_rows.signatures) >= 1  # float64 (the embedding gradient)
    before = {k: len(k.signatures) for k in (_kernels.shift_by_row_max, _kernels.softmax_grad,
                                              _kernels.scatter_add_rows)}
    t = nn.Tensor(np.zeros((2, 3, 5), np.float32), requires_grad=True)
    nn.functions.softmax(t).backward(np.ones((2, 3, 5), np.float32))
    table = nn.Tensor(np.zeros((4, 3), np.float32), requires_grad=True)
    nn.functions.embedding(table, np.array([[1, 1, 2]])).backward(np.ones((1, 3, 3), np.float32))
    assert {k: len(k.signatures) for k in before} == before  # nothing new to compile


def gelu_composed(a: np.ndarray) -> np.ndarray:
    """GELU's forward as it was written before its in-place form: a * (cdf + 1) * 0.5."""
    cdf = np.empty_like(a, order="C")
    _kernels.erf(np.ascontiguousarray(a).reshape(-1) * a.dtype.type(1 / np.sqrt(2)),
                 cdf.reshape(-1))
    return a * (cdf + 1) * a.dtype.type(0.5)


@settings(max_examples=40, deadline=None)
@given(data=logits_and_grads(), fmt=st.sampled_from((*FORMATS, None)), transposed=st.booleans(),
       monitor=st.booleans())
def test_gelu_forward_in_place_equals_the_composition_bit_for_bit(data, fmt, transposed,
                                                                  monitor):
    x = data[0].T if transposed else data[0]  # (a non-contiguous input too)
    x = x.astype(np.float64) if fmt is None else fpsim.round(x, fmt)
    t = nn.Tensor(x, fmt=fmt)
    results = []
    for new in (True, False):
        m = fpsim.monitor() if monitor else None
        with m if m is not None else contextlib.nullcontext(), np.errstate(all="ignore"):
            if new:
                y = nn.functions.gelu(t).data
            else:
                y = rounding.round_array(gelu_composed(x), fmt, site="GELU")  # the op's site
        results.append((y, {} if m is None else m.counts))
    assert_same_bits(results[0][0], results[1][0])
    assert results[0][1] == results[1][1]


@settings(max_examples=60, deadline=None)
@given(data=logits_and_grads(), keepdims=st.booleans(), empty=st.booleans())
def test_last_axis_sum_and_mean_equal_numpy_bit_for_bit(data, keepdims, empty):
    x = data[0][:0] if empty and data[0].ndim > 1 else data[0]
    axes = (x.ndim - 1,)
    rounding.KERNELS_ENABLED = True
    with np.errstate(all="ignore"):
        for reduce, numpy_reduce in ((nn.functions.sum, np.sum), (nn.functions.mean, np.mean)):
            got = reduce(nn.Tensor(x), axis=-1, keepdims=keepdims).data
            if x.size:
                want = np.asarray(numpy_reduce(x, axis=axes, keepdims=keepdims))
                assert_same_bits(got, want)
        g = np.ascontiguousarray(np.broadcast_to(x, (2, *x.shape)))
        kept = (2, *x.shape[:-1], 1)
        got = rounding.sum_to_shape(g, kept)
        rounding.KERNELS_ENABLED = False  # numpy's sum
        assert_same_bits(got, rounding.sum_to_shape(g, kept))
