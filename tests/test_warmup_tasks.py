"""fpsim.warmup's task list covers the MX block kernel (with and without a monitor)."""

from __future__ import annotations

import importlib

import numpy as np

import fpsim

warmup = importlib.import_module("fpsim.warmup")  # (fpsim.warmup is also the function)


def test_warmup_tasks_include_the_mx_kernel_with_and_without_a_monitor():
    labels = [label for label, _ in warmup.tasks()]
    assert "mx quantize" in labels and "mx quantize monitored" in labels


def test_warmup_mx_calls_run_the_fast_kernel_path():
    calls = dict(warmup.tasks())
    calls["mx quantize"]()
    with fpsim.monitor() as m:
        calls["mx quantize monitored"]()  # an inner monitor: the outer one counts too
    assert m.blocks["mx"]["blocks"] == 3 and m.blocks["mx"]["elements"] == 96


def test_warmup_tasks_cover_the_general_block_kernel_and_the_accumulator_models():
    labels = [label for label, _ in warmup.tasks()]
    assert {"nvfp4 quantize", "mx encode", "accumulator model"} <= set(labels)


def test_warmup_tasks_cover_the_fused_stochastic_block_kernel():
    assert "mx quantize stochastic" in [label for label, _ in warmup.tasks()]


def test_warmup_tasks_cover_the_fused_encode_and_decode_kernels():
    calls = dict(warmup.tasks())
    assert {"mx encode", "nvfp4 encode", "mx decode"} <= set(calls)
    decoded = calls["mx decode"]()
    assert decoded.shape == (3, 32) and decoded.dtype == np.float32
