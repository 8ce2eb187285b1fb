"""An experiment trained from several seeds: per variant the mean held-out loss with its 95%
interval, per claim the gap to its reference paired by seed, with its interval and verdict.

Each seed is one call of the experiment's ``run`` with ``config.seed`` set to it (the seed
draws the initial weights and the batch order of every variant). Seeds run in parallel
processes, one per core, each process with ``blas_threads`` BLAS threads (``nn.engine.blas``;
ours: 1); ``blas_threads=None`` leaves BLAS as the environment set it.
"""

from __future__ import annotations

import datetime
import math
import multiprocessing
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nn.engine.blas import BLAS_THREADS, limit_blas
from nn.engine.blas import blas_thread_count as blas_thread_count  # its old home
from nn.experiments.intervals import Verdict, claim_verdict, mean_interval, paired_gap
from nn.experiments.result import ExperimentResult, loss_text
from nn.experiments.table import Claim, experiment


def parse_seeds(text: str) -> list[int]:
    """``--seeds``: a count K (seeds 0 to K-1) or a comma-separated list of distinct
    non-negative integers such as "100,101,102"."""
    parts = [p.strip() for p in str(text).split(",")]
    try:
        values = [int(p) for p in parts]
    except ValueError:
        values = []
    if not values or any(v < 0 for v in values):
        raise ValueError(f"--seeds must be a count K >= 1 or a list of non-negative integers "
                         f"such as 100,101,102, got {text!r}")
    if len(parts) == 1:
        if values[0] < 1:
            raise ValueError(f"--seeds must be a count K >= 1 or a list such as 100,101,102, "
                             f"got {text!r}")
        return list(range(values[0]))
    if len(set(values)) != len(values):
        raise ValueError(f"--seeds lists a seed twice: {text!r}")
    return values


@dataclass
class SeedRun:
    """One seed of an experiment, measured: per run label the held-out loss, the training
    loss step by step and the first non-finite step; the findings' lines; the whole result
    (``result``) only for the seed that keeps it (the first: for the table and picture)."""

    seed: int
    test_loss: dict[str, float]
    step_loss: dict[str, list[float]]
    nan_step: dict[str, int | None]
    findings: list[str]
    wall_time: float
    blas_threads: int | None
    result: ExperimentResult | None = field(default=None, repr=False)
    cpu_time: float = math.nan  # CPU seconds of the process (all its threads) for this seed

    def numbers(self) -> dict[str, Any]:
        """What the results file keeps of this seed."""
        return {"seed": self.seed, "test_loss": {k: _num(v) for k, v in self.test_loss.items()},
                "nan_step": self.nan_step, "wall_time": round(self.wall_time, 2),
                "cpu_time": _num(round(self.cpu_time, 2))}


def run_seed(name: str, config: Any, keep_result: bool = False,
             blas_threads: int | None = BLAS_THREADS,
             run: Callable[[Any], ExperimentResult] | None = None) -> SeedRun:
    """Train experiment ``name`` once from ``config`` (its ``seed`` included), with the table's
    ``run`` of it or with ``run`` where given (another backend's, e.g.
    ``nn.experiments.torch_backend``'s)."""
    threads = limit_blas(blas_threads)
    entry = experiment(name)
    start, cpu = time.perf_counter(), time.process_time()
    result = (entry.run if run is None else run)(config)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return SeedRun(
        seed=config.seed, test_loss={r.label: r.test_loss for r in result.runs},
        step_loss={r.label: [float(v) for v in r.history.step_loss] for r in result.runs},
        nan_step={r.label: r.nan_step for r in result.runs}, findings=entry.findings(result),
        wall_time=wall, blas_threads=threads, result=result if keep_result else None,
        cpu_time=cpu)


@dataclass
class ClaimResult:
    claim: Claim
    gaps: list[float]
    verdict: Verdict

    def numbers(self) -> dict[str, Any]:
        v = self.verdict
        return {"name": self.claim.name, "claim": self.claim.describe(),
                "variant": self.claim.variant, "reference": self.claim.reference,
                "verdict": v.verdict, "gap_mean": _num(v.gap_mean),
                "gap_ci95": None if v.gap_ci95 is None else [_num(x) for x in v.gap_ci95],
                "diverged_seeds": v.diverged, "reason": v.reason,
                "gaps": [_num(g) for g in self.gaps]}


