"""Every RoundingMode has its rule in every table that dispatches on modes (one home per rule).

A mode added to the enum without a spec rule (fpsim.rounding.MODE_RULES), an explanation
(fpsim.explain's decision sentences) or a table-oracle rule (tests/oracle.py) fails here.
The oracle is checked by running it: for each mode it must agree with round_scalar.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import same_values as same
from oracle import RULES, sample_points, table_round

import fpsim
from fpsim import RoundingMode, _kernels
from fpsim.explain import OUTCOME_TEXT, SPECIAL_TEXT, WHY_TEXT, explanation
from fpsim.rounding import MODE_RULES, Outcome, Why, mode_rule, trace

# inexact values of both signs: a tie, below and above half an ulp in fp16
INEXACT = [1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-12, 1 + 3 * 2**-12, 1e-5, 0.1]


@pytest.mark.parametrize("mode", list(RoundingMode), ids=str)
def test_every_rounding_mode_has_a_kernel_spec_explanation_and_oracle(mode):
    # the spec: a rule with its one-line math, deciding every inexact value of both signs
    rule = MODE_RULES[mode]
    assert rule.math and mode_rule(mode) is rule
    for x in INEXACT + [-v for v in INEXACT]:
        t = trace(x, "fp16", mode, u=0.5)
        assert t.why is not None and t.why is not Why.EXACT and t.pick in (t.k, t.k + 1)
    # the explanation: the rule line and a decision sentence for it
    for x in (INEXACT[0], -INEXACT[4]):
        lines = explanation(x, "fp16", mode).lines
        assert f"rule:       {mode.value}: {rule.math}" in lines
        assert sum(line.startswith("decision:   ") for line in lines) == 1
    # the table oracle: handles the mode and agrees with the spec (same draws when stochastic)
    assert mode in RULES
    fmt = fpsim.E4M3FN
    x = sample_points(fmt, np.float64)
    u = np.random.default_rng(3).random(x.size)
    want = [fpsim.round_scalar(v, fmt, mode, u=d) for v, d in zip(x, u, strict=True)]
    got = table_round(x, fmt, mode, u=u)
    assert same(got, want).all(), x[~same(got, want)][:5]
    # the kernel: an entry in its table, and fpsim.round agrees with the spec (stochastic: one
    # of the two results the spec gives for the lowest and the highest draw)
    assert mode in _kernels.MODE_KERNELS
    got = fpsim.round(x, fmt, mode, rng=5)
    low = [fpsim.round_scalar(v, fmt, mode, u=0.0) for v in x]
    high = [fpsim.round_scalar(v, fmt, mode, u=1 - 2**-53) for v in x]
    assert (same(got, low) | same(got, high)).all(), x[~(same(got, low) | same(got, high))][:5]


def test_mode_tables_have_no_entry_for_a_mode_that_does_not_exist():
    assert set(MODE_RULES) == set(RoundingMode) == set(RULES) == set(_kernels.MODE_KERNELS)


def test_every_decision_reason_and_outcome_has_an_explanation_sentence():
    assert set(WHY_TEXT) == set(Why)
    assert set(OUTCOME_TEXT) | set(SPECIAL_TEXT) == set(Outcome)
    assert not set(OUTCOME_TEXT) & set(SPECIAL_TEXT)


def test_a_mode_without_a_rule_is_an_error_not_a_default():
    with pytest.raises(NotImplementedError, match="has no rule in MODE_RULES"):
        mode_rule("sideways")  # type: ignore[arg-type]


def test_stochastic_needs_a_draw_in_the_unit_interval():
    for bad in (None, -0.1, 1.0):
        with pytest.raises(ValueError, match="stochastic rounding needs a uniform draw u"):
            fpsim.round_scalar(0.1, "fp16", "stochastic", u=bad)
    assert fpsim.round_scalar(0.5, "fp16", "stochastic") == 0.5  # exact: no draw needed
