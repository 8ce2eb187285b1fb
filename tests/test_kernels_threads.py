"""The kernels' threading: fork-safe, thread-safe, and every rounding mode has a kernel entry."""

from __future__ import annotations

import multiprocessing
import threading
import tracemalloc

import numpy as np
import pytest

import fpsim
from fpsim import _kernels
from fpsim.kernels import lazy
from fpsim.rounding import RoundingMode

N = 3 * _kernels.PARALLEL_MIN + 11  # large enough to be split over the thread pool


def _data(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(N) * 10.0 ** rng.integers(-8, 6, N)).astype(np.float32)


def _serial_fp16(x: np.ndarray, mode: str = "nearest_even") -> np.ndarray:
    """The oracle: one block on the calling thread (parallel=False) for nearest-even, and
    for other modes small pieces below PARALLEL_MIN, each rounded on the calling thread."""
    if mode == "nearest_even":
        return fpsim.quantize.round_array(x, "fp16", parallel=False)
    step = _kernels.PARALLEL_MIN // 2
    return np.concatenate([fpsim.round(x[i:i + step], "fp16", mode) for i in range(0, N, step)])


def test_every_rounding_mode_has_a_kernel():
    assert set(_kernels.MODE_KERNELS) == set(RoundingMode)
    switches = list(_kernels.MODE_KERNELS.values())
    assert len(set(switches)) == len(switches), "two modes share one kernel entry"


def test_a_mode_without_a_kernel_entry_raises():
    with pytest.raises(ValueError, match="has no kernel entry"):
        _kernels.mode_bits("round_half_down")  # type: ignore[arg-type]


def _round_in_child(x: np.ndarray) -> np.ndarray:
    return fpsim.round(x, "fp16")


def test_fork_start_pool_after_a_parallel_call_rounds_correctly():
    x = _data()
    want = fpsim.round(x, "fp16")  # the parent uses the threaded kernel first
    with np.errstate(over="ignore"):
        assert np.array_equal(want, x.astype(np.float16).astype(np.float32))
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        result = pool.map_async(_round_in_child, [x, x[::-1].copy()])
        got = result.get(timeout=120)  # a hang fails here instead of hanging the run
    assert np.array_equal(got[0], want)
    assert np.array_equal(got[1], want[::-1])


@pytest.mark.parametrize("mode", ["nearest_even", "toward_zero", "stochastic"])
def test_four_threads_rounding_at_once_give_the_serial_results(mode):
    inputs = [_data(seed) for seed in range(4)]
    want = [fpsim.round(x, "fp16", mode, rng=7) if mode == "stochastic" else _serial_fp16(x, mode)
            for x in inputs]
    got: list[np.ndarray | None] = [None] * 4
    barrier = threading.Barrier(4)

    def work(k: int) -> None:
        barrier.wait()
        for _ in range(3):
            got[k] = fpsim.round(inputs[k], "fp16", mode, rng=7)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for k in range(4):
        assert got[k] is not None and np.array_equal(got[k].view(np.int32), want[k].view(np.int32))


def test_stochastic_rounding_does_not_depend_on_how_the_array_is_split():
    x = _data(3)
    whole = fpsim.round(x, "bf16", "stochastic", rng=11)
    wide = fpsim.round(x, fpsim.Format("e8m7b140", 8, 7, bias=140), "stochastic", rng=11)
    step = 1000  # pieces on the calling thread, each from its own offset of the same stream
    gen = np.random.default_rng(11)
    seed = int(gen.integers(0, 2**63, dtype=np.int64))
    c = _kernels.carrier_constants(np.dtype(np.float32))
    f = fpsim.quantize.format_constants(fpsim.BF16, np.dtype(np.float32), True, "inf")
    m = _kernels.mode_bits(RoundingMode.STOCHASTIC)
    pieces = np.empty_like(x)
    for lo in range(0, N, step):
        hi = min(N, lo + step)
        src = x[lo:hi].view(np.int32)
        _kernels.round_range(src, pieces[lo:hi].view(np.int32), 0, hi - lo, m,
                             _kernels.stream_seed(seed, lo), c, f)
    assert np.array_equal(whole, pieces)
    assert np.all(np.isfinite(wide) == np.isfinite(x))


@pytest.mark.parametrize("with_out", [False, True])
def test_float32_through_the_float64_carrier_allocates_at_most_the_result(with_out):
    """The float64 detour (a format reaching below float32's normal range) converts chunk by
    chunk: the new memory is the result (none with out=) plus one small float64 chunk, so the
    call stays within 2x the input's memory (1x with out=)."""
    fmt = fpsim.Format("e8m7b140", 8, 7, bias=140)
    x = np.random.default_rng(1).standard_normal(1 << 21).astype(np.float32)
    want = np.array([fpsim.round_scalar(float(v), fmt) for v in x[:2000]], dtype=np.float32)
    out = np.empty_like(x) if with_out else None
    fpsim.round(x[:10], fmt)  # the kernel loading (numpy answers meanwhile, in larger blocks)
    lazy.wait()  # ... and loaded before measuring: the law is about the kernel's path
    tracemalloc.start()
    got = fpsim.round(x, fmt, out=out)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    allowed = (0 if with_out else x.nbytes) + 0.1 * x.nbytes
    assert peak <= allowed, f"peak {peak / x.nbytes:.2f}x the input"
    assert np.array_equal(got[:2000], want)


