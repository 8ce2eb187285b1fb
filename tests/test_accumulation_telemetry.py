"""The accumulation telemetry (fpsim.monitor's ``sums``): every sum and product that rounds its
accumulator counts its outputs, additions and swamped terms, checked against a reference
written here with Fractions and fpsim.round_scalar (the pure-Python rounding spec)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import fpsim
from fpsim import accumulators as A
from fpsim.catalog import FP16, FP32

Counts = list[int]  # [additions, swamped]


def rnd(v: Fraction, fmt, mode) -> Fraction:
    return Fraction(fpsim.round_scalar(v, fmt, str(mode)))


def lost(a: Fraction, b: Fraction, r: Fraction) -> int:
    """1 when a + b rounded to r dropped a non-zero operand whole."""
    return int((b != 0 and r == a) or (a != 0 and r == b))


def ref_ieee(terms: list[Fraction], fmt, mode, counts: Counts) -> Fraction:
    if not terms:
        return Fraction(0)
    s = rnd(terms[0], fmt, mode)
    for t in terms[1:]:
        r = rnd(s + t, fmt, mode)
        counts[0] += 1
        counts[1] += lost(s, t, r)
        s = r
    return s


def ref_pairwise(terms: list[Fraction], fmt, counts: Counts) -> Fraction:
    level = [rnd(t, fmt, "nearest_even") for t in terms]
    while len(level) > 1:
        nxt = []
        for a, b in zip(level[::2], level[1::2], strict=False):
            r = rnd(a + b, fmt, "nearest_even")
            counts[0] += 1
            counts[1] += lost(a, b, r)
            nxt.append(r)
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0] if level else Fraction(0)


def ref_aligned(terms: list[Fraction], m: A.AlignedGroups, counts: Counts) -> Fraction:
    s = Fraction(0)
    for g in range(0, len(terms), m.group):
        group = terms[g:g + m.group]
        counts[0] += len(group)
        big = max(abs(t) for t in [s, *group])
        if big == 0:
            s = rnd(Fraction(0), m.fmt, m.mode)
            continue
        e = 0  # 2^(e - 1) <= big < 2^e
        while Fraction(2) ** e <= big:
            e += 1
        while Fraction(2) ** (e - 1) > big:
            e -= 1
        unit = Fraction(2) ** (e - m.bits)

        def trunc(v: Fraction, unit: Fraction = unit) -> Fraction:
            q = abs(v) // unit
            return q * unit if v >= 0 else -q * unit

        counts[1] += sum(t != 0 and trunc(t) == 0 for t in group)
        s = rnd(trunc(s) + sum(trunc(t) for t in group), m.fmt, m.mode)
    return s


def ref_model(terms: list[Fraction], m, counts: Counts) -> Fraction:
    def inner(ts: list[Fraction], model) -> Fraction:
        if isinstance(model, A.IEEE):
            return ref_ieee(ts, model.fmt, model.mode, counts)
        return ref_aligned(ts, model, counts)

    if not isinstance(m, A.Chunked):
        return inner(terms, m)
    total = None
    for c in range(0, len(terms), m.chunk):
        part = inner(terms[c:c + m.chunk], m.inner)
        if total is None:
            total = rnd(part, m.outer, m.outer_mode)
            continue
        r = rnd(total + part, m.outer, m.outer_mode)
        counts[0] += 1
        counts[1] += lost(total, part, r)
        total = r
    return total if total is not None else Fraction(0)


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
            else ref_pairwise(rows[0], FP16, counts))
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
