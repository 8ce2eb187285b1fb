"""docs/experiments.md and the committed results (docs/results/).

Oracles: the results files themselves (every number on the page is one of theirs, rounded as
printed), the page regenerated from them, and one experiment re-run at CI size."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from nn.experiments import EXPERIMENTS, LMConfig, intervals, report, seeds

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / report.RESULTS
WHATIF = ROOT / report.WHATIF
WHATIF_CNN = ROOT / report.WHATIF_CNN
PAGE = ROOT / report.PAGE


def _numbers(node, found):
    if isinstance(node, dict):
        for v in node.values():
            _numbers(v, found)
    elif isinstance(node, list):
        for v in node:
            _numbers(v, found)
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        found.append(float(node))
    elif isinstance(node, str):  # the command, the configuration: numbers quoted in words
        found += [float(t) for t in re.findall(r"\d+(?:\.\d+)?(?:e-?\d+)?", node)]
    return found


def test_the_page_is_the_one_the_results_files_generate():
    assert PAGE.read_text() == report.render(*report.load(RESULTS, WHATIF, WHATIF_CNN))


def test_every_number_quoted_on_the_page_is_a_number_of_the_results_files():
    known = _numbers(json.loads(RESULTS.read_text()), [])
    for whatif in (WHATIF, WHATIF_CNN):
        if whatif.exists():
            known = _numbers(json.loads(whatif.read_text()), known)
    text = PAGE.read_text()
    # signed unless in a word; small gaps in 3 significant digits (1.65e-05)
    tokens = re.findall(r"(?<![\w.])[+-]?\d+\.\d+(?:e[+-]\d+)?%?", text)
    assert tokens  # the page quotes numbers
    for token in tokens:
        percent = token.endswith("%")
        mantissa, _, exponent = token.rstrip("%").partition("e")
        value = float(token.rstrip("%")) / (100 if percent else 1)
        decimals = len(mantissa.split(".")[1]) + (2 if percent else 0) - int(exponent or 0)
        tolerance = 0.5 * 10.0 ** -decimals + 1e-12
        assert any(abs(value - k) <= tolerance for k in known), token


def test_the_results_file_has_one_object_per_experiment_with_every_claim_verdicted():
    results = json.loads(RESULTS.read_text())
    assert isinstance(results, list) and results
    for r in results:
        entry = EXPERIMENTS[r["experiment"]]
        assert len(r["seeds"]) >= 5 and r["command"].startswith("fpsim compare --all --seeds 5")
        assert r["date"] and r["machine"]["cpu_count"] >= 1 and r["blas_threads"] is not None
        assert [c["name"] for c in r["claims"]] == [c.name for c in entry.claims]
        for c in r["claims"]:
            assert c["verdict"] in ("shown", "not shown at this size")
            if c["gap_ci95"] is not None:  # the interval is the t interval of the gaps
                mean, lo, hi = intervals.mean_interval(c["gaps"])
                assert c["gap_mean"] == pytest.approx(mean, abs=2e-6)
                assert c["gap_ci95"] == pytest.approx([lo, hi], abs=2e-6)
                assert (c["verdict"] == "shown") == (c["gap_ci95"][0] > 0)
        for v in r["variants"]:  # a gap is a difference of the per-seed losses it pairs
            losses = [s["test_loss"][v["label"]] for s in r["per_seed"]]
            assert v["test_loss"] == losses
        for c in r["claims"]:
            for s, gap in zip(r["per_seed"], c["gaps"], strict=True):
                a, b = s["test_loss"][c["variant"]], s["test_loss"][c["reference"]]
                if a is not None and b is not None:
                    assert gap == pytest.approx(a - b, abs=2e-6)
                else:
                    assert gap is None or not math.isfinite(gap)


def test_adam_state_rerun_at_ci_size_gives_the_committed_verdict():
    committed = {r["experiment"]: r for r in json.loads(RESULTS.read_text())}["adam-state"]
    tiny = LMConfig(sequence_length=16, batch_size=8, embed_dim=8, ff_dim=16, steps=3)
    found = seeds.run_seeds("adam-state", range(5), config=tiny, processes=1)
    assert [c.verdict.verdict for c in found.claims()] == [
        c["verdict"] for c in committed["claims"]]
