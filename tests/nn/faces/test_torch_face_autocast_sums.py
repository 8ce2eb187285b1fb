"""Sums and means in bfloat16 under ``autocast("cpu")``, the face against torch 2.13 CPU.

Both add the bf16 values in fp32 and round once to bf16 (a mean divides the fp32 sum first);
the fp32 orders differ (torch's cascaded partial sums follow the CPU's vector width, nn's are
numpy's pairwise), so a result may differ by one bf16 ulp where the two fp32 sums straddle a
rounding boundary. Run as a script, this file prints the measurement quoted in
docs/from-pytorch.md."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import nn.faces.torch as face

torch = pytest.importorskip("torch")


def rows(rng: np.random.Generator, n_rows: int, n: int, wide: bool) -> Any:
    x = rng.normal(size=(n_rows, n))
    if wide:  # magnitudes spread over 2**+-12: the fp32 sums lose bits
        x = x * 2.0 ** rng.uniform(-12, 12, size=x.shape)
    return torch.tensor(x.astype(np.float32)).bfloat16()


def reduce_both(x: Any, op: str, dim: int = 1) -> tuple[np.ndarray, np.ndarray]:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        theirs = getattr(x, op)(dim=dim)
    assert theirs.dtype == torch.bfloat16
    mine_in = face.tensor(x.float().numpy(), dtype=face.bfloat16)
    with face.autocast("cpu", dtype=face.bfloat16):
        mine = getattr(mine_in, op)(dim=dim)
    assert mine.dtype == face.bfloat16
    return np.asarray(mine.data, np.float32), theirs.float().numpy()


def bf16_ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in bf16 steps of values of one sign (bf16 values in fp32 carriers)."""
    return np.abs((a.view(np.int32) >> 16).astype(np.int64)
                  - (b.view(np.int32) >> 16).astype(np.int64))


@pytest.mark.parametrize("op", ["sum", "mean"])
def test_bf16_sum_and_mean_equal_torchs_on_normal_rows(op):
    mine, theirs = reduce_both(rows(np.random.default_rng(0), 20000, 64, wide=False), op)
    np.testing.assert_array_equal(mine, theirs)


@pytest.mark.parametrize("op", ["sum", "mean"])
def test_bf16_sum_and_mean_differ_from_torchs_in_rare_rows_both_within_fp32s_error_bound(op):
    """Where they differ, both are an fp32 sum's error away from the exact value (float64, the
    oracle): at most (n - 1) * 2**-24 * sum|x| (/ n for the mean) before the bf16 rounding,
    half a bf16 ulp (2**-9 relative) after it."""
    x = rows(np.random.default_rng(1), 20000, 64, wide=True)
    mine, theirs = reduce_both(x, op)
    assert (mine != theirs).mean() < 1e-3
    values = x.double().numpy()
    scale = 64 if op == "mean" else 1
    exact = values.sum(axis=1) / scale
    bound = 63 * 2.0 ** -24 * np.abs(values).sum(axis=1) / scale
    for got in (mine, theirs):
        assert np.all(np.abs(got - exact) <= bound * (1 + 2.0 ** -8) + np.abs(exact) * 2.0 ** -8)


if __name__ == "__main__":  # the measurement of docs/from-pytorch.md
    rng = np.random.default_rng(2)
    for op in ("sum", "mean"):
        mine, theirs = reduce_both(rows(rng, 200000, 64, wide=True), op)
        d = bf16_ulps(mine, theirs)
        print(f"wide {op}: {int((d > 0).sum())} of {d.size} rows differ, at most "
              f"{int(d.max())} bf16 ulp")
    x = rows(rng, 200000, 64, wide=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        bf16_input = x.sum(dim=1)
    fp32_input = x.float().sum(dim=1).bfloat16()
    print(f"torch: bf16-input sum != its fp32-input sum rounded in "
          f"{int((bf16_input != fp32_input).sum())} of 200000 rows")
    total = differ = 0
    for n, n_rows in [(8, 400000), (64, 100000), (1024, 5000), (100000, 40)]:
        x = rows(rng, n_rows, n, wide=False)
        for op in ("sum", "mean"):
            mine, theirs = reduce_both(x, op)
            total, differ = total + n_rows, differ + int((mine != theirs).sum())
    print(f"N(0, 1): {differ} of {total} row results differ (rows of 8 to 100000 values)")
