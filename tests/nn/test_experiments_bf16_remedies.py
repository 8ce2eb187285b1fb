"""The bf16-remedies experiment at CI size: pure bf16 weights lose Adam's small updates, and
stochastic rounding or Kahan summation of the updates (nn.optimizers.remedies) recovers the
fp32-master run's held-out loss. Oracle: the fp32-master run of the same weights and batches."""

from __future__ import annotations

import math

import pytest

from nn import experiments as ex
from nn.experiments import bf16_remedies as remedies

CI = remedies.REMEDIES_DEFAULT.with_(sequence_length=32, batch_size=16, embed_dim=16, ff_dim=32,
                                     steps=12)


@pytest.fixture(scope="module")
def result():
    return remedies.bf16_remedies(CI)


def test_pure_bf16_weights_leave_far_more_updates_unapplied_than_fp32_masters(result):
    shares = result.extra["swamped_share"]
    assert shares[remedies.PURE] > 0.3 and shares[remedies.MASTERS] < 0.01


def test_stochastic_rounding_and_kahan_close_most_of_pure_bf16_s_loss_gap(result):
    pure_gap = result.gap(remedies.PURE, remedies.MASTERS)
    assert pure_gap > 0.005  # the loss the remedies are for
    for label in (remedies.STOCHASTIC, remedies.KAHAN):
        run = result.run(label)
        assert math.isfinite(run.test_loss)
        assert abs(result.gap(label, remedies.MASTERS)) < pure_gap / 4, label


def test_the_experiment_is_in_the_table_with_its_claims_and_findings(result):
    entry = ex.EXPERIMENTS["bf16-remedies"]
    assert entry.run is remedies.bf16_remedies and entry.config.learning_rate == 1e-4
    assert {(c.variant, c.reference) for c in entry.claims} == {
        (remedies.PURE, remedies.MASTERS), (remedies.PURE, remedies.STOCHASTIC),
        (remedies.PURE, remedies.KAHAN)}
    lines = ex.findings(result)
    assert len(lines) == 7 and any("Kahan: held-out loss" in line for line in lines)
