"""nn.engine.memory: after ``import nn`` a training loop's large temporaries reuse freed memory
instead of faulting fresh pages in every step (glibc only); NN_RETAIN_FREED_MEMORY=0 opts out."""

from __future__ import annotations

import importlib.util
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from nn.engine import memory

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def _huge_pages_always() -> bool:
    """Transparent huge pages for every mapping: fresh memory then faults 2 MiB at a time."""
    try:
        return "[always]" in Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return False

# Six 3 MiB arrays written and freed, four times after a first round: under glibc's own
# thresholds the freed heap top (18 MiB) exceeds the trim threshold and is handed back, so each
# round faults its 4608 pages in again.
PATTERN = """
import resource
import numpy as np
import nn

def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

def round_of_temporaries():
    arrays = [np.ones(3 << 18, np.float32) for _ in range(6)]
    del arrays

round_of_temporaries()
before = faults()
for _ in range(4):
    round_of_temporaries()
print(faults() - before)
"""


def page_faults_of_the_pattern(env_value: str | None) -> int:
    env = dict(os.environ)
    env.pop(memory.ENV, None)
    if env_value is not None:
        env[memory.ENV] = env_value
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[3]),
                                         env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", PATTERN], env=env, capture_output=True,
                         text=True, check=True)
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_after_import_nn_freed_temporaries_are_reused_without_page_faults():
    assert page_faults_of_the_pattern(None) < 100  # 4 x 4608 pages without the setting


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
@pytest.mark.skipif(_huge_pages_always(), reason="pages fault 2 MiB at a time here")
def test_opting_out_leaves_glibc_to_hand_the_memory_back_so_every_round_faults_again():
    assert page_faults_of_the_pattern("0") > 4 * 4000


def test_apply_default_is_off_for_zero_and_rejects_other_values_naming_the_variable(
        monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(memory.ENV, "0")
    assert memory.apply_default() is False
    monkeypatch.setenv(memory.ENV, "yes")
    with pytest.raises(ValueError, match=r"NN_RETAIN_FREED_MEMORY must be 0 .* or 1, got 'yes'"):
        memory.apply_default()


@pytest.mark.parametrize("kwargs,needle", [
    ({"mmap_threshold": -1}, "mmap_threshold must be a whole number of bytes >= 0, got -1"),
    ({"trim_threshold": 1.5}, "trim_threshold must be a whole number of bytes >= 0, got 1.5"),
    ({"mmap_threshold": 64 << 20}, "mmap_threshold must be at most 33554432"),
])
def test_retain_freed_memory_rejects_bad_thresholds_naming_them(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        memory.retain_freed_memory(**kwargs)


def _bench_train():
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_train.py"
    spec = importlib.util.spec_from_file_location("bench_train_for_memory", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not GLIBC, reason="counts glibc's page faults")
def test_a_warm_mixed_float16_mlp_step_touches_almost_no_fresh_pages():
    # under glibc's own thresholds: about 350 faults a step here (its arrays' pages, every step)
    assert memory.apply_default() or os.environ.get(memory.ENV) == "0"
    if os.environ.get(memory.ENV) == "0":
        pytest.skip(f"{memory.ENV}=0 in this environment")
    from fpsim.kernels import lazy
    from nn.warmup import warmup

    # (a compile allocates, and its faults count in this process: none may run meanwhile)
    lazy.wait()  # compiles earlier tests started in the background
    warmup(progress=False)  # every kernel this test needs, compiled or loaded now
    bench_train = _bench_train()
    steps = bench_train.make_steps([64, 256, 256, 10], batch=256)
    for _ in range(5):  # the heap grows to the step's working set
        steps["nn mixed_float16"]()
    # the quietest of three windows of 10 steps (a one-off allocation elsewhere in this process,
    # a garbage collection or a thread's first stack, shows in one window, not in every step)
    windows = [bench_train.page_faults({"mixed": steps["nn mixed_float16"]}, repeats=10)
               for _ in range(3)]
    assert all(w is not None for w in windows)
    assert min(w["mixed"] for w in windows) < 32
