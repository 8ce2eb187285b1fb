"""Seeds, intervals and verdicts (nn.experiments.intervals, nn.experiments.seeds).

Oracles: published two-sided 95% t quantiles, scipy.stats.t where installed, a hand-computed
interval, and the per-seed losses themselves (a claim's gaps are their differences)."""

from __future__ import annotations

import json
import math

import pytest

from nn.experiments import LMConfig, intervals, seeds
from nn.experiments.intervals import NOT_SHOWN, SHOWN, claim_verdict, mean_interval

TINY = LMConfig(sequence_length=16, batch_size=8, embed_dim=8, ff_dim=16, steps=3)

# t_{0.975, df} as printed in every statistics table (3 decimals)
PUBLISHED = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 9: 2.262, 10: 2.228,
             20: 2.086, 29: 2.045, 30: 2.042}


@pytest.mark.parametrize("df", sorted(PUBLISHED))
def test_t_quantiles_match_the_published_table(df):
    assert round(intervals.t_quantile(0.975, df), 3) == PUBLISHED[df]


def test_t_quantiles_and_cdf_match_scipy_to_float64_resolution():
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 2, 3, 4, 7, 12, 60):
        for p in (0.6, 0.9, 0.975, 0.995):
            assert intervals.t_quantile(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-12)
        for t in (-3.0, -0.4, 0.0, 1.3, 8.0):
            assert intervals.t_cdf(t, df) == pytest.approx(stats.t.cdf(t, df), abs=1e-14)


def test_the_interval_of_one_to_five_is_computed_by_hand():
    # mean 3, sample sd sqrt(2.5), standard error sqrt(2.5 / 5) = sqrt(0.5);
    # t_{0.975, 4} = 2.7764451051977934 (scipy.stats.t.ppf(0.975, 4))
    mean, lo, hi = mean_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    half = 2.7764451051977934 * math.sqrt(0.5)
    assert mean == 3.0
    assert lo == pytest.approx(3.0 - half, rel=1e-14) and hi == pytest.approx(3.0 + half, rel=1e-14)


def test_identical_values_give_an_interval_of_width_zero_and_one_value_is_refused():
    assert mean_interval([0.5, 0.5, 0.5]) == (0.5, 0.5, 0.5)
    with pytest.raises(ValueError, match="at least 2 values, got 1"):
        mean_interval([1.0])


def test_shown_only_when_the_interval_lies_above_zero():
    assert claim_verdict([0.10, 0.12, 0.09, 0.11, 0.10]).verdict == SHOWN
    mixed = claim_verdict([0.1, -0.1, 0.05, 0.02, 0.0])
    assert mixed.verdict == NOT_SHOWN and mixed.gap_ci95[0] < 0 < mixed.gap_ci95[1]
    # a clear effect in the other direction is not the claim
    assert claim_verdict([-0.10, -0.12, -0.09, -0.11, -0.10]).verdict == NOT_SHOWN
    # never a single run's gap, however large
    single = claim_verdict([5.0])
    assert single.verdict == NOT_SHOWN and single.gap_ci95 is None


def test_divergence_counts_only_when_it_happens_from_every_seed():
    assert claim_verdict([math.inf] * 5).verdict == SHOWN
    partly = claim_verdict([math.inf, 0.2, 0.3, math.inf, 0.1])
    assert partly.verdict == NOT_SHOWN and partly.diverged == 2 and partly.gap_mean is None
    assert claim_verdict([math.nan, 0.2, 0.3]).verdict == NOT_SHOWN
    assert intervals.paired_gap(math.nan, 3.0) == math.inf
    assert intervals.paired_gap(3.0, math.nan) == -math.inf
    assert math.isnan(intervals.paired_gap(math.nan, math.nan))
    assert intervals.paired_gap(3.5, 3.0) == 0.5


def test_seeds_take_a_count_or_a_list_and_refuse_anything_else():
    assert seeds.parse_seeds("5") == [0, 1, 2, 3, 4]
    assert seeds.parse_seeds("100,101, 102") == [100, 101, 102]
    for bad in ("0", "-1", "a", "1,1", "1,-2", ""):
        with pytest.raises(ValueError, match="--seeds"):
            seeds.parse_seeds(bad)


def test_a_seed_draws_the_weights_and_batches_and_the_claims_gaps_are_paired_by_seed():
    found = seeds.run_seeds("bf16", [0, 1, 2], config=TINY, processes=1)
    assert found.seeds == [0, 1, 2] and found.runs[0].blas_threads in (1, None)
    losses = [r.test_loss["float32"] for r in found.runs]
    assert len(set(losses)) == 3  # each seed its own weights and batches
    again = seeds.run_seed("bf16", TINY.with_(seed=1))
    assert again.test_loss == found.runs[1].test_loss  # and the same seed the same numbers
    claim = found.claims()[0]
    assert claim.claim.variant == "mixed_bfloat16" and claim.claim.reference == "float32"
    expected = [r.test_loss["mixed_bfloat16"] - r.test_loss["float32"] for r in found.runs]
    assert claim.gaps == expected
    mean, lo, hi = mean_interval(expected)
    assert claim.verdict.gap_mean == mean and claim.verdict.gap_ci95 == (lo, hi)
    numbers = found.numbers("fpsim compare --experiment bf16 --seeds 3")
    json.dumps(numbers, allow_nan=False)  # strict JSON: no NaN, no inf
    # kept to 6 decimals, or 6 significant digits below 0.1
    assert numbers["claims"][0]["gap_ci95"] == pytest.approx([lo, hi], rel=1e-5, abs=1e-6)


