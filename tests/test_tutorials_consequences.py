"""The training notebooks' Consequences sections (tutorials/consequences.py): each sentence is
written from the results file and its check fails when a sentence and the file disagree.

The oracle for a verdict is the rule itself, re-derived from the interval in the test: shown
when the 95% interval lies above 0 or the variant diverged from every seed."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import pathlib
import sys

import pytest

TUTORIALS = pathlib.Path(__file__).resolve().parent.parent / "tutorials"
sys.path.insert(0, str(TUTORIALS))
import consequences  # noqa: E402

ROOT = TUTORIALS.parent
TECHNIQUES = sorted({r["technique"] for r in json.loads(
    (ROOT / consequences.RESULTS_FILE).read_text())})


def _experiment(name: str, technique: str, gaps: list[float | None], lo: float | None,
                hi: float | None, verdict: str, diverged: int = 0) -> dict:
    finite = [g for g in gaps if g is not None]
    mean = None if len(finite) < len(gaps) else math.fsum(finite) / len(finite)
    return {
        "experiment": name, "title": f"{name} (a test)", "technique": technique,
        "seeds": list(range(len(gaps))), "steps": 10,
        "claims": [{"name": "v > r", "claim": "v ends higher than r", "variant": "v",
                    "reference": "r", "verdict": verdict, "gap_mean": mean,
                    "gap_ci95": None if lo is None else [lo, hi], "diverged_seeds": diverged,
                    "reason": "a reason", "gaps": gaps}],
    }


@pytest.fixture
def results_tree(tmp_path: pathlib.Path) -> pathlib.Path:
    results = [
        _experiment("a", "loss scaling", [0.1, -0.1, 0.03], -0.2, 0.22,
                    "not shown at this size"),
        _experiment("b", "fp32 master weights", [0.05, 0.06, 0.04], 0.03, 0.07, "shown"),
        _experiment("c", "fp32 optimizer state", [None, None, None], None, None, "shown", 3),
    ]
    whatif = {"config": "a tiny LM", "steps": [0, 5], "alternatives": {
        "unscaled fp16": {"cosine": 0.99, "flushed_norm": 1e-4, "update_error": 0.03,
                          "swamped": 0.0, "per_layer_last_step": {
                              "dense": {"update_error": 0.01},
                              "attention": {"update_error": 0.05}}}}}
    folder = tmp_path / "docs" / "results"
    folder.mkdir(parents=True)
    (folder / "experiments.json").write_text(json.dumps(results))
    (folder / "whatif.json").write_text(json.dumps(whatif))
    (tmp_path / "tutorials").mkdir()
    return tmp_path


def test_every_technique_in_the_committed_results_passes_its_own_check() -> None:
    for t in consequences.for_techniques(TECHNIQUES, root=ROOT / "tutorials"):
        consequences.check(t)


def test_a_claim_not_shown_carries_the_replay_numbers_its_worst_layer_and_the_reference(
        results_tree: pathlib.Path) -> None:
    (t,) = consequences.for_techniques(["loss scaling"], root=results_tree / "tutorials")
    consequences.check(t)
    text = consequences.markdown([t])
    assert "**loss scaling**: 0 of 1 claim(s) shown." in text
    assert "+0.0100, 95% interval [-0.2000, +0.2200]: **not shown at this size**" in text
    assert "3 seeds (0, 1, 2)" in text
    assert "cosine of 0.990000" in text and "0.0100% of the gradient norm" in text
    assert "the layer it moves most at the last step is attention (5.00%)" in text
    assert "Micikevicius et al. 2018" in text  # the published case, where ours does not show it


def test_a_shown_claim_and_a_divergence_carry_no_replay(results_tree: pathlib.Path) -> None:
    found = consequences.for_techniques(["fp32 master weights", "fp32 optimizer state"],
                                        root=results_tree)
    for t in found:
        consequences.check(t)
        assert "Not shown at this size" not in consequences.markdown([t])
    assert "3 diverged seed(s)" in found[1].claims[0].text


@pytest.mark.parametrize("tamper", [
    lambda c: c.update(verdict="shown"),                 # the interval reaches 0
    lambda c: c.update(gap_mean=c["gap_mean"] + 0.01),   # not the mean of the seeds' gaps
    lambda c: c.update(gaps=c["gaps"][:2]),              # a seed without its gap
])
def test_check_fails_when_the_verdict_or_the_numbers_disagree_with_the_file(
        results_tree: pathlib.Path, tamper) -> None:
    (t,) = consequences.for_techniques(["loss scaling"], root=results_tree)
    claim = t.claims[0]
    bad = copy.deepcopy(claim.claim)
    tamper(bad)
    forged = dataclasses.replace(t, claims=[dataclasses.replace(claim, claim=bad)])
    with pytest.raises(AssertionError):
        consequences.check(forged)


def test_a_technique_with_no_experiment_is_refused_by_name(results_tree: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="'fp8 magic'.*it holds"):
        consequences.for_techniques(["fp8 magic"], root=results_tree)


def test_the_results_are_found_from_the_tutorials_folder_or_refused(tmp_path) -> None:
    assert consequences.repository_root(ROOT / "tutorials" / "exercises") == ROOT
    with pytest.raises(FileNotFoundError, match="docs/results/experiments.json"):
        consequences.repository_root(tmp_path)
