"""torch.distributed: two CPU processes (gloo, 127.0.0.1) train an emulated model under
DistributedDataParallel and end with bit-identical parameters."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.distributed.is_available():  # pragma: no cover - builds without distributed
    pytest.skip("this torch build has no torch.distributed", allow_module_level=True)

WORKER = os.path.join(os.path.dirname(__file__), "ddp_worker.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


POLICIES = ("mixed_float16", "mxfp8", "fp8_hybrid_delayed", "fp8_hybrid_delayed:per_shard")


@pytest.mark.xdist_group("ddp")
def test_ddp_ranks_train_an_emulated_model_to_identical_parameters(tmp_path):
    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, WORKER, str(rank), "2", str(port),
                               str(tmp_path), ",".join(POLICIES)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for rank in range(2)]
    try:
        outs = [p.communicate(timeout=240)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, out in zip(procs, outs, strict=True):
        assert p.returncode == 0, out
    torch.manual_seed(0)  # rank 0's initial weights (DDP broadcasts them)
    first = torch.nn.Linear(12, 32)
    for policy in POLICIES:
        r0, r1 = (torch.load(tmp_path / f"{policy}_rank{r}.pt") for r in range(2))
        assert r0["rounded"] == r1["rounded"] == 6 * 16 * 12  # the products ran emulated
        for a, b in zip(r0["params"], r1["params"], strict=True):
            assert torch.equal(a, b)
        assert not torch.equal(first.weight, r0["params"][0])  # training moved them
    # per-tensor fp8: all-reduced amaxes give every rank the same scales and histories; per
    # shard, the activations' (each rank its own batches) differ, the weights' agree
    synced = [torch.load(tmp_path / f"fp8_hybrid_delayed_rank{r}.pt")["states"] for r in (0, 1)]
    shard = [torch.load(tmp_path / f"fp8_hybrid_delayed:per_shard_rank{r}.pt")["states"]
             for r in (0, 1)]
    assert synced[0] == synced[1] and len(synced[0]) == 6  # 2 linears x input, weight, grad
    assert shard[0]["0/linear/input"] != shard[1]["0/linear/input"]
    assert shard[0]["0/linear/weight"] == shard[1]["0/linear/weight"]
    assert shard[0]["0/linear/input"][1] != synced[0]["0/linear/input"][1]
