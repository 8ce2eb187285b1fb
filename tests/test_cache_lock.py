"""fpsim.kernels.cache_lock: two processes adding different entries of one cached numba function
at the same moment keep both, each pointing at its own compiled code.

The race is made certain, not left to timing: each worker's read of numba's index is followed
by a pause, so both read the index before either writes it (without the lock, both then take
data file 1 and one key is lost or crossed)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("fcntl")

KERNEL = """
from numba import njit

@njit(cache=True)
def plus_one(x):
    return x + 1
"""

WORKER = """
import sys, time
sys.path.insert(0, sys.argv[1])
if sys.argv[3] == "locked":
    import fpsim  # noqa: F401  (installs the lock)
from numba.core import caching

read = caching.IndexDataCacheFile._load_index

def slow_read(self):
    overloads = read(self)
    time.sleep(1.0)  # both workers read the index before either writes it
    return overloads

caching.IndexDataCacheFile._load_index = slow_read
import kernel
print(kernel.plus_one(int(sys.argv[2])) if sys.argv[2] == "1" else kernel.plus_one(1.5))
"""

CHECK = """
import sys
sys.path.insert(0, sys.argv[1])
import kernel
stats = kernel.plus_one.stats
print(repr(kernel.plus_one(1)), repr(kernel.plus_one(1.5)), sum(stats.cache_hits.values()),
      sum(stats.cache_misses.values()))
"""


def run_two_workers_at_once(tmp_path: Path, how: str) -> tuple[dict, str]:
    """(the index's entries after two workers added an int and a float entry at once, what a
    third process computes from the cache)."""
    (tmp_path / "kernel.py").write_text(KERNEL)
    cache = tmp_path / "cache"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path), arg, how],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for arg in ("1", "1.5")]
    for w in workers:
        out, err = w.communicate(timeout=120)
        assert w.returncode == 0, err
    [index] = list(cache.rglob("*plus_one*.nbi"))
    with open(index, "rb") as f:
        pickle.load(f)  # numba's version
        _, overloads = pickle.loads(f.read())
    check = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path)], env=env,
                           capture_output=True, text=True, timeout=120, check=True)
    return overloads, check.stdout.strip()


def test_two_processes_adding_entries_at_once_keep_both_under_the_lock(tmp_path):
    overloads, computed = run_two_workers_at_once(tmp_path, "locked")
    assert len(overloads) == 2 and len(set(overloads.values())) == 2
    # each signature its own code, both loaded from the cache (2 hits, no compile)
    assert computed == "2 2.5 2 0"


def test_without_the_lock_the_same_two_processes_lose_an_entry(tmp_path):
    # the control: shows the race the lock closes is real in this numba
    overloads, _ = run_two_workers_at_once(tmp_path, "unlocked")
    assert len(overloads) == 1


def test_install_is_idempotent_and_reports_it():
    from numba.core.caching import IndexDataCacheFile

    from fpsim.kernels import cache_lock

    before = IndexDataCacheFile.save
    assert cache_lock.install() is True and cache_lock.install() is True
    assert IndexDataCacheFile.save is before  # wrapped once, not twice


def test_the_worker_script_is_plain_python():
    compile(textwrap.dedent(WORKER), "worker", "exec")  # (a syntax slip would hide the race)
