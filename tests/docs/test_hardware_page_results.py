"""docs/hardware.md's MX speed tables are docs/results/bench_mx.txt: each cell is the range, over
the file's runs, of one path's ratio before and after, on fpsim's default thread count and on
one thread (as benchmarks/bench_mx.py prints them); the prose's claims (every default-thread
cell at the bar, the one-thread paths still below it with their ranges, the two reference
costs each run ends with) come from the same runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "hardware.md").read_text()
RESULTS = (ROOT / "docs" / "results" / "bench_mx.txt").read_text()
COLUMNS = ("nearest", "stochastic", "encode", "decode", "peak")
FORMATS = ["mxfp4_e2m1", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp8_e4m3", "mxfp8_e5m2", "mxint8",
           "nvfp4"]
Run = dict[str, list[float]]


def _runs() -> dict[str, list[Run]]:
    """{side: [one run's {format: its five numbers}]}, the sides "before" and "after" on one
    thread and "before default"/"after default" on fpsim's default thread count."""
    runs: dict[str, list[Run]] = {"before": [], "after": [], "before default": [],
                                  "after default": []}
    current: list[Run] | None = None
    for line in RESULTS.splitlines():
        if m := re.match(r"## (before|after)( on fpsim's default threads)?, run \d+$", line):
            current = runs[m.group(1) + (" default" if m.group(2) else "")]
            current.append({})
        elif current is not None and (m := re.match(r"([a-z0-9_]+)\s+[\d.]+((?:\s+[\d.]+){5})$",
                                                    line)):
            current[-1][m.group(1)] = [float(v) for v in m.group(2).split()]
    return runs


def _span(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.2f}" if lo == hi else f"{lo:.2f}-{hi:.2f}"


def _words(values: list[float]) -> str:
    """A range as the prose says it: "0.16" or "0.17 to 0.23"."""
    lo, hi = min(values), max(values)
    return f"{lo:.2f}" if lo == hi else f"{lo:.2f} to {hi:.2f}"


def test_the_results_file_holds_three_runs_of_every_format_on_each_side():
    runs = _runs()
    for side, side_runs in runs.items():
        assert len(side_runs) == 3, side
        for run in side_runs:
            assert sorted(run) == FORMATS, side
    # the default-thread runs ran on more than one thread here, the others on one
    threads = re.findall(r"## (.*), run \d+\nn = 2\^24 float32, (\d+) thread", RESULTS)
    assert len(threads) == 12
    assert all((int(t) > 1) == ("default" in side) for side, t in threads)


def test_each_table_row_is_the_range_over_the_results_files_runs():
    runs = _runs()
    for before, after in (("before default", "after default"), ("before", "after")):
        for fmt in FORMATS:
            cells = [f"{_span([r[fmt][c] for r in runs[before]])} → "
                     f"{_span([r[fmt][c] for r in runs[after]])}" for c in range(len(COLUMNS))]
            assert f"| {fmt} | " + " | ".join(cells) + " |" in PAGE, (after, fmt)


def test_every_path_meets_the_bar_on_the_default_thread_count_in_every_run():
    runs = _runs()["after default"]
    text = " ".join(PAGE.split())
    ratios = [r[f][c] for r in runs for f in r for c in range(4)]
    peaks = [r[f][4] for side in ("after", "after default") for r in _runs()[side] for f in r]
    assert min(ratios) >= 0.3 and max(peaks) <= 2
    assert (f"Every path meets the bar in every run (the lowest cell: {min(ratios):.2f}), and "
            f"every peak is at most {max(peaks):.2f}") in text


def test_the_one_thread_paths_below_the_bar_are_named_with_their_measured_ranges():
    after = _runs()["after"]
    text = " ".join(PAGE.split())
    mx_stochastic = [r[f][1] for r in after for f in r if f != "nvfp4"]
    nv = [r["nvfp4"] for r in after]
    assert (f"Still below 0.3 on one thread: stochastic rounding (MX {_words(mx_stochastic)}, "
            f"NVFP4 {_words([v[1] for v in nv])}) and NVFP4's nearest "
            f"({_words([v[0] for v in nv])})") in text
    assert max(mx_stochastic) < 0.3 and all(max(v[c] for v in nv) < 0.3 for c in (0, 1))
    # "every MX format's nearest, encode and decode, NVFP4's encode and decode": every run
    assert all(r[f][c] >= 0.3 for r in after for f in r if f != "nvfp4" for c in (0, 2, 3))
    assert all(v[c] >= 0.3 for v in nv for c in (2, 3))


def test_the_reference_costs_are_quoted_from_the_one_thread_runs():
    one_thread = RESULTS.split("on fpsim's default threads, run 1")[0]
    refs = re.findall(r"## (before|after), run \d+\n(?:.*\n)*?reference: copy into a fresh "
                      r"array ([\d.]+), NVFP4's tensor-amax pass ([\d.]+)", one_thread)
    assert len(refs) == 6  # before and after, 3 runs each
    text = " ".join(PAGE.split())
    assert f"freshly allocated array runs at {_words([float(a) for _, a, _ in refs])}" in text
    # the pass that keeps every block's amax: the 'after' runs' (before timed the pass alone)
    amax = [float(b) for side, _, b in refs if side == "after"]
    assert f"(keeping every block's amax) runs at {_words(amax)}" in text
