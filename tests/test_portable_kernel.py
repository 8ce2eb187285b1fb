"""The numpy stand-in (fpsim.kernels.portable) computes what the numba kernels compute, bit for
bit, and fpsim.round answers through it while a kernel compiles (fpsim.kernels.lazy)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from oracle import sample_points

import fpsim
from fpsim import _kernels
from fpsim.kernels import lazy, portable
from fpsim.rounding import RoundingMode

_FORMATS = [
    fpsim.FP16, fpsim.BF16, fpsim.E4M3FN, fpsim.E5M2, fpsim.E4M3FNUZ, fpsim.E2M1FN,
    fpsim.BF16.replace(name="bf16_ftz", subnormals=False),
    *[f for f in fpsim.P3109_FORMATS[:3]],
]


def _inputs(fmt: fpsim.Format, dtype: type) -> np.ndarray:
    """Every code, midpoint and neighbour of fmt (both signs, specials, beyond max) and random
    bit patterns of the carrier (float32 patterns cover every carrier exponent)."""
    itype = np.int32 if dtype == np.float32 else np.int64
    rng = np.random.default_rng(5)
    patterns = rng.integers(np.iinfo(itype).min, np.iinfo(itype).max, 2**15, dtype=itype)
    return np.concatenate([sample_points(fmt, dtype), patterns.view(dtype)])


@pytest.mark.parametrize("mode", list(RoundingMode), ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", _FORMATS, ids=str)
def test_the_numpy_stand_in_equals_the_general_kernel_bit_for_bit_with_the_same_counts(
        mode, dtype, fmt):
    itype = np.int32 if dtype == np.float32 else np.int64
    x = _inputs(fmt, dtype)
    c = _kernels.carrier_constants(np.dtype(dtype))
    m = _kernels.mode_bits(mode)
    for policy in ("inf", "saturate", "nan"):
        if policy == "inf" and not fmt.inf:
            continue
        f = fpsim.quantize.format_constants(fmt, np.dtype(dtype), fmt.subnormals, policy)
        src = x.view(itype)
        want, got = np.empty_like(src), np.empty_like(src)
        # an odd range [3, n - 2): the stochastic stream is indexed by the array position
        want_counts = _kernels.round_count_range(src, want, 3, src.size - 2, m, -77, c, f)
        got_counts = portable.round_count_range(src, got, 3, src.size - 2, m, -77, c, f)
        np.testing.assert_array_equal(got[3:-2], want[3:-2])
        np.testing.assert_array_equal(got_counts, want_counts)
        plain = np.empty_like(src)
        portable.round_range(src, plain, 3, src.size - 2, m, -77, c, f)
        np.testing.assert_array_equal(plain[3:-2], want[3:-2])


def test_the_numpy_stand_in_rounds_in_place():
    x = np.linspace(-7e4, 7e4, 1001, dtype=np.float32)
    want = fpsim.round(x, "fp16", "up")
    bits = x.copy().view(np.int32)
    c = _kernels.carrier_constants(np.dtype(np.float32))
    f = fpsim.quantize.format_constants(fpsim.FP16, np.dtype(np.float32), True, "inf")
    portable.round_range(bits, bits, 0, bits.size, _kernels.mode_bits("up"), 0, c, f)
    np.testing.assert_array_equal(bits.view(np.float32), want)


def test_the_numpy_stand_in_agrees_with_the_spec_round_scalar():
    x = np.float64([1.0 + 2.0**-11, -(1.0 + 3 * 2.0**-11), 2.0**-25, 65519.0, -1e-9, 3.3])
    c = _kernels.carrier_constants(np.dtype(np.float64))
    f = fpsim.quantize.format_constants(fpsim.FP16, np.dtype(np.float64), True, "inf")
    for mode in RoundingMode:
        if mode is RoundingMode.STOCHASTIC:
            continue
        got = np.empty_like(x)
        portable.round_range(x.view(np.int64), got.view(np.int64), 0, x.size,
                             _kernels.mode_bits(mode), 0, c, f)
        want = [fpsim.round_scalar(float(v), "fp16", mode) for v in x]
        np.testing.assert_array_equal(got, want)


@pytest.fixture
def nothing_compiled(monkeypatch):
    """lazy's view of a fresh process: no kernel ready and compiles that never finish."""
    started: list[object] = []
    lazy.wait()  # (a compile started before must not finish into the patched tables)
    monkeypatch.setattr(lazy, "_ready", set())
    monkeypatch.setattr(lazy, "_pending", {})
    monkeypatch.setattr(lazy, "_start", lambda key, kernel, args: started.append(kernel))
    return started


