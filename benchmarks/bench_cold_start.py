"""Cold start: each case in a fresh interpreter with an empty numba cache, then once more warm.

    python benchmarks/bench_cold_start.py [--cases first_fp16,all_modes,...]

Every call is answered by numpy while its kernel compiles in the background (fpsim.kernels.lazy;
at most 2^22 elements of a call, then it waits for the kernel), so these rows show import,
numpy's answer and whatever compile work shares the cores meanwhile; ``large_toward_zero``
(2^21 elements) shows what a large array costs, and ``large_wait`` (the same, then waiting
for the background compile; no goal) what the compile itself costs. A case is a short script
run as ``python -c`` with ``NUMBA_CACHE_DIR`` set to a new empty temporary directory (also
its working directory); its time includes ``import``. The warm column reruns the same script
with the cache the cold run left behind (the second run on a machine). The package imported is
the one first on ``PYTHONPATH`` (``PYTHONPATH=/some/checkout`` measures another checkout).
"cold s" is wall time, "cpu s" the interpreter's CPU time (user + system, all threads): on a
shared, loaded machine the wall time grows with the load and the CPU time much less, so compare
CPU times when the wall times look off, and rerun.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

_PRELUDE = "import numpy as np, fpsim\nx = np.linspace(-70000, 70000, 100001, dtype=np.float32)\n"

CASES: dict[str, tuple[str, float | None, str]] = {
    # name: (script, goal in seconds (issue 14), what it does)
    "first_fp16": (_PRELUDE + "fpsim.round(x, 'fp16')\n", 1.5,
                   "import + first fpsim.round, float32, nearest_even"),
    "first_toward_zero": (_PRELUDE + "fpsim.round(x, 'fp16', 'toward_zero')\n", 1.5,
                          "import + first fpsim.round, float32, toward_zero"),
    "first_stochastic": (_PRELUDE + "fpsim.round(x, 'bf16', 'stochastic', rng=0)\n", 1.5,
                         "import + first fpsim.round, float32, stochastic"),
    "large_toward_zero": (
        "import numpy as np, fpsim\n"
        "x = np.linspace(-70000, 70000, 1 << 21, dtype=np.float32)\n"
        "fpsim.round(x, 'fp16', 'toward_zero')\n", 1.5,
        "import + first fpsim.round, 2^21 float32, toward_zero (numpy answers)"),
    "large_wait": (
        "import numpy as np, fpsim\n"
        "x = np.linspace(-70000, 70000, 1 << 21, dtype=np.float32)\n"
        "fpsim.round(x, 'fp16', 'toward_zero'); fpsim.kernels.lazy.wait()\n", None,
        "the same, then waiting for its kernel's compile"),
    "all_modes": (
        _PRELUDE
        + "for m in list(fpsim.RoundingMode):\n"
        + "    for v in (x, x.astype(np.float64)):\n"
        + "        for f in ('fp16', 'e4m3fn'):\n"
        + "            fpsim.round(v, f, m, rng=0)\n"
        + "            with fpsim.monitor():\n"
        + "                fpsim.round(v, f, m, rng=0)\n",
        10.0, "every mode x float32/float64 x fast/general x monitor off/on"),
    "accumulate": (_PRELUDE + "a = fpsim.array(np.ones((8, 8)), 'fp16')\n"
                   "fpsim.matmul(a, a, accumulate='fp16'); fpsim.sum(a, accumulate='bf16')\n",
                   5.0, "import + fpsim.matmul and fpsim.sum with rounded accumulation"),
    "nn_step": (
        "import numpy as np, nn\n"
        "with nn.policy_scope('mixed_float16'):\n"
        "    m = nn.Sequential([nn.Dense(256, activation='relu', seed=0),\n"
        "                       nn.Dense(256, activation='relu', seed=1), nn.Dense(10, seed=2)])\n"
        "m.compile(optimizer=nn.optimizers.SGD(0.01),\n"
        "          loss=nn.losses.SparseCategoricalCrossentropy(from_logits=True))\n"
        "rng = np.random.default_rng(0)\n"
        "x = rng.random((256, 64), dtype=np.float32); y = rng.integers(0, 10, 256)\n"
        "m.fit(x, y, batch_size=256, epochs=1, verbose=0)\n",
        5.0, "import nn + first mixed_float16 training step (64-256-256-10, batch 256)"),
}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(script: str, cache_dir: str) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, stderr) of the script in a fresh interpreter."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    t0, cpu0 = time.perf_counter(), _children_cpu()
    # (run in the cache directory: ``python -c`` puts the working directory first on sys.path,
    # which must not shadow the PYTHONPATH checkout being measured)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, cwd=cache_dir)
    seconds, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if proc.returncode != 0:
        raise RuntimeError(f"case failed:\n{script}\n{proc.stderr}")
    return seconds, cpu, proc.stderr.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES),
                        help=f"comma-separated subset of {', '.join(CASES)}")
    args = parser.parse_args()
    names = [n for n in args.cases.split(",") if n]
    for name in names:
        if name not in CASES:
            parser.error(f"--cases: unknown case {name!r}; known: {', '.join(CASES)}")
    print(f"| {'case':<18} | {'cold s':>6} | {'cpu s':>6} | {'goal s':>6} | {'met':>3} | "
          f"{'warm s':>6} | what")
    print(f"|{'-' * 20}|{'-' * 8}|{'-' * 8}|{'-' * 8}|{'-' * 5}|{'-' * 8}|------")
    for name in names:
        script, goal, what = CASES[name]
        with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache:
            cold, cpu, notice = run(script, cache)
            warm, _, _ = run(script, cache)
        met = "-" if goal is None else "yes" if cold <= goal else "NO"
        goal_text = "-" if goal is None else f"{goal:.1f}"
        print(f"| {name:<18} | {cold:6.2f} | {cpu:6.2f} | {goal_text:>6} | {met:>3} | "
              f"{warm:6.2f} | {what}", flush=True)
        for line in notice.splitlines():
            print(f"|   stderr: {line}")


if __name__ == "__main__":
    main()