@pytest.mark.parametrize("mode", list(RoundingMode), ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", [fpsim.FP16, fpsim.E4M3FNUZ, fpsim.E2M1FN,
                                 fpsim.BF16.replace(name="bf16_ftz", subnormals=False)], ids=str)
def test_the_one_mode_kernel_equals_the_general_kernel_bit_for_bit(mode, dtype, fmt):
    """Large arrays take SPECIALISED_RANGE[mode]; it must compute exactly what the general
    kernel (the one every small array and every test oracle comparison goes through) does:
    every code and midpoint of fmt and random bit patterns, both signs, stochastic draws too."""
    from oracle import sample_points

    rng = np.random.default_rng(11)
    itype = np.int32 if dtype == np.float32 else np.int64
    pts = sample_points(fmt, dtype)
    patterns = rng.integers(np.iinfo(itype).min, np.iinfo(itype).max, 2**16, dtype=itype)
    x = np.concatenate([pts, -pts, patterns.view(dtype)])
    c = _kernels.carrier_constants(np.dtype(dtype))
    f = fpsim.quantize.format_constants(fmt, np.dtype(dtype), fmt.subnormals, fmt.overflow)
    general, special = np.empty_like(x), np.empty_like(x)
    src = x.view(itype)
    _kernels.round_range(src, general.view(itype), 0, x.size, _kernels.mode_bits(mode), 99, c, f)
    _kernels.specialised_range(mode)(src, special.view(itype), 0, x.size, 99, c, f)
    np.testing.assert_array_equal(special.view(itype), general.view(itype))
    # and the counting kernels: the same results and the same five event counts
    counted, counted_special = np.empty_like(x), np.empty_like(x)
    want = _kernels.round_count_range(src, counted.view(itype), 0, x.size,
                                      _kernels.mode_bits(mode), 99, c, f)
    got = _kernels.specialised_range(mode, counting=True)(src, counted_special.view(itype), 0,
                                                           x.size, 99, c, f)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(counted_special.view(itype), general.view(itype))
    np.testing.assert_array_equal(counted.view(itype), general.view(itype))


def test_a_large_array_takes_the_one_mode_kernel_and_agrees_with_rounding_it_in_pieces():
    x = (np.random.default_rng(4).standard_normal(3 * _kernels.SPECIALISE_MIN) * 1e3)
    step = _kernels.SPECIALISE_MIN // 4  # small pieces take the general kernel
    for mode in ("toward_zero", "odd", "up", "nearest_away"):
        whole = fpsim.round(x, "e5m2", mode)
        pieces = np.concatenate([fpsim.round(x[i:i + step], "e5m2", mode)
                                 for i in range(0, x.size, step)])
        np.testing.assert_array_equal(whole, pieces)


def test_a_thread_count_that_is_not_a_number_is_refused_naming_the_variable():
    import os
    import subprocess
    import sys

    env = {**os.environ, "FPSIM_NUM_THREADS": "two"}
    proc = subprocess.run([sys.executable, "-c", "import fpsim"], env=env, capture_output=True,
                          text=True)
    assert proc.returncode != 0
    assert "FPSIM_NUM_THREADS must be a whole number of threads, got 'two'" in proc.stderr


@pytest.mark.parametrize("start", [0, 5, N - 3 * _kernels.PARALLEL_MIN, N - 7, N])
def test_run_from_start_covers_start_to_n_exactly_once_in_order(start):
    blocks: list[tuple[int, int]] = []
    lock = threading.Lock()

    def kernel(lo: int, hi: int) -> tuple[int, int]:
        with lock:
            blocks.append((lo, hi))
        return lo, hi

    results = _kernels.run(kernel, N, (), (), start=start)
    assert results == sorted(blocks)  # (in block order)
    covered = [i for lo, hi in results for i in range(lo, hi)]
    assert covered == list(range(start, N))
    assert len(results) == (_kernels.get_num_threads()
                            if N - start >= _kernels.PARALLEL_MIN else 1)


def test_each_modes_one_mode_kernel_has_a_name_of_its_own():
    """numba names a compiled function's symbols from its qualified name and a per-process
    counter; the modes' kernels are closures of one code, so without a name each, two modes
    compiled in two processes could share symbol names and, loaded together from the cache,
    one kernel found no Environment ("'descr' is NULL" on return; seen after a parallel test
    run). Each mode's kernel, counting or not, has its own name and its own cache files."""
    from fpsim.kernels.general import SPECIALISED_COUNT_RANGE, SPECIALISED_RANGE

    kernels = [*SPECIALISED_RANGE.values(), *SPECIALISED_COUNT_RANGE.values()]
    names = [k.py_func.__qualname__ for k in kernels]
    assert len(set(names)) == len(names) == 2 * len(SPECIALISED_RANGE)
    assert all(k.py_func.__name__ == k.py_func.__qualname__ for k in kernels)
