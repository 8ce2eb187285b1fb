"""Autocast per device (issue 25) and per thread (issue 26): ``autocast("cpu")`` runs the ops
PyTorch's CPU autocast runs, in the formats it returns; ``autocast("cuda")`` follows CUDA's
lists. Oracle: torch 2.13 CPU (the output dtype, and the values to a bfloat16 ulp where torch's
vectorised exp may differ from numpy's in the last fp32 bit before the rounding)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import nn
from nn import functions as F
from nn.precision import autocast as AUTOCAST

torch = pytest.importorskip("torch")

X = np.random.default_rng(0).uniform(0.5, 1.5, size=(3, 8)).astype(np.float32)
XB = torch.tensor(X).bfloat16()  # the bfloat16 values both sides start from

CPU_OPS = [
    ("softmax", lambda t: F.softmax(t), lambda t: t.softmax(-1)),
    ("log_softmax", lambda t: F.log_softmax(t), lambda t: t.log_softmax(-1)),
    ("exp", F.exp, torch.exp),
    ("log", F.log, torch.log),
    ("pow", lambda t: t ** 2.0, lambda t: t.pow(2)),
    ("sum", lambda t: t.sum(), torch.sum),
    ("mean", lambda t: t.mean(), torch.mean),
    ("max", lambda t: t.max(), torch.max),
    ("matmul", lambda t: t @ t.T, lambda t: t @ t.T),
]


@pytest.mark.parametrize("name,mine,theirs", CPU_OPS, ids=[o[0] for o in CPU_OPS])
def test_cpu_autocast_returns_what_torch_cpu_returns(name, mine, theirs):
    x = nn.Tensor(XB.float().numpy(), fmt="bfloat16")
    with nn.autocast("cpu"):
        out = mine(x)
    with torch.autocast("cpu"):
        want = theirs(XB)
    assert want.dtype == torch.bfloat16 and out.dtype == "bfloat16", name
    np.testing.assert_allclose(out.numpy(), want.float().numpy(), rtol=2 ** -8, atol=0)


def test_cpu_autocast_keeps_the_cross_entropy_in_fp32_as_torch_cpu():
    x = nn.Tensor(XB.float().numpy(), fmt="bfloat16")
    labels = np.array([0, 1, 2])
    with nn.autocast("cpu"):
        loss = nn.CrossEntropyLoss()(x, labels)
    with torch.autocast("cpu"):
        want = torch.nn.functional.cross_entropy(XB, torch.tensor(labels))
    assert want.dtype == torch.float32 and loss.dtype == "float32"
    np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-6)


def test_a_cpu_autocast_reduction_is_the_fp32_result_rounded_once():
    x = nn.Tensor(X, fmt="bfloat16")
    with nn.autocast("cpu"):
        out = x.sum()
    exact = x.numpy().astype(np.float64).sum()  # 24 bfloat16 values: exact in fp32 too
    assert out.item() == float(torch.tensor(exact, dtype=torch.float32).bfloat16().float())


def test_cuda_autocast_keeps_the_mean_in_the_input_format_and_sums_in_fp32():
    """CUDA's fp32 list has sum but not mean."""
    x = nn.Tensor(X, fmt="float16")
    with nn.autocast("cuda"):
        assert x.sum().dtype == "float32" and x.mean().dtype == "float16"
        assert F.softmax(x).dtype == "float32" and (x @ x.T).dtype == "float16"


def test_the_default_dtype_is_torchs_per_device():
    assert nn.autocast("cpu").fast_dtype.name == "bfloat16"
    assert nn.autocast("cuda").fast_dtype.name == "float16"
    assert str(torch.get_autocast_dtype("cpu")) == "torch.bfloat16"


def test_help_lists_per_device_the_low_and_fp32_ops_from_the_table():
    listed: dict[tuple[str, str], set[str]] = {}
    device = rule = ""
    for line in nn.autocast.__doc__.splitlines():  # "device_type=", "  rule: ...:", "    ops"
        if line.startswith("    device_type="):
            device = line.split("'")[1]
        elif line.startswith("      ") and not line.startswith("        ") and device:
            rule = line.split(":")[0].strip()
        elif line.startswith("        ") and device:
            listed.setdefault((device, rule), set()).update(
                n.strip() for n in line.split(",") if n.strip())
    for device, table in AUTOCAST.CAST_POLICY.items():
        for rule in (AUTOCAST.LOWER, AUTOCAST.FP32):
            want = {op for op, r in table.items() if r == rule}
            assert listed[device, rule] == want, (device, rule)


def test_an_exit_from_a_foreign_thread_raises_and_leaves_the_owner_on():
    ctx = nn.autocast("cpu", dtype="float16")
    errors: list[BaseException] = []

    def foreign_exit() -> None:
        try:
            ctx.__exit__(None, None, None)
        except RuntimeError as e:
            errors.append(e)

    with ctx:
        t = threading.Thread(target=foreign_exit)
        t.start()
        t.join()
        assert AUTOCAST.active_format() is not None  # still on in the owner
    assert AUTOCAST.active_format() is None  # the owner's own exit restored it
    assert len(errors) == 1 and "exited in thread" in str(errors[0])
    assert "per thread" in str(errors[0])


def test_one_autocast_object_entered_in_two_threads_exits_each_its_own():
    ctx = nn.autocast("cpu", dtype="float16")
    seen: list[object] = []
    entered, release = threading.Event(), threading.Event()

    def other() -> None:
        with ctx:
            entered.set()
            release.wait(5)
            seen.append(AUTOCAST.active_format())
        seen.append(AUTOCAST.active_format())

    t = threading.Thread(target=other)
    with ctx:
        t.start()
        entered.wait(5)
    assert AUTOCAST.active_format() is None
    release.set()
    t.join()
    assert [None if s is None else s.name for s in seen] == ["float16", None]