@dataclass
class SeededResult:
    """An experiment from several seeds (``runs`` in seed order)."""

    name: str
    config: Any
    runs: list[SeedRun]
    processes: int
    wall_time: float

    @property
    def seeds(self) -> list[int]:
        return [r.seed for r in self.runs]

    @property
    def labels(self) -> list[str]:
        return list(self.runs[0].test_loss)

    def losses(self, label: str) -> list[float]:
        return [r.test_loss[label] for r in self.runs]

    def variant_interval(self, label: str) -> tuple[float, float, float] | None:
        """(mean, low, high) of ``label``'s held-out loss over the seeds; None when a run
        diverged or there is one seed."""
        values = self.losses(label)
        if len(values) < 2 or not all(math.isfinite(v) for v in values):
            return None
        return mean_interval(values)

    def claims(self) -> list[ClaimResult]:
        found = []
        for claim in experiment(self.name).claims:
            gaps = [paired_gap(r.test_loss[claim.variant], r.test_loss[claim.reference])
                    for r in self.runs]
            found.append(ClaimResult(claim, gaps, claim_verdict(gaps)))
        return found

    @property
    def ran_config(self) -> Any:
        """The configuration the first seed ran with, as the experiment set it (one may set
        its own learning rate)."""
        first = self.first
        return first.config if first is not None else self.config.with_(seed=self.seeds[0])

    @property
    def first(self) -> ExperimentResult | None:
        return next((r.result for r in self.runs if r.result is not None), None)

    def numbers(self, command: str = "") -> dict[str, Any]:
        """The object ``--json`` writes (and one entry of the results file)."""
        entry = experiment(self.name)
        threads = {r.blas_threads for r in self.runs}
        return {
            "experiment": self.name, "title": entry.title, "technique": entry.technique,
            "seeds": self.seeds, "steps": self.config.steps,
            "config": self.ran_config.describe(),
            "blas_threads": threads.pop() if len(threads) == 1 else sorted(threads),
            "processes": self.processes,
            "claims": [c.numbers() for c in self.claims()],
            "variants": [self._variant(label) for label in self.labels],
            "per_seed": [r.numbers() for r in self.runs],
            "findings_first_seed": self.runs[0].findings,
            "wall_time": round(self.wall_time, 1), "command": command,
            "load_average": _load(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine(),
        }

    def _variant(self, label: str) -> dict[str, Any]:
        interval = self.variant_interval(label)
        losses = self.losses(label)
        return {"label": label, "mean": None if interval is None else _num(interval[0]),
                "ci95": None if interval is None else [_num(interval[1]), _num(interval[2])],
                "test_loss": [_num(v) for v in losses],
                "diverged_seeds": sum(1 for v in losses if not math.isfinite(v))}


def machine() -> dict[str, Any]:
    """Where the numbers were made."""
    return {"platform": platform.platform(), "processor": platform.machine(),
            "cpu_count": os.cpu_count(), "python": sys.version.split()[0],
            "numpy": np.__version__}


def _load() -> list[float] | None:
    """The machine's load average over 1, 5 and 15 minutes now (None where the OS has none):
    the wall times above mean little without it."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def _num(v: float | None) -> float | None:
    """A JSON-safe number: None for a non-finite one, else rounded to 6 decimals (6
    significant digits below 0.1, so a gap of 1e-5 keeps its digits)."""
    if v is None or not math.isfinite(v):
        return None
    return round(float(v), 6) if abs(v) >= 0.1 else float(f"{v:.6g}")


def _init_worker(blas_threads: int | None) -> None:
    limit_blas(blas_threads)


def run_seeds(name: str, seeds: Sequence[int], *, steps: int | None = None,
              processes: int | None = None, blas_threads: int | None = BLAS_THREADS,
              progress: Callable[[str], None] | None = None,
              config: Any = None,
              run: Callable[[Any], ExperimentResult] | None = None) -> SeededResult:
    """Train experiment ``name`` from every seed in ``seeds`` (``config``, default the table's,
    with ``steps`` if given), ``processes`` at a time (default one per core, at most one per
    seed; 1 runs them in this process). ``progress`` gets one line as each seed finishes.
    ``run`` (config -> ExperimentResult; picklable when ``processes`` > 1) trains one seed in
    place of the table's function (``run_seed``)."""
    entry = experiment(name)
    seeds = list(seeds)
    if not seeds:
        raise ValueError("run_seeds: seeds is empty")
    base = (entry.config if config is None else config)
    if steps is not None:
        base = base.with_(steps=steps)
    processes = min(len(seeds), processes or os.cpu_count() or 1)
    say = progress or (lambda line: None)
    start = time.perf_counter()
    runs: dict[int, SeedRun] = {}

    def done(run: SeedRun) -> None:
        runs[run.seed] = run
        losses = ", ".join(f"{k} {loss_text(v)}" for k, v in run.test_loss.items())
        say(f"  seed {run.seed} done ({len(runs)}/{len(seeds)}, {run.wall_time:.1f} s, "
            f"{run.cpu_time:.1f} s of CPU): "
            f"held-out loss {losses}")

    say(f"training seeds {seeds} in {processes} process(es), BLAS threads per process: "
        f"{blas_threads if blas_threads else 'as the environment sets them'}")
    if processes == 1:
        for i, seed in enumerate(seeds):
            done(run_seed(name, base.with_(seed=seed), i == 0, blas_threads, run))
    else:
        context = multiprocessing.get_context("spawn")  # no fork under numba's threads
        with ProcessPoolExecutor(processes, mp_context=context, initializer=_init_worker,
                                 initargs=(blas_threads,)) as pool:
            futures = [pool.submit(run_seed, name, base.with_(seed=seed), i == 0,
                                   blas_threads, run) for i, seed in enumerate(seeds)]
            for future in as_completed(futures):
                done(future.result())
    ordered = [runs[s] for s in seeds]
    return SeededResult(name, base, ordered, processes, time.perf_counter() - start)
