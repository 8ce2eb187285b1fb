"""One rank of tests/torch/test_torch_ddp.py: trains an emulated model under
DistributedDataParallel (gloo, CPU) and saves its parameters.

    python ddp_worker.py RANK WORLD_SIZE PORT OUT_DIR POLICY[,POLICY...]

A policy may end in ":per_shard" (a per-tensor fp8 recipe with reduce_amax=False); the saved
file then holds each tensor's scale and amax history too.
"""

from __future__ import annotations

import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

import fpsim
import fpsim.torch as ft


def main(rank: int, world: int, port: int, out_dir: str, policies: str) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=timedelta(seconds=60))
    for policy in policies.split(","):
        train(rank, out_dir, policy)
    dist.barrier()
    dist.destroy_process_group()


def train(rank: int, out_dir: str, policy: str) -> None:
    torch.manual_seed(rank)  # different initial weights: DDP broadcasts rank 0's
    model = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(),
                                torch.nn.Linear(32, 5))
    name, _, option = policy.partition(":")
    chosen = ft.get_policy(name, reduce_amax=False) if option == "per_shard" else name
    ddp = DistributedDataParallel(ft.emulate(model, chosen))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    data = torch.Generator().manual_seed(100 + rank)  # each rank its own batches
    with fpsim.monitor() as m:
        for _ in range(6):
            x = torch.randn(16, 12, generator=data)
            y = torch.randint(0, 5, (16,), generator=data)
            opt.zero_grad()
            scaler.scale(F.cross_entropy(ddp(x), y)).backward()
            scaler.step(opt)
            scaler.update()
    site = "0/linear/input"  # block recipes count their operands in Monitor.blocks
    rounded = (m.counts.get(site) or m.blocks[site])["elements"]
    states = {n: (s.scale, s.amax_history.tolist())
              for n, s in model.fpsim_emulation.states.items()}
    torch.save({"params": [p.detach() for p in model.parameters()], "rounded": rounded,
                "states": states}, f"{out_dir}/{policy}_rank{rank}.pt")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
