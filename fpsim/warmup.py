"""``fpsim.warmup()``: compile (or load from numba's cache) every kernel the tutorials use.

A fresh install compiles each numba kernel on the first call that needs it, a second or two
each; a teacher preparing a room of machines runs ``fpsim warmup`` (or this function) once per
machine, after which every call loads its kernel from the cache. nn adds its own kernels with
``nn.warmup.warmup()``, which calls this one.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fpsim.catalog import BF16, FP16
from fpsim.formats import Format
from fpsim.monitor import monitor

# float32 input to this format goes through the float64 carrier (it reaches below float32's
# normal range), so one small call covers the float64 detour too.
_WIDE = Format("e8m7b140", 8, 7, bias=140)


def _round_calls() -> list[tuple[str, Callable[[], object]]]:
    from fpsim.quantize import round as fpsim_round
    from fpsim.rounding import RoundingMode

    x32 = np.linspace(-70000, 70000, 101, dtype=np.float32)
    calls: list[tuple[str, Callable[[], object]]] = []
    for counting in (False, True):
        for x in (x32, x32.astype(np.float64)):
            label = f"round {x.dtype}{' monitored' if counting else ''}"

            def every_mode(x: np.ndarray = x, counting: bool = counting) -> None:
                for mode in RoundingMode:
                    for fmt in (FP16, BF16):
                        if counting:
                            with monitor():
                                fpsim_round(x, fmt, mode, rng=0)
                        else:
                            fpsim_round(x, fmt, mode, rng=0)

            calls.append((label, every_mode))
    calls.append(("round via float64", lambda: fpsim_round(x32, _WIDE)))
    return calls


def _accumulate_calls() -> list[tuple[str, Callable[[], object]]]:
    from fpsim.emulated import array, matmul
    from fpsim.emulated import sum as fpsim_sum

    a = array(np.ones((4, 4)), FP16)
    return [
        ("sum", lambda: fpsim_sum(a, accumulate=FP16, order="pairwise")),
        ("matmul", lambda: matmul(a, a, accumulate=FP16)),
        ("accumulator model", lambda: matmul(a, a, accumulate="hopper_fp8_promote128")),
    ]


def _mx_calls() -> list[tuple[str, Callable[[], object]]]:
    from fpsim import mx

    x = np.linspace(-500, 500, 96, dtype=np.float32).reshape(3, 32)

    def counted() -> None:
        with monitor():
            mx.quantize(x, "mxfp8_e4m3")

    partial = np.ascontiguousarray(x[:, :24])  # rows of a whole block and a half of NVFP4's
    return [("mx quantize", lambda: mx.quantize(x, "mxfp8_e4m3")),
            ("mx quantize monitored", counted),
            ("mx quantize stochastic", lambda: mx.quantize(x, "mxfp8_e4m3", mode="stochastic",
                                                           rng=0)),
            ("nvfp4 quantize", lambda: mx.quantize(x, "nvfp4")),
            ("nvfp4 quantize stochastic", lambda: mx.quantize(x, "nvfp4", mode="stochastic",
                                                              rng=0)),
            ("nvfp4 quantize, partial blocks", lambda: mx.quantize(partial, "nvfp4")),
            ("mx quantize, general kernel", lambda: mx.quantize(x, "mxfp8_e4m3",
                                                                mode="toward_zero")),
            ("nvfp4 quantize float64", lambda: mx.quantize(x.astype(np.float64), "nvfp4")),
            ("mx encode", lambda: mx.encode(x, "mxfp4_e2m1")),
            ("nvfp4 encode", lambda: mx.encode(x, "nvfp4")),
            ("nvfp4 encode, partial blocks", lambda: mx.encode(partial, "nvfp4")),
            ("mx decode", lambda: mx.decode(*mx.encode(x, "mxfp4_e2m1"), "mxfp4_e2m1"))]


def tasks() -> list[tuple[str, Callable[[], object]]]:
    """(label, call) for every kind of call that needs its own compiled kernel."""
    return _round_calls() + _accumulate_calls() + _mx_calls()


def run_tasks(calls: list[tuple[str, Callable[[], object]]], progress: bool) -> None:
    """Run each call, with a tqdm bar when ``progress``; kernels compile on the calling thread
    (fpsim.kernels.lazy.eager_compiles), never in the background behind a numpy answer."""
    from fpsim.kernels.lazy import eager_compiles

    if not progress:
        with eager_compiles():
            for _, call in calls:
                call()
        return
    from tqdm.auto import tqdm

    with eager_compiles(), tqdm(total=len(calls), desc="fpsim warmup", unit="kernel") as bar:
        for label, call in calls:
            bar.set_postfix_str(label)
            call()
            bar.update()


def warmup(progress: bool = True) -> None:
    """Compile every fpsim kernel the tutorials use (each mode, float32 and float64 carriers,
    with and without a monitor, accumulation, MX block quantization), or load it from numba's
    cache; ``progress`` shows a tqdm bar."""
    run_tasks(tasks(), progress)
