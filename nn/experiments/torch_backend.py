"""``fpsim compare --backend torch``: the language-model experiments on PyTorch, emulated by
``fpsim.torch.emulate``, at a size the user chooses (``--steps``; ``--device cuda`` on a GPU).

The char LM of ``nn.experiments.lm`` as a torch module (``TorchLM``): token and position
embeddings, ``config.blocks`` ``nn.TransformerEncoderLayer`` blocks (causal, ReLU feed-forward,
post- or pre-norm as ``config.normalize_first``, LayerNorm epsilon ``config.epsilon``), a
Linear to the 128 characters. Same sizes and data as the nn model; torch's own initialisation
(from ``config.seed``), so the numbers are not nn's bit for bit, but the story is the same:
each run's products are rounded to its policy's formats, the loss is the mean over batch x
positions, dynamic loss scaling is ``torch.amp.GradScaler`` (torch's defaults: theirs).

Measured per run, as ``LMRun``: held-out loss, the last steps' training loss, the shares of
activation and weight gradients flushed to zero (ours: underflow events over rounded elements
at the ``grad_input``/``grad_a``/... and ``grad_weight``/``grad_bias`` sites of
``fpsim.monitor``), skipped steps and the final scale (GradScaler), the first non-finite step.
Swamped updates are not counted here (``LMRun.swamped_updates`` reads 0).

``SUPPORTED`` names the experiments this backend runs; any other raises ValueError naming them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import fpsim
from nn.datasets.text import VOCABULARY
from nn.experiments.lm import LMConfig, LMRun, data_for, final_loss, first_nonfinite_step
from nn.experiments.replay import START_SCALE, Replay, StepReplay, compare
from nn.experiments.result import ExperimentResult
from nn.experiments.table import EXPERIMENTS, FP32, SCALED, UNSCALED
from nn.training.history import History

_ACTIVATION_GRADS = ("grad_input", "grad_a", "grad_b", "grad_query", "grad_key", "grad_value",
                     "grad_batch1", "grad_batch2")
_WEIGHT_GRADS = ("grad_weight", "grad_bias")


@dataclass(frozen=True)
class Variant:
    """One run of an experiment: its label, its policy, whether GradScaler scales the loss."""

    label: str
    policy: str
    scaled: bool = False


# the experiments the torch backend runs: name -> the runs (labels as nn's, so the tables and
# the contrast line up); the LM experiments whose variants are policies and loss scaling
SUPPORTED: dict[str, tuple[Variant, ...]] = {
    "underflow": (Variant(FP32, "float32"), Variant(UNSCALED, "mixed_float16"),
                  Variant(SCALED, "mixed_float16", scaled=True)),
    "underflow-sgd": (Variant(FP32, "float32"), Variant(UNSCALED, "mixed_float16"),
                      Variant(SCALED, "mixed_float16", scaled=True)),
    "bf16": (Variant(FP32, "float32"), Variant("mixed_bfloat16", "mixed_bfloat16"),
             Variant(SCALED, "mixed_float16", scaled=True)),
}


def check_supported(name: str) -> None:
    """ValueError unless experiment ``name`` runs on the torch backend."""
    if name not in SUPPORTED:
        raise ValueError(f"--backend torch runs the experiments {', '.join(SUPPORTED)}; "
                         f"{name!r} runs on --backend nn only")


def torch_lm(config: LMConfig) -> Any:
    """The char LM as a torch module (float32, initialised from ``config.seed``); its forward
    takes (batch, sequence_length) character ids and gives (batch, sequence_length, 128)
    logits."""
    import torch

    tnn = torch.nn

    class TorchLM(tnn.Module):
        def __init__(self) -> None:
            super().__init__()
            d = config.embed_dim
            self.tokens = tnn.Embedding(VOCABULARY, d)
            self.positions = tnn.Embedding(config.sequence_length, d)
            self.blocks = tnn.ModuleList([
                tnn.TransformerEncoderLayer(d, config.num_heads, config.ff_dim, dropout=0.0,
                                            layer_norm_eps=config.epsilon, batch_first=True,
                                            norm_first=config.normalize_first)
                for _ in range(config.blocks)])
            self.logits = tnn.Linear(d, VOCABULARY)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            t = ids.shape[1]
            x = self.tokens(ids) + self.positions(torch.arange(t, device=ids.device))
            mask = torch.ones(t, t, dtype=torch.bool, device=ids.device).triu(1)
            for block in self.blocks:
                x = block(x, src_mask=mask)
            return self.logits(x)

    torch.manual_seed(config.seed)
    return TorchLM()


def _share(counts: dict[str, dict[str, int]], kinds: tuple[str, ...],
           event: str = "underflow") -> float:
    """Events ``event`` over the elements rounded at the sites ending in one of ``kinds``."""
    rows = [row for site, row in counts.items() if site.rpartition("/")[2] in kinds]
    elements = sum(row["elements"] for row in rows)
    return sum(row[event] for row in rows) / elements if elements else 0.0


def train(variant: Variant, config: LMConfig, device: str = "cpu") -> LMRun:
    """One run of the torch LM under ``variant`` (the module docstring says what is measured)."""
    import torch
    import torch.nn.functional as F

    import fpsim.torch as ft

    (x, y), (x_test, y_test) = data_for(config)
    model = ft.emulate(torch_lm(config).to(device), variant.policy)
    if config.optimizer == "sgd":
        opt: Any = torch.optim.SGD(model.parameters(), lr=config.learning_rate,
                                   momentum=config.momentum)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    scaler = torch.amp.GradScaler(device, enabled=variant.scaled)
    history = History()
    b = config.batch_size
    start = time.perf_counter()
    with fpsim.monitor() as m:
        for step in range(config.steps):
            xb = torch.from_numpy(x[step * b:(step + 1) * b]).to(device)
            yb = torch.from_numpy(y[step * b:(step + 1) * b]).to(device)
            opt.zero_grad()
            loss = F.cross_entropy(model(xb).reshape(-1, VOCABULARY), yb.reshape(-1))
            scale = scaler.get_scale() if variant.scaled else 1.0
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            history.step_loss.append(loss.item())
            history.step_skipped.append(variant.scaled and scaler.get_scale() < scale)
    with torch.no_grad():
        total = 0.0
        for i in range(0, len(x_test), 256):
            xt = torch.from_numpy(x_test[i:i + 256]).to(device)
            yt = torch.from_numpy(y_test[i:i + 256]).to(device)
            total += float(F.cross_entropy(model(xt).reshape(-1, VOCABULARY), yt.reshape(-1),
                                           reduction="sum"))
    test_loss = total / y_test.size
    return LMRun(
        label=variant.label, policy=variant.policy,
        test_loss=test_loss if math.isfinite(test_loss) else math.nan,
        final_loss=final_loss(history),
        activation_underflow=_share(m.counts, _ACTIVATION_GRADS),
        activation_subnormal=_share(m.counts, _ACTIVATION_GRADS, "subnormal"),
        weight_underflow=_share(m.counts, _WEIGHT_GRADS), swamped_updates=0,
        skipped_steps=int(np.sum(history.step_skipped)),
        final_loss_scale=scaler.get_scale() if variant.scaled else None,
        nan_step=first_nonfinite_step(history), wall_time=time.perf_counter() - start,
        history=history)


def run_experiment(name: str, *, steps: int | None = None, device: str = "cpu",
                   progress: Callable[[str], None] | None = None) -> ExperimentResult:
    """Experiment ``name`` (one of ``SUPPORTED``) on torch, at its configuration with ``steps``
    changed where given, from the configuration's seed."""
    check_supported(name)
    entry = EXPERIMENTS[name]
    config = entry.config_for(steps=steps)
    runs = []
    for variant in SUPPORTED[name]:
        runs.append(train(variant, config, device))
        if progress is not None:
            progress(f"  {variant.label}: test loss {runs[-1].test_loss:.3f} "
                     f"({runs[-1].wall_time:.1f} s)")
    contrast = entry.claims[0] if entry.claims else None
    return ExperimentResult(
        name, f"{entry.title} [torch, {device}]", config,
        f"the policy and loss scaling of fpsim.torch.emulate (torch {device})", runs,
        {"backend": "torch", "device": device},
        None if contrast is None else (contrast.variant, contrast.reference))


# --- the what-if replay on the torch LM (nn.experiments.replay's measure) ----------------------
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
    optimizer: Any = (torch.optim.SGD(reference.parameters(), lr=config.learning_rate,
                                      momentum=config.momentum) if config.optimizer == "sgd"
                      else torch.optim.Adam(reference.parameters(), lr=config.learning_rate))
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
