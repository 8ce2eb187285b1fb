"""docs/hardware.md's table of what each component costs is docs/results/bench_hardware.txt
(benchmarks/bench_hardware.py, 3 runs): every row the range of its ratio over the runs, and
the sentences under it quote the same runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "hardware.md").read_text()
RESULTS = (ROOT / "docs" / "results" / "bench_hardware.txt").read_text()
ROW = re.compile(r"(.+?)\s{2,}[\d.]+  (.+?)\s+[\d.]+\s+([\d.]+)$")


def _runs() -> list[dict[str, tuple[str, float]]]:
    """[one run's {component: (baseline, ratio)}]."""
    runs: list[dict[str, tuple[str, float]]] = []
    for line in RESULTS.splitlines():
        if line.startswith("## run"):
            runs.append({})
        elif runs and (m := ROW.match(line)):
            runs[-1][m.group(1).strip()] = (m.group(2).strip(), float(m.group(3)))
    return runs


def _span(values: list[float], sep: str = "-") -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.2f}" if lo == hi else f"{lo:.2f}{sep}{hi:.2f}"


def test_the_results_file_holds_three_runs_of_the_same_rows():
    runs = _runs()
    assert len(runs) == 3
    assert all(list(r) == list(runs[0]) for r in runs)
    # every accumulator preset but the baseline, and each other component of the page
    from fpsim.accumulate import PRESETS

    names = list(runs[0])
    assert [n for n in names if n.startswith("matmul")] == [
        f"matmul K=4096, accumulate={p!r}" for p in PRESETS if p != "ieee_fp32"]
    for part in ("rng_bits=8", "quantize_blockwise e4m3fn 1x128",
                 "quantize_blockwise e4m3fn 128x128", "random Hadamard transform",
                 "policy 'nvfp4_te'", "policy 'fp8_blockwise'", "stochastic updates",
                 "Kahan updates"):
        assert sum(part in n for n in names) == 1, part


def test_each_table_row_is_the_range_over_the_runs():
    runs = _runs()
    for name, (baseline, _) in runs[0].items():
        row = f"| {name} | {baseline} | {_span([r[name][1] for r in runs])} |"
        assert row in PAGE, row


def test_the_sentences_quote_the_runs():
    runs = _runs()
    text = " ".join(PAGE.split())

    def ratios(part: str) -> list[float]:
        return [r[n][1] for r in runs for n in r if part in n]

    accumulate = ratios("matmul")
    assert (f"about what the IEEE model costs ({_span(accumulate, ' to ')} of its time; "
            "`v100_tensor_core`") in text
    cheapest = min(runs[0], key=lambda n: max(r[n][1] for r in runs) if "matmul" in n else 9e9)
    assert "v100_tensor_core" in cheapest
    assert f"Eight random bits take {_span(ratios('rng_bits'), ' to ')} times" in text
    assert (f"runs in numpy ({_span(ratios('quantize_blockwise'), ' to ')} times a rounding"
            in text)
