"""fp8 recipe state in checkpoints: resumed training under every kind of recipe is bit-identical
to an uninterrupted run; bad recipe fields are refused naming them; old files still load."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from resume import assert_resume_is_bit_identical
from test_checkpoint import _rewrite

import nn
from nn.fp8 import DelayedScaling

RNG = np.random.default_rng(11)
X = RNG.normal(size=(64, 12)).astype(np.float32)
Y = RNG.integers(0, 4, size=64)
CE = nn.losses.SparseCategoricalCrossentropy


def _model(policy: str | None, seed: int = 0) -> nn.Sequential:
    nn.set_random_seed(seed)
    model = nn.Sequential([nn.Dense(16, activation="relu", dtype=policy),
                           nn.Dense(4, dtype=policy)])
    model.compile(nn.Adam(1e-2), CE(from_logits=True))
    return model


def _states(model: nn.Sequential) -> list[object]:
    """Every recipe's state, tensor names left out (the two models' layers differ in name)."""
    return [(list(r.state_dict()["states"].values()), list(r.state_dict()["steps"].values()))
            for r in nn.fp8.recipes_of(model)]


@pytest.mark.parametrize("policy", ["fp8_hybrid_delayed", "fp8_e4m3_current", "mxfp8",
                                    "nvfp4"])
def test_resume_under_a_recipe_policy_is_bit_identical(tmp_path, policy):
    resumed = assert_resume_is_bit_identical(lambda: _model(policy), X, Y, tmp_path / "ck.npz",
                                             batch_size=16, seed=2)
    straight = _model(policy)
    straight.fit(X, Y, batch_size=16, epochs=3, seed=2, verbose=0)
    assert json.dumps(_states(resumed)) == json.dumps(_states(straight))
