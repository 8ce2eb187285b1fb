"""docs/torch.md quotes its training results from committed results files: each claim's gap
and 95% interval, as the table prints them, appears on the page, and so do the CUDA check's
counts and ratios from docs/results/cuda_check_h200.txt."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = " ".join((ROOT / "docs" / "torch.md").read_text().split())  # lines wrap anywhere
RESULTS = ROOT / "docs" / "results"


def _claim_text(claim: dict) -> str:
    lo, hi = claim["gap_ci95"]
    return f"{claim['gap_mean']:+.4f}, 95% interval [{lo:+.4f}, {hi:+.4f}]"


@pytest.mark.parametrize("name", ["torch_master_weights.json",
                                  "torch_master_weights_10_seeds.json",
                                  "torch_cuda_master_weights_lm.json",
                                  "torch_accumulation.json"])
def test_each_quoted_results_file_has_its_claims_on_the_page(name):
    assert f"docs/results/{name}" in PAGE
    entries = json.loads((RESULTS / name).read_text())
    for entry in entries if isinstance(entries, list) else [entries]:
        for claim in entry["claims"]:
            text = _claim_text(claim)
            # the table prints "gap +x, 95% interval [...]"; prose may say "gap of +x nats"
            prose = text.replace(", 95%", " nats, 95%")
            assert text in PAGE or prose in PAGE, f"{name}: {text} is not on docs/torch.md"
            verdict = "SHOWN" if claim["verdict"] == "shown" else "NOT SHOWN"
            assert verdict in PAGE


def test_the_cuda_check_numbers_on_the_page_are_the_records():
    record = (RESULTS / "cuda_check_h200.txt").read_text()
    passed = re.search(r"(\d+) failed, (\d+) passed", record.split("## benchmarks")[0])
    assert passed is not None
    failed, ok = int(passed[1]), int(passed[2])
    assert f"{ok} of the {ok + failed} tests" in PAGE
    for kind, line in (("roundings", r"round: (\d+) comparisons, (\d+) differ"),
                       ("block quantizations", r"mx: (\d+) comparisons, (\d+) differ")):
        m = re.search(line, record)
        assert m is not None and f"{m[2]} of {m[1]} {kind}" in PAGE
    ratios = dict(re.findall(r"^(\S+)\s+nearest_even\s+\S+ ms\s+ratio\s+(\S+)", record, re.M))
    assert f"fp16 and bf16 nearest-even at {ratios['float16']}x" in PAGE
    assert ratios["float16"] == ratios["bfloat16"]
    assert f"e4m3fn at {ratios['float8_e4m3fn']}x" in PAGE
    steps = dict(re.findall(r"^(char LM|CNN)\s+\S+\s+\S+\s+(\S+)$", record, re.M))
    assert f"took {steps['char LM']}x the plain float32 step, the CNN {steps['CNN']}x" in PAGE


def test_the_accumulation_findings_on_the_page_are_the_results_files():
    entry = json.loads((RESULTS / "torch_accumulation.json").read_text())
    for line in entry["findings_first_seed"][:2]:  # the kernel-gradient sums, both batches
        assert " ".join(line.split()) in PAGE
    assert f"{entry['wall_time']:.0f} s for the seeds" in PAGE


def test_the_gpu_runs_findings_and_time_on_the_page_are_the_results_files():
    entry = json.loads((RESULTS / "torch_cuda_master_weights_lm.json").read_text())
    swamped = [line for line in entry["findings_first_seed"] if "no master" in line]
    assert swamped and " ".join(swamped[0].split()) in PAGE
    assert f"({entry['wall_time']:.0f} s for the five seeds)" in PAGE
    assert entry["gpu"] in PAGE and entry["device"] == "cuda" and entry["scale"] == 8
