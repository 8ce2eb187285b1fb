"""``fpsim compare --backend torch --what-if``: nn.experiments.replay's what-if replay on the
torch LM of ``nn.experiments.torch_models`` (``what_if``): one float32 trajectory, and at each
replayed step the same weights, batch and optimizer state under each alternative of ``WHAT_IF``,
measured against the float32 replay of the same step by ``nn.experiments.replay.compare``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nn.datasets.text import VOCABULARY
from nn.experiments.lm import LMConfig, data_for
from nn.experiments.replay import START_SCALE, Replay, StepReplay, compare
from nn.experiments.torch_backend import make_optimizer
from nn.experiments.torch_models import torch_lm

# alternative -> (policy, loss scaled): every one keeps fp32 master weights (emulate never
# changes the parameters), so "swamped" (updates lost to a narrow stored weight) reads 0
WHAT_IF: dict[str, tuple[str, bool]] = {
    "float32": ("float32", False),
    "unscaled fp16": ("mixed_float16", False),
    "scaled fp16": ("mixed_float16", True),
    "mixed_bfloat16": ("mixed_bfloat16", False),
}


def _gradients(model: Any, xb: Any, yb: Any, scale: float) -> list[np.ndarray]:
    """The parameters' gradients of the loss times ``scale``, divided by it in float64."""
    import torch.nn.functional as F

    model.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(xb).reshape(-1, VOCABULARY), yb.reshape(-1))
    (loss * scale).backward()
    return [p.grad.detach().cpu().double().numpy() / scale for p in model.parameters()]


def _applied(reference: Any, optimizer: Any, grads: list[np.ndarray]) -> list[np.ndarray]:
    """The update ``optimizer`` (a copy of it, state and all) applies to a copy of
    ``reference``'s float32 weights for ``grads``; the reference and its optimizer are left
    as they are."""
    import copy

    import torch

    scratch = copy.deepcopy(reference)
    opt = type(optimizer)(scratch.parameters(), **optimizer.defaults)
    opt.load_state_dict(copy.deepcopy(optimizer.state_dict()))
    before = [p.detach().double().clone() for p in scratch.parameters()]
    for p, g in zip(scratch.parameters(), grads, strict=True):
        p.grad = torch.from_numpy(g).to(p.dtype).to(p.device)
    opt.step()
    return [(p.detach().double() - w).cpu().numpy()
            for p, w in zip(scratch.parameters(), before, strict=True)]


def what_if(config: LMConfig, steps: list[int], device: str = "cpu",
            progress: Callable[[str], None] | None = None) -> Any:
    """nn.experiments.replay's what-if on the torch LM: train it in float32 and, at each step
    of ``steps`` (before its update), replay that step under each of ``WHAT_IF`` from the same
    weights, batch and optimizer state; a scaled alternative starts at 2^15 and halves while
    its gradients are not finite. Returns an ``nn.experiments.replay.Replay``."""
    import torch
    import torch.nn.functional as F

    import fpsim.torch as ft

    wanted = sorted(set(steps))
    if not wanted or wanted[0] < 0 or wanted[-1] >= config.steps:
        raise ValueError(f"what_if: steps must lie in 0..{config.steps - 1}, got {steps}")
    (x, y), _ = data_for(config)
    b = config.batch_size
    reference = torch_lm(config).to(device)
    optimizer = make_optimizer(config, reference)
    models = {name: ft.emulate(torch_lm(config).to(device), policy)
              for name, (policy, _) in WHAT_IF.items()}
    layers = [name.rpartition(".")[0] for name, _ in reference.named_parameters()]
    found = Replay(config, wanted)

    def batch(step: int) -> tuple[Any, Any]:
        return (torch.from_numpy(x[step * b:(step + 1) * b]).to(device),
                torch.from_numpy(y[step * b:(step + 1) * b]).to(device))

    done = 0
    for step in wanted:
        for s in range(done, step):  # train the reference up to this step
            xb, yb = batch(s)
            optimizer.zero_grad()
            F.cross_entropy(reference(xb).reshape(-1, VOCABULARY), yb.reshape(-1)).backward()
            optimizer.step()
        done = step
        xb, yb = batch(step)
        g_ref = _gradients(reference, xb, yb, 1.0)
        a_ref = _applied(reference, optimizer, g_ref)
        for name, (_, scaled) in WHAT_IF.items():
            model = models[name]
            model.load_state_dict(reference.state_dict())
            scale = START_SCALE if scaled else 1.0
            grads = _gradients(model, xb, yb, scale)
            while scaled and scale > 1 and not all(np.all(np.isfinite(g)) for g in grads):
                scale /= 2
                grads = _gradients(model, xb, yb, scale)
            a_alt = _applied(reference, optimizer, grads)
            per_layer = {}
            for layer in dict.fromkeys(layers):
                idx = [i for i, n in enumerate(layers) if n == layer]
                per_layer[layer] = compare(*(np.concatenate([arrays[i].ravel() for i in idx])
                                             for arrays in (g_ref, grads, a_ref, a_alt, a_alt)))
            total = compare(*(np.concatenate([a.ravel() for a in arrays])
                              for arrays in (g_ref, grads, a_ref, a_alt, a_alt)))
            found.replays.append(StepReplay(name, step, scale, per_layer, total))
        if progress is not None:
            progress(f"  step {step}: replayed under {len(WHAT_IF)} alternatives")
    return found
