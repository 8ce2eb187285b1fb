"""Under fpsim.monitor(), fpsim.torch.round counts the same events at the same sites as
fpsim.round (the numpy path is the oracle)."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import sample_points
from strategies import DETERMINISTIC_MODES
from torch_device import DEVICE

import fpsim

torch = pytest.importorskip("torch")
import fpsim.torch as ft  # noqa: E402

FORMATS = ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn",
           "float8_e4m3fnuz", "float8_e8m0fnu", "binary8p1ue"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_monitor_counts_equal_fpsim_rounds_at_the_same_sites(fmt, dtype):
    x = sample_points(fpsim.get_format(fmt), dtype)
    t = torch.from_numpy(x).to(DEVICE)
    with fpsim.monitor() as want:
        for mode in DETERMINISTIC_MODES:
            fpsim.round(x, fmt, mode)
            fpsim.round(x, fmt, mode, site=f"layer/{mode}")
    with fpsim.monitor() as got:
        for mode in DETERMINISTIC_MODES:
            ft.round(t, fmt, mode)
            ft.round(t, fmt, mode, site=f"layer/{mode}")
    assert got.counts == want.counts
    assert got.formats == want.formats
    assert sum(got.total()[e] for e in ("overflow", "underflow", "inexact")) > 0


def test_monitor_counts_the_native_cast_path_too():
    """float32 nearest-even to fp16 takes torch's cast when nothing counts; counting takes
    the bit path and records the same counts as fpsim.round."""
    x = np.float32([1e-9, 1e5, 0.1, 3e-6, np.inf, np.nan, -0.0])
    with fpsim.monitor() as want:
        fpsim.round(x, "fp16", site="demo")
    with fpsim.monitor() as got:
        ft.round(torch.from_numpy(x).to(DEVICE), "fp16", site="demo")
    assert got.counts == want.counts
    assert got.counts["demo"]["underflow"] == 1 and got.counts["demo"]["overflow"] == 1


def test_nothing_is_counted_without_a_monitor():
    m = fpsim.monitor()
    ft.round(torch.ones(3, device=DEVICE), "e4m3fn")
    assert m.counts == {}


def test_backward_on_another_thread_counts_in_the_monitors_of_its_forward():
    """torch runs the backward of CUDA tensors on a thread of its own: a backward run on
    another thread here (where this thread's monitors are not active) counts the same
    gradient sites as one run on this thread."""
    import threading

    def counts(on_thread: bool) -> dict[str, dict[str, int]]:
        torch.manual_seed(0)
        model = ft.emulate(torch.nn.Linear(4, 3).to(DEVICE), "mixed_float16")
        x = torch.randn(5, 4).to(DEVICE)
        with fpsim.monitor() as m:
            out = model(x).sum()
            if on_thread:
                worker = threading.Thread(target=out.backward)
                worker.start()
                worker.join()
            else:
                out.backward()
        return m.counts

    here, there = counts(False), counts(True)
    assert {"linear/grad_output", "linear/grad_weight", "linear/grad_bias"} <= set(here)
    assert there == here

