"""The training story of ``fpsim compare``, as tests, on the real digits data.

Setting (nn.experiments): MLP 64-64-64-10, loss x 2**-18 with the SGD learning rate x 2**18, so the
float32 run is plain SGD while every gradient sits 18 binades lower, where fp16 flushes it.
Oracles: the float32 run itself (accuracy, and bit-equality with the unweighted loss), a
replay of the documented loss-scale rule, and the optimizer's swamping counter.
"""

from __future__ import annotations

import numpy as np
import pytest

import nn
from nn import experiments as story

EPOCHS = 12  # enough steps (276) for the dynamic scale to climb into overflow and back off


# one worker runs this module, so its module fixture is set up once
# (the runs fixture trains the story's models)
pytestmark = pytest.mark.xdist_group("training_story")


@pytest.fixture(scope="module")
def runs():
    results = story.run_compare(epochs=EPOCHS)
    return {r.label: r for r in results}


def test_float32_mixed_dynamic_and_mixed_bfloat16_reach_accuracy_within_3_points(runs):
    accs = [runs[k].test_accuracy for k in ("float32", "mixed_float16 + dynamic",
                                             "mixed_bfloat16")]
    assert min(accs) >= 0.9
    assert max(accs) - min(accs) <= 0.03


def test_unscaled_mixed_float16_loses_a_large_share_of_activation_gradients(runs):
    unscaled = runs["mixed_float16, no scaling"]
    assert unscaled.activation_underflow >= 0.2
    assert runs["mixed_float16 + dynamic"].activation_underflow <= 0.02


def test_unscaled_mixed_float16_ends_clearly_worse(runs):
    assert runs["mixed_float16, no scaling"].test_accuracy <= runs["float32"].test_accuracy - 0.1


def test_the_true_gradients_lie_mostly_below_fp16s_range(runs):
    # the float32 run's activation gradients, counted by exponent: most lie below 2**-25,
    # where fp16 rounds them to zero (the reason the unscaled run fails)
    h = runs["float32"].history
    below = h.exponent_counts["activation"][h.exponent_edges[:-1] < -25].sum()
    assert below / h.exponent_counts["activation"].sum() > 0.9


def test_pure_float16_swamps_far_more_updates_than_mixed_precision(runs):
    pure = runs["float16 (no master)"].swamped_updates
    mixed = runs["mixed_float16 + dynamic"].swamped_updates
    assert pure > 0
    assert pure >= 5 * mixed


def test_bfloat16_needs_no_loss_scaling_and_nothing_underflows(runs):
    r = runs["mixed_bfloat16"]
    assert r.final_loss_scale is None and r.activation_underflow == 0.0


def test_the_dynamic_scale_follows_the_documented_rule_step_by_step(runs):
    h = runs["mixed_float16 + dynamic"].history
    scale, counter = 2.0**15, 0
    for used, skipped in zip(h.step_loss_scale, h.step_skipped, strict=True):
        assert used == scale
        if skipped:
            scale, counter = max(scale / 2, 1.0), 0
        else:
            counter += 1
            if counter == story.GROWTH_STEPS:
                scale, counter = scale * 2, 0
    assert 0 < h.skipped_steps < len(h.step_skipped) // 10


def test_the_loss_weight_changes_nothing_in_float32():
    # weight 2**-18 and learning rate x 2**18 are exact: bit-identical to plain SGD
    (x, y), _ = nn.datasets.load_digits()
    weighted = story.story_model("float32", "none")
    weighted.fit(x, y, batch_size=64, epochs=1, seed=0, verbose=0)
    plain = story.build_mlp("float32")
    plain.compile(nn.SGD(story.LEARNING_RATE, momentum=story.MOMENTUM),
                  nn.losses.SparseCategoricalCrossentropy(from_logits=True))
    plain.fit(x, y, batch_size=64, epochs=1, seed=0, verbose=0)
    for a, b in zip(weighted.get_weights(), plain.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_each_run_summary_holds_the_plain_numbers_of_its_row(runs):
    for label, r in runs.items():
        s = r.summary()
        assert s["label"] == label and "history" not in s
        assert s["test_accuracy"] == r.test_accuracy and isinstance(s["test_accuracy"], float)
        assert s["skipped_steps"] == r.history.skipped_steps
        assert s["swamped_updates"] == sum(r.history.swamped_updates)
        assert s["activation_underflow"] == r.history.gradient_share("underflow")