def test_seeds_in_parallel_processes_give_the_numbers_of_one_process():
    one = seeds.run_seeds("adam-state", [3, 4], config=TINY.with_(steps=2), processes=1)
    two = seeds.run_seeds("adam-state", [3, 4], config=TINY.with_(steps=2), processes=2)
    assert two.processes == 2
    for a, b in zip(one.runs, two.runs, strict=True):
        assert a.seed == b.seed and a.nan_step == b.nan_step
        assert a.test_loss["Adam, fp32 slots"] == b.test_loss["Adam, fp32 slots"]
    assert two.runs[0].blas_threads in (1, None)


def test_compare_json_writes_seeds_claims_verdicts_and_its_stamp(tmp_path, capsys):
    from fpsim.cli import main

    path = tmp_path / "r.json"
    assert main(["compare", "--experiment", "adam-state", "--steps", "2", "--seeds", "7,8",
                 "--processes", "1", "--json", str(path), "--out", str(tmp_path)]) == 0
    found = json.loads(path.read_text())
    assert found["experiment"] == "adam-state" and found["seeds"] == [7, 8]
    assert found["blas_threads"] in (1, None) and found["steps"] == 2
    assert found["command"] == ("fpsim compare --experiment adam-state --seeds 7,8 --steps 2 "
                                f"--json {path}")
    assert found["date"].endswith("+00:00") and found["machine"]["cpu_count"] >= 1
    (claim,) = found["claims"]
    assert claim["name"] == "Adam, fp16 slots > Adam, fp32 slots"
    assert claim["verdict"] == "shown" and claim["diverged_seeds"] == 2
    assert [s["seed"] for s in found["per_seed"]] == [7, 8]
    assert all(s["test_loss"]["Adam, fp16 slots"] is None for s in found["per_seed"])


def test_each_seed_records_its_cpu_time_and_the_file_the_load_it_ran_at(tmp_path, capsys):
    import os
    import time

    start = time.process_time()
    found = seeds.run_seeds("adam-state", [5], config=TINY.with_(steps=2), processes=1)
    spent = time.process_time() - start  # this process's CPU seconds, the seed's among them
    (run,) = found.runs
    assert 0 < run.cpu_time <= spent
    numbers = found.numbers("")
    assert numbers["per_seed"][0]["cpu_time"] == round(run.cpu_time, 2)
    assert len(numbers["load_average"]) == 3 and numbers["load_average"][2] == pytest.approx(
        os.getloadavg()[2], abs=1.0)


def test_compare_refuses_seeds_for_the_digits_story(tmp_path, capsys):
    from fpsim.cli import main

    assert main(["compare", "--experiment", "digits", "--seeds", "3", "--out",
                 str(tmp_path)]) == 2
    assert "digits story has one fixed seed" in capsys.readouterr().err


def test_all_with_resume_keeps_what_the_file_holds_and_runs_the_rest(tmp_path, capsys,
                                                                     monkeypatch):
    import dataclasses

    from fpsim.cli import main
    from nn import experiments as ex

    for name in list(ex.EXPERIMENTS):  # a table of two small experiments
        if name not in ("adam-state", "bf16"):
            monkeypatch.delitem(ex.EXPERIMENTS, name)
    monkeypatch.setitem(ex.EXPERIMENTS, "bf16",
                        dataclasses.replace(ex.EXPERIMENTS["bf16"], config=TINY))
    path = tmp_path / "all.json"
    kept = {"experiment": "adam-state", "seeds": [0, 1], "steps": 2, "marker": "kept"}
    stale = {"experiment": "bf16", "seeds": [0, 1, 2], "steps": 2}  # other seeds: rerun
    path.write_text(json.dumps([kept, stale]))
    assert main(["compare", "--all", "--resume", "--seeds", "2", "--steps", "2", "--processes",
                 "1", "--json", str(path), "--out", str(tmp_path)]) == 0
    found = json.loads(path.read_text())
    assert [r["experiment"] for r in found] == ["adam-state", "bf16"]
    assert found[0] == kept and found[1]["seeds"] == [0, 1] and found[1]["claims"]
    assert found[1]["command"] == f"fpsim compare --all --seeds 2 --steps 2 --json {path}"
    assert "experiment adam-state: kept from" in capsys.readouterr().out


@pytest.mark.parametrize(("option", "value"), [("--seeds", "1,1"), ("--seeds", "0"),
                                               ("--blas-threads", "-1"),
                                               ("--blas-threads", "two")])
def test_compare_refuses_bad_seeds_and_thread_counts_naming_the_option(option, value, capsys):
    from fpsim.cli import main

    assert main(["compare", option, value]) == 2
    err = capsys.readouterr().err
    assert option in err and repr(value) in err
