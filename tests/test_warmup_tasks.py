"""fpsim.warmup's task list covers every block kernel fpsim.mx calls (and the MX kernel with and
without a monitor)."""

from __future__ import annotations

import importlib
import subprocess
import sys

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


_CHECK = """
import importlib, sys
from numba.core.registry import CPUDispatcher
warmup = importlib.import_module("fpsim.warmup")
for label, call in warmup.tasks():
    if label.startswith(("mx", "nvfp4")):
        call()
missing = []
for name in ("mx", "mx_decode", "mx_general", "mx_nvfp4", "mx_stochastic"):
    module = importlib.import_module("fpsim.kernels." + name)
    kernels = [k for k, obj in vars(module).items() if isinstance(obj, CPUDispatcher)
               and obj.targetoptions.get("nogil") and obj.__module__ == module.__name__]
    assert kernels, name
    missing += [name + "." + k for k in kernels if not getattr(module, k).signatures]
print(" ".join(missing))
"""


def test_running_the_warmup_tasks_compiles_every_block_kernel():
    # every kernel fpsim.mx calls (a nogil dispatcher of the block kernel modules; the inline
    # helpers are never called on their own) has a compiled signature once the block tasks
    # ran, in a fresh interpreter (here, other tests may have compiled them already)
    out = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == [], f"not compiled by fpsim.warmup's tasks: {out}"
