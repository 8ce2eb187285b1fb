"""A verdict does not depend on the BLAS thread count: the same experiments at CI size, run in
subprocesses with OPENBLAS_NUM_THREADS=1 and =2 (BLAS left as the environment sets it), give
the same verdicts, and each process reports the thread count it ran with."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SCRIPT = """
import json
from nn.experiments import LMConfig, seeds
tiny = LMConfig(sequence_length=16, batch_size=8, embed_dim=8, ff_dim=16, steps=4)
out = {}
for name in ("adam-state", "bf16"):
    found = seeds.run_seeds(name, [0, 1, 2], config=tiny, processes=1, blas_threads=None)
    out[name] = {"blas": found.runs[0].blas_threads,
                 "claims": [[c.claim.name, c.verdict.verdict, c.verdict.gap_mean]
                            for c in found.claims()]}
print(json.dumps(out))
"""


def _run(threads: int) -> dict:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.xdist_group("blas_threads")
def test_verdicts_are_the_same_with_one_and_two_blas_threads():
    one, two = _run(1), _run(2)
    for name in one:
        if one[name]["blas"] is not None:  # numpy's BLAS is visible: it ran as told
            assert (one[name]["blas"], two[name]["blas"]) == (1, 2)
        assert [c[:2] for c in one[name]["claims"]] == [c[:2] for c in two[name]["claims"]]
        for a, b in zip(one[name]["claims"], two[name]["claims"], strict=True):
            if a[2] is not None:  # the gaps agree far below their own size
                assert b[2] == pytest.approx(a[2], abs=1e-3)
    assert one["adam-state"]["claims"][0][1] == "shown"  # diverged from every seed
