"""A fresh install says when it compiles, once, and never when it loads kernels from the cache."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# (numpy answers while the kernel compiles in the background: wait for that compile to end)
_SCRIPT = ("import numpy as np, fpsim; from fpsim.kernels import lazy; "
           "fpsim.round(np.ones(1 << 18, np.float32), 'fp16', 'up'); lazy.wait()")
NOTICE = "fpsim: compiling numba kernels"


@pytest.mark.slow
def test_the_compile_notice_appears_once_when_compiling_and_never_when_loading_from_cache(
        tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                           text=True, timeout=300, check=True) for _ in range(2)]
    assert runs[0].stderr.count(NOTICE) == 1, runs[0].stderr
    assert NOTICE not in runs[1].stderr, runs[1].stderr


# the same call, but the process exits without waiting for the background compile
_SHORT_RUN = ("import numpy as np, fpsim; "
              "fpsim.round(np.ones(1 << 18, np.float32), 'fp16', 'down')")


@pytest.mark.slow
def test_a_compile_started_by_a_short_run_finishes_into_the_cache_so_the_next_run_is_quiet(
        tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", _SHORT_RUN], env=env, capture_output=True,
                           text=True, timeout=300, check=True) for _ in range(2)]
    assert runs[0].stderr.count(NOTICE) == 1, runs[0].stderr
    assert NOTICE not in runs[1].stderr, runs[1].stderr
    assert list(tmp_path.rglob("*.nbc"))  # the compiled kernel is in the cache
