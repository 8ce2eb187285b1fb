"""Throughput of fpsim.round beside numpy, ml_dtypes and a plain copy, measured in one run.

    python benchmarks/bench_round.py [--log2n 24] [--repeat 7]

Each row is the median of ``--repeat`` timed calls on the same 2^n float32 array (standard
normal values times 100, so every format sees normals, subnormals and overflow). The ratio
columns divide by np.copyto's throughput (the memory-bandwidth ceiling: read n, write n) and by
the reference round trips. Ratios, not absolute times, are what to compare across machines.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import ml_dtypes
import numpy as np
from timing import median_seconds

import fpsim
from fpsim import _kernels
from fpsim.rounding import get_mode


def first_call_seconds() -> float:
    """Import + first fpsim.round in a fresh interpreter (numba cache warm)."""
    code = (
        "import time; t=time.perf_counter(); import numpy as np, fpsim; "
        "fpsim.round(np.ones(4, np.float32), 'fp16'); print(time.perf_counter()-t)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)  # warm cache
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    n = 2**args.log2n
    x = (np.random.default_rng(0).standard_normal(n) * 100).astype(np.float32)
    out = np.empty_like(x)

    rows: list[tuple[str, float]] = []

    def add(name: str, fn) -> None:
        rows.append((name, n / median_seconds(fn, args.repeat)))

    add("np.copyto (ceiling)", lambda: np.copyto(out, x))
    add("numpy float16 round trip", lambda: x.astype(np.float16).astype(np.float32))
    add("ml_dtypes bfloat16 round trip", lambda: x.astype(ml_dtypes.bfloat16).astype(np.float32))
    add("ml_dtypes e4m3fn round trip",
        lambda: x.astype(ml_dtypes.float8_e4m3fn).astype(np.float32))
    add("ml_dtypes e5m2 round trip", lambda: x.astype(ml_dtypes.float8_e5m2).astype(np.float32))
    for fmt in ("fp16", "bf16", "e4m3fn", "e5m2"):
        add(f"fpsim {fmt} nearest_even out=", lambda f=fmt: fpsim.round(x, f, out=out))
        add(f"fpsim {fmt} nearest_even", lambda f=fmt: fpsim.round(x, f))
        add(f"fpsim {fmt} stochastic out=",
            lambda f=fmt: fpsim.round(x, f, "stochastic", rng=1, out=out))
    for mode in ("nearest_away", "toward_zero", "up", "down", "odd"):
        add(f"fpsim fp16 {mode} out=", lambda m=mode: fpsim.round(x, "fp16", m, out=out))
    # the general kernel's one-mode specialisation on the int32 view, which large float32
    # arrays in these modes took before fpsim.kernels.directed_f32: the before/after, same run
    c = _kernels.carrier_constants(x.dtype)
    f = fpsim.quantize.format_constants(fpsim.FP16, x.dtype, True, "inf")
    bits, out_bits = x.view(np.int32), out.view(np.int32)
    for mode in ("nearest_away", "toward_zero", "up", "down", "odd"):
        kernel = _kernels.specialised_range(get_mode(mode))
        add(f"  before: int64 kernel, {mode}",
            lambda k=kernel: _kernels.run(k, n, (bits, out_bits), (0, c, f)))

    rates = dict(rows)
    copy = rates["np.copyto (ceiling)"]
    print(f"n = 2^{args.log2n} float32 elements, median of {args.repeat}; G = 1e9 elements/s")
    print(f"{'case':36s} {'G/s':>7s} {'/copy':>7s}")
    for name, rate in rows:
        print(f"{name:36s} {rate / 1e9:7.3f} {rate / copy:7.2f}")
    print()
    checks = [
        ("fp16 nearest_even out= / copy", rates["fpsim fp16 nearest_even out="] / copy, 0.75),
        ("bf16 nearest_even out= / copy", rates["fpsim bf16 nearest_even out="] / copy, 0.75),
        ("e4m3fn nearest_even out= / copy", rates["fpsim e4m3fn nearest_even out="] / copy, 0.5),
        ("e5m2 nearest_even out= / copy", rates["fpsim e5m2 nearest_even out="] / copy, 0.5),
        ("min directed fp16 out= / copy", min(
            rates[f"fpsim fp16 {m} out="]
            for m in ("nearest_away", "toward_zero", "up", "down", "odd")) / copy, 0.7),
        ("min stochastic out= / copy", min(
            rates[f"fpsim {f} stochastic out="] for f in ("fp16", "bf16", "e4m3fn", "e5m2"))
         / copy, 0.25),
        ("bf16 out= / ml_dtypes bf16", rates["fpsim bf16 nearest_even out="]
         / rates["ml_dtypes bfloat16 round trip"], 3.0),
        ("e4m3fn out= / ml_dtypes e4m3fn", rates["fpsim e4m3fn nearest_even out="]
         / rates["ml_dtypes e4m3fn round trip"], 20.0),
        ("e5m2 out= / ml_dtypes e5m2", rates["fpsim e5m2 nearest_even out="]
         / rates["ml_dtypes e5m2 round trip"], 20.0),
        ("fp16 out= / numpy float16", rates["fpsim fp16 nearest_even out="]
         / rates["numpy float16 round trip"], 10.0),
    ]
    print(f"{'target':36s} {'ratio':>7s} {'goal':>7s}")
    for name, ratio, goal in checks:
        print(f"{name:36s} {ratio:7.2f} {'>=' + format(goal, 'g'):>7s} "
              f"{'ok' if ratio >= goal else 'MISSED'}")
    first = first_call_seconds()
    print(f"{'first call incl. import (s)':36s} {first:7.2f} {'<=1.5':>7s} "
          f"{'ok' if first <= 1.5 else 'MISSED'}")


if __name__ == "__main__":
    main()
