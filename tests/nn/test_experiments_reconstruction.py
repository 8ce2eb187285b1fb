"""The reconstruction experiment (nn.experiments.reconstruction) at CI size: bf16's 8 bits
cost a per-pixel reconstruction what fp16's 11 do not.

Oracles: the float32 run of the same model (same weights, same batches); scikit-learn's raw
digit counts for the data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nn import experiments as ex
from nn.experiments import reconstruction as rec

CI = rec.RECONSTRUCTION_DEFAULT  # cheap at full size: 3 runs of a 64-256-64 MLP


@pytest.fixture(scope="module")
def result():
    return ex.bf16_reconstruction(CI)


def test_bf16_reconstructs_worse_than_float32_and_fp16_from_the_same_start(result):
    fp32, fp16, bf16 = (result.run(label).test_loss for label in (rec.FP32, rec.FP16, rec.BF16))
    assert all(math.isfinite(v) for v in (fp32, fp16, bf16))
    assert bf16 > fp32 * 1.02 and bf16 > fp16 * 1.02  # a few percent of the error, not noise
    assert abs(fp16 - fp32) < (bf16 - fp32) / 2  # fp16's 11 bits stay close to float32


def test_the_pixels_are_the_digits_ink_counts_over_16():
    sklearn = pytest.importorskip("sklearn.datasets")
    counts = sklearn.load_digits().data
    x, x_test = rec.digit_pixels(512, 0)
    assert x.shape == (512, 64) and x_test.shape == (359, 64) and x.dtype == np.float32
    values = np.unique(np.concatenate([x.ravel(), x_test.ravel()]))
    np.testing.assert_array_equal(values, np.unique(counts) / 16)


def test_findings_name_the_rms_and_both_gaps(result):
    lines = ex.findings(result)
    assert lines[0].startswith("float32: held-out MSE") and "rms" in lines[0]
    assert any(line.startswith(rec.BF16) for line in lines)
    assert result.extra["positions"] == CI.batch_size * 64
