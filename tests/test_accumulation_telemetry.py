"""The accumulation telemetry (fpsim.monitor's ``sums``): every sum and product that rounds its
accumulator counts its outputs, additions and swamped terms, checked against the exact
reference of tests/accumulator_reference.py, which counts the same events."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from accumulator_reference import ref_ieee, ref_model, ref_pairwise

import fpsim
from fpsim import accumulators as A
from fpsim.catalog import FP16, FP32

MODELS = {**A.PRESETS,
          "aligned k3 w5": A.AlignedGroups(3, 5, FP32, "up"),
          "chunk5 of fp16 into fp32": A.Chunked(A.IEEE(FP16), 5, FP32, "down")}


def terms(seed: int, rows: int, k: int) -> np.ndarray:
    """fp16 values over many binades: plenty of swamped additions in narrow accumulators."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, k)) * 2.0 ** rng.integers(-12, 6, (rows, k))
    x[0, 0] = 4096.0  # a large first term: the rest of the row is swamped in fp16
    x[1, 5:9] = 0.0  # zero terms are never swamped
    return np.asarray(fpsim.round(x, "fp16"), np.float64)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_sum_through_a_model_counts_its_additions_and_swamped_terms(name):
    model = MODELS[name]
    x = terms(0, 5, 70)
    counts = [0, 0]
    want = [ref_model([Fraction(float(t)) for t in row], model, counts) for row in x]
    with fpsim.monitor() as m:
        got = fpsim.sum(fpsim.array(x, "fp16"), axis=1, accumulate=model, fmt="float32")
    assert [Fraction(float(v)) for v in got.numpy()] == want
    assert m.sums["sum"] == {"sums": 5, "additions": counts[0], "swamped": counts[1]}
    # named by the first preset with this model (te_fp8_dgrad is hopper_fp8_promote128's model)
    label = m.accumulators["sum"]
    assert (A.PRESETS[label] == model) if name in A.PRESETS else label == type(model).__name__
    assert counts[1] > 0 or name == "v100_tensor_core"  # the data swamps narrow sums


@pytest.mark.parametrize("order", ["sequential", "pairwise"])
def test_an_ieee_sum_counts_swamped_terms_in_either_order(order):
    x = terms(1, 3, 33)
    counts = [0, 0]
    rows = [Fraction(float(t)) for t in x.reshape(-1)], []
    want = (ref_ieee(rows[0], FP16, "nearest_even", counts) if order == "sequential"
            else ref_pairwise(rows[0], FP16, "nearest_even", counts))
    with fpsim.monitor() as m:
        got = fpsim.sum(fpsim.array(x, "fp16"), accumulate="fp16", order=order)
    assert Fraction(float(got.item())) == want
    assert m.sums["sum"] == {"sums": 1, "additions": x.size - 1, "swamped": counts[1]}
    assert counts[1] > 0


def test_a_product_counts_every_output_its_additions_and_swamped_terms():
    rng = np.random.default_rng(3)
    a = fpsim.array(rng.standard_normal((3, 40)) * 2.0 ** rng.integers(-8, 8, (3, 40)), "e4m3fn")
    b = fpsim.array(rng.standard_normal((40, 2)), "e4m3fn")
    model = A.PRESETS["hopper_fp8_fast"]
    counts = [0, 0]
    an, bn = a.numpy().astype(np.float64), b.numpy().astype(np.float64)
    for i in range(3):
        for j in range(2):
            ref_model([Fraction(float(an[i, t])) * Fraction(float(bn[t, j])) for t in range(40)],
                      model, counts)
    with fpsim.monitor() as m:
        fpsim.matmul(a, b, accumulate="hopper_fp8_fast")
    assert m.sums["matmul"] == {"sums": 6, "additions": counts[0], "swamped": counts[1]}


def test_one_large_term_swamps_every_small_one_in_bf16_and_the_summary_says_so():
    x = fpsim.array(np.r_[1.0, np.full(999, 1e-3)], "bf16")  # 1e-3 < half of bf16's ulp at 1
    with fpsim.monitor() as m:
        assert fpsim.sum(x, accumulate="bf16").item() == 1.0
    assert m.sums["sum"] == {"sums": 1, "additions": 999, "swamped": 999}
    assert "sum (bfloat16): 1 sums, 999 additions; swamped 999 (100.00%)" in m.summary()
    m.reset()
    assert m.sums == {} and m.accumulators == {}


def test_nothing_is_counted_without_a_monitor_or_in_blas_order():
    a = fpsim.array(np.ones((2, 3)), "bf16")
    with fpsim.monitor() as m:
        fpsim.matmul(a, a.T)  # exact float32 products into fp32: numpy's BLAS
    assert m.sums == {}
    outside = fpsim.monitor()
    fpsim.sum(a, accumulate="bf16")
    assert outside.sums == {}
