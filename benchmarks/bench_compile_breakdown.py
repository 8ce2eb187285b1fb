"""Where a fresh install's first-call time goes: import, then each kernel's compilation.

    NUMBA_CACHE_DIR=$(mktemp -d) python benchmarks/bench_compile_breakdown.py

Run it with an empty numba cache (else it times cache loads). Each kernel is called once on a
tiny array inside ``fpsim.kernels.lazy.eager_compiles()`` (so it compiles on this thread); the
columns are the CPU seconds of that call, and the (wall) seconds numba reports holding its
compiler lock (type inference, lowering and LLVM) and LLVM's lock (LLVM's optimisation and
code generation) during it: the difference is numba's own Python-level work. On a loaded
machine the wall columns grow; their ratio is what to read.
"""

from __future__ import annotations

import time
from collections.abc import Callable

_cpu0 = time.process_time()

import numpy as np  # noqa: E402
from numba.core import event  # noqa: E402

import fpsim  # noqa: E402
from fpsim import _kernels  # noqa: E402
from fpsim.kernels.lazy import eager_compiles  # noqa: E402
from fpsim.quantize import (  # noqa: E402
    directed_f32_constants,
    format_constants,
    nearest_even_f32_constants,
)
from fpsim.rounding import RoundingMode  # noqa: E402


def timed(name: str, call: Callable[[], object]) -> None:
    held = {"numba:compiler_lock": 0.0, "numba:llvm_lock": 0.0}

    def adder(key: str) -> Callable[[float], None]:
        return lambda seconds: held.__setitem__(key, held[key] + seconds)

    with (event.install_timer("numba:compiler_lock", adder("numba:compiler_lock")),
          event.install_timer("numba:llvm_lock", adder("numba:llvm_lock"))):
        t = time.process_time()
        call()
        cpu = time.process_time() - t
    print(f"| {name:<38} | {cpu:5.2f} | {held['numba:compiler_lock']:5.2f} | "
          f"{held['numba:llvm_lock']:5.2f} |")


def main() -> None:
    print(f"import numpy, numba, fpsim: {time.process_time() - _cpu0:.2f} CPU s")
    print(f"| {'kernel (first call)':<38} | cpu s | numba | llvm  |")
    print(f"|{'-' * 40}|-------|-------|-------|")
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    x32 = np.ones(10, np.float32).view(np.int32)
    x64 = np.ones(10).view(np.int64)
    c32, c64 = _kernels.carrier_constants(f32), _kernels.carrier_constants(f64)
    fmt32 = format_constants(fpsim.FP16, f32, True, "inf")
    fmt64 = format_constants(fpsim.FP16, f64, True, "inf")
    tz = _kernels.mode_bits(RoundingMode.TOWARD_ZERO)
    p = nearest_even_f32_constants(fpsim.FP16, True, "inf")
    v = x32.view(np.float32)
    with eager_compiles():
        timed("fast_f32 round (float32 nearest-even)",
              lambda: _kernels.round_nearest_even_f32_range(v, v, 0, 10, p))
        timed("fast_f32 counting twin",
              lambda: _kernels.count_nearest_even_f32_range(v, v, 0, 10, p))
        timed("general round_range, float32",
              lambda: _kernels.round_range(x32, x32, 0, 10, tz, 0, c32, fmt32))
        timed("general round_range, float64",
              lambda: _kernels.round_range(x64, x64, 0, 10, tz, 0, c64, fmt64))
        timed("general round_count_range, float32",
              lambda: _kernels.round_count_range(x32, x32, 0, 10, tz, 0, c32, fmt32))
        for mode in (RoundingMode.TOWARD_ZERO, RoundingMode.STOCHASTIC):
            kernel = _kernels.specialised_range(mode)
            timed(f"one-mode {mode.value}, float32",
                  lambda kernel=kernel: kernel(x32, x32, 0, 10, 0, c32, fmt32))
        d = directed_f32_constants(fpsim.FP16, True, "inf")
        for counting in (False, True):
            kernel = _kernels.directed_f32_range(RoundingMode.TOWARD_ZERO, counting)
            timed(f"directed_f32 toward_zero{' counting' if counting else ''}",
                  lambda kernel=kernel: kernel(v, v, 0, 10, d))
        a = fpsim.array(np.ones((8, 8), np.float32), "fp16")  # (compiled above: float32 NE)
        timed("accumulate_rows (matmul accumulate=)",
              lambda: fpsim.matmul(a, a, accumulate="fp16"))


if __name__ == "__main__":
    main()