@pytest.mark.parametrize("mode", ["nearest_even", "toward_zero", "stochastic"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_small_array_is_answered_by_numpy_while_its_kernel_compiles(
        nothing_compiled, mode, dtype):
    x = (np.random.default_rng(2).standard_normal(5000) * 1e3).astype(dtype)
    with fpsim.monitor() as mon:
        got = fpsim.round(x, "e4m3fn", mode, rng=3)
    assert nothing_compiled, "no compile was requested"
    with lazy.eager_compiles(), fpsim.monitor() as mon_kernel:  # the numba kernels
        want = fpsim.round(x, "e4m3fn", mode, rng=3)
    np.testing.assert_array_equal(got, want)
    assert mon.summary() == mon_kernel.summary()


def test_float32_through_the_float64_carrier_is_answered_by_numpy_while_compiling(
        nothing_compiled):
    wide = fpsim.Format("e8m7b140", 8, 7, bias=140)
    x = (np.random.default_rng(2).standard_normal(3000) * 1e-38).astype(np.float32)
    got = fpsim.round(x, wide, "stochastic", rng=1)
    assert nothing_compiled
    with lazy.eager_compiles():
        want = fpsim.round(x, wide, "stochastic", rng=1)
    np.testing.assert_array_equal(got, want)


def test_a_large_array_is_answered_by_numpy_while_its_kernel_compiles(nothing_compiled):
    x = np.linspace(-7e4, 7e4, _kernels.SPECIALISE_MIN + 5, dtype=np.float32)
    got = fpsim.round(x, "fp16", "toward_zero")
    assert nothing_compiled == [_kernels.directed_f32_range(RoundingMode.TOWARD_ZERO)]
    with lazy.eager_compiles():
        want = fpsim.round(x, "fp16", "toward_zero")
    np.testing.assert_array_equal(got, want)


class StandIns(list):
    """The (lo, hi) of every numpy stand-in call; ``compile_after_first`` ends the pending
    compiles as the first piece is answered."""

    compile_after_first = False


@pytest.fixture
def stand_in_pieces(monkeypatch):
    """The numpy stand-in's calls (StandIns), compiles that finish only when waited for (or
    after the first piece, on request), and a stand-in bound of three pieces."""
    pieces = StandIns()
    started: dict[tuple, tuple] = {}

    def finish(key: tuple) -> None:
        lazy._compile(key, *started[key])

    for name in ("round_range", "round_count_range"):
        real = getattr(portable, name)

        def spy(src, dst, lo, hi, *rest, real=real):
            pieces.append((lo, hi))
            result = real(src, dst, lo, hi, *rest)
            if pieces.compile_after_first:
                for key in list(started):
                    finish(key)
            return result

        monkeypatch.setattr(portable, name, spy)
    lazy.wait()
    monkeypatch.setattr(lazy, "_ready", set())
    monkeypatch.setattr(lazy, "_pending", {})
    monkeypatch.setattr(lazy, "STAND_IN_MAX", 3 * lazy.PIECE)
    monkeypatch.setattr(lazy, "_start", lambda key, kernel, args: started.setdefault(
        key, (kernel, args)))
    monkeypatch.setattr(lazy, "_wait_for", finish)
    return pieces


_LARGE_CALLS = [
    ("float32 toward_zero", np.float32, "toward_zero", False),
    ("float64 stochastic", np.float64, "stochastic", False),
    ("float32 nearest_even, monitored", np.float32, "nearest_even", True),
    ("float32 via float64, stochastic", np.float32, "stochastic", False),
]


@pytest.mark.parametrize("what, dtype, mode, monitored", _LARGE_CALLS,
                         ids=[c[0] for c in _LARGE_CALLS])
def test_numpy_answers_at_most_stand_in_max_elements_and_the_kernel_the_rest_bit_for_bit(
        stand_in_pieces, what, dtype, mode, monitored):
    n = 5 * lazy.PIECE + 7 if "via" in what else _kernels.SPECIALISE_MIN + 7
    fmt = fpsim.Format("e8m7b140", 8, 7, bias=140) if "via" in what else fpsim.E4M3FN
    scale = 1e-38 if "via" in what else 1e3
    x = (np.random.default_rng(6).standard_normal(n) * scale).astype(dtype)
    with fpsim.monitor() as mon:
        got = fpsim.round(x, fmt, mode, rng=4) if monitored else None
    if not monitored:
        got = fpsim.round(x, fmt, mode, rng=4)
    # three pieces by numpy (each maybe split over threads)
    assert sum(hi - lo for lo, hi in stand_in_pieces) == 3 * lazy.PIECE
    stand_in_pieces.clear()
    with lazy.eager_compiles(), fpsim.monitor() as mon_kernel:
        want = fpsim.round(x, fmt, mode, rng=4) if monitored else None
    if not monitored:
        with lazy.eager_compiles():
            want = fpsim.round(x, fmt, mode, rng=4)
    assert not stand_in_pieces
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    assert mon.summary() == mon_kernel.summary()


def test_the_stand_in_hands_the_rest_to_the_kernel_as_soon_as_it_is_ready(stand_in_pieces):
    stand_in_pieces.compile_after_first = True  # (the compile ends during the first piece)
    x = (np.random.default_rng(7).standard_normal(_kernels.SPECIALISE_MIN) * 1e3)
    got = fpsim.round(x, "bf16", "stochastic", rng=9)
    assert sorted(stand_in_pieces)[0][0] == 0
    assert sum(hi - lo for lo, hi in stand_in_pieces) == lazy.PIECE  # the first piece only
    with lazy.eager_compiles():
        want = fpsim.round(x, "bf16", "stochastic", rng=9)
    np.testing.assert_array_equal(got, want)


def test_inside_eager_compiles_no_numpy_stand_in_is_used(nothing_compiled):
    with lazy.eager_compiles():
        fpsim.round(np.ones(10, dtype=np.float32), "fp16", "up")
    assert not nothing_compiled


def test_a_background_compile_makes_its_kernel_ready_and_forgets_it_as_pending():
    src = np.ones(3, dtype=np.float32)
    p = fpsim.quantize.nearest_even_f32_constants(fpsim.BF16, True, "inf")
    args = (src, src.copy(), 0, 3, p)
    key = lazy._key(_kernels.round_nearest_even_f32_range, args)
    lazy._ready.discard(key)
    assert not lazy.ready(_kernels.round_nearest_even_f32_range, args)
    lazy.wait()
    assert key in lazy._ready and key not in lazy._pending
    assert lazy.ready(_kernels.round_nearest_even_f32_range, args)


def test_float32_nearest_even_while_compiling_asks_only_for_its_fast_kernel(nothing_compiled):
    x = np.linspace(-7e4, 7e4, 999, dtype=np.float32)
    got = fpsim.round(x, "fp16")
    assert nothing_compiled == [_kernels.round_nearest_even_f32_range]
    with np.errstate(over="ignore"):  # numpy's float16 cast: the oracle, overflow to inf too
        want = x.astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(got, want)


def test_threads_rounding_large_arrays_while_the_kernel_loads_get_the_kernels_bits(
        monkeypatch):
    """Four threads at once, each on a large array, while the kernel is not yet ready in this
    process (a real background compile or cache load): numpy, handover and kernel agree."""
    lazy.wait()
    monkeypatch.setattr(lazy, "_ready", set())
    monkeypatch.setattr(lazy, "_pending", {})
    rng = np.random.default_rng(12)
    xs = [(rng.standard_normal(_kernels.SPECIALISE_MIN + k) * 1e3).astype(np.float32)
          for k in range(4)]
    got: list[np.ndarray | None] = [None] * 4

    def work(k: int) -> None:
        got[k] = fpsim.round(xs[k], "e5m2", "odd")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lazy.wait()
    with lazy.eager_compiles():
        for k in range(4):
            np.testing.assert_array_equal(got[k], fpsim.round(xs[k], "e5m2", "odd"))
