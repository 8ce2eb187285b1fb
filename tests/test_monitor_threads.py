"""Monitors and rounding state are per thread: another thread's roundings are not counted here,
and fpsim.round from several Python threads at once gives the serial results."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import fpsim


def _round_in_thread(site: str) -> None:
    t = threading.Thread(target=fpsim.round, args=(np.float32([1e-9, 1e5]), "fp16"),
                         kwargs={"site": site})
    t.start()
    t.join()


def test_a_round_in_another_thread_is_not_counted_by_this_threads_monitor():
    with fpsim.monitor() as m:
        _round_in_thread("other")
        fpsim.round(np.float32([1e-9]), "fp16", site="here")
    assert "other" not in m.counts
    assert m.counts["here"]["underflow"] == 1


def test_a_monitor_started_in_another_thread_does_not_count_this_threads_roundings():
    started, done = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def watch() -> None:
        with fpsim.monitor() as m:
            started.set()
            done.wait(10)
            seen["counts"] = dict(m.counts)

    t = threading.Thread(target=watch)
    t.start()
    started.wait(10)
    fpsim.round(np.float32([1e5]), "fp16", site="main")
    done.set()
    t.join()
    assert seen["counts"] == {}


def test_monitors_in_two_threads_each_count_only_their_own_roundings():
    barrier = threading.Barrier(2)
    results: dict[str, dict[str, dict[str, int]]] = {}

    def work(site: str, n: int) -> None:
        with fpsim.monitor() as m:
            barrier.wait(10)
            for _ in range(20):
                fpsim.round(np.full(n, 1e-9, np.float32), "fp16", site=site)
            barrier.wait(10)
        results[site] = m.counts

    threads = [threading.Thread(target=work, args=(s, n)) for s, n in (("a", 3), ("b", 5))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(results["a"]) == {"a"} and set(results["b"]) == {"b"}
    assert results["a"]["a"]["underflow"] == 60
    assert results["b"]["b"]["underflow"] == 100


def test_nested_monitors_both_count_and_the_outer_keeps_counting_after_the_inner_ends():
    with fpsim.monitor() as outer:
        with fpsim.monitor() as inner:
            fpsim.round(np.float32([1e5]), "fp16", site="s")
        fpsim.round(np.float32([1e5]), "fp16", site="s")
    assert inner.counts["s"]["overflow"] == 1
    assert outer.counts["s"]["overflow"] == 2
    assert not outer.active and not inner.active


def test_start_and_stop_count_between_them_and_not_after():
    m = fpsim.monitor().start()
    assert m.active and m.start() is m  # idempotent
    fpsim.round(np.float32([1e-9]), "fp16", site="s")
    m.stop()
    fpsim.round(np.float32([1e-9]), "fp16", site="s")
    assert not m.active and m.stop() is m
    assert m.counts["s"]["underflow"] == 1


def test_stopping_an_outer_monitor_first_leaves_the_inner_one_counting():
    outer = fpsim.monitor().start()
    inner = fpsim.monitor().start()
    outer.stop()
    fpsim.round(np.float32([1e5]), "fp16", site="s")
    inner.stop()
    assert "s" not in outer.counts and inner.counts["s"]["overflow"] == 1


def test_round_from_four_threads_at_once_gives_the_serial_results():
    rng = np.random.default_rng(7)
    inputs = [rng.standard_normal(2**17).astype(np.float32) * 10.0 ** rng.integers(-6, 6)
              for _ in range(8)]
    jobs = [(x, fmt, mode) for x in inputs
            for fmt, mode in (("fp16", "nearest_even"), ("e4m3fn", "toward_zero"),
                              ("bf16", "stochastic"))]

    def run(job):
        x, fmt, mode = job
        return fpsim.round(x, fmt, mode, rng=5)

    serial = [run(j) for j in jobs]
    with ThreadPoolExecutor(4) as pool:
        for _ in range(3):
            threaded = list(pool.map(run, jobs))
            for a, b in zip(serial, threaded, strict=True):
                np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def test_counting_in_carries_this_threads_monitors_to_another_thread_and_only_inside_it():
    """fpsim.monitor.counting_in(active_monitors()) makes a thread's roundings count in the
    monitors captured here (fpsim.torch's backward passes on torch's CUDA thread); after the
    block the thread counts in none of them again."""
    from fpsim.monitor import active_monitors, counting_in

    def work(monitors: tuple) -> None:
        with counting_in(monitors):
            fpsim.round(np.float32([1e-9, 1e5, 0.1]), "fp16", site="carried")
        fpsim.round(np.float32([1e-9]), "fp16", site="after")

    with fpsim.monitor() as m:
        t = threading.Thread(target=work, args=(active_monitors(),))
        t.start()
        t.join()
    assert m.counts["carried"]["elements"] == 3
    assert (m.counts["carried"]["underflow"], m.counts["carried"]["overflow"]) == (1, 1)
    assert "after" not in m.counts
