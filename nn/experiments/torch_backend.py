"""``fpsim compare --backend torch``: the experiments of the char LM and of the CNN on
PyTorch, emulated by ``fpsim.torch.emulate``, at a size the user chooses (``--scale``,
``--steps``; ``--device cuda`` on a GPU), through the same seeds, intervals, verdicts, table,
JSON and picture as nn's (``nn.experiments.seeds`` calls ``run_config`` in place of the table's
function).

The models are nn's as torch modules (``nn.experiments.torch_models``: the char LM, the CNN),
trained by one loop whatever the model: each run's products are rounded to its policy's
formats, the loss is the mean cross-entropy over the predictions (batch x positions for the
LM), dynamic loss scaling is ``torch.amp.GradScaler`` (torch's defaults: theirs).

Measured per run, as ``LMRun``: held-out loss (and accuracy for the CNN; in eval mode, so
BatchNorm uses its moving statistics as nn's evaluate does), the last steps' training loss,
the shares of activation and weight gradients flushed to zero (ours: underflow events over
rounded elements at the ``grad_input``/``grad_a``/... and ``grad_weight``/``grad_bias`` sites
of ``fpsim.monitor``), skipped steps and the final scale (GradScaler), the first non-finite
step. Swamped updates (an update that left its stored weight unchanged) are counted, per
parameter (``Trained.swamped``), where the weights are stored in a narrow format
(``Variant.stored``: after each optimizer step every parameter is rounded to it, the
master-weights experiments' "no master" run); elsewhere
emulate keeps fp32 masters and ``LMRun.swamped_updates`` reads 0. The float32 run's history
also holds the exponents of its true gradients (each module's output gradient as
"activation", the parameters' as "weight"), which the picture draws against fp16's range.

``SUPPORTED`` names the experiments this backend runs; any other raises ValueError naming them,
with the reason where ``REFUSED`` gives one (an experiment whose knob emulate does not have).
"""

from __future__ import annotations

import functools
import inspect
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import fpsim
from nn.experiments.accumulation import (
    LOSS_SCALE,
    SMALL_BATCH,
    kernel_gradient_stats,
    sequential_fp16_sum,
)
from nn.experiments.lm import LMConfig, LMRun, data_for, final_loss, first_nonfinite_step
from nn.experiments.masters import MIXED, PURE, swamp_threshold
from nn.experiments.result import ExperimentResult
from nn.experiments.stories import master_weights_lm
from nn.experiments.table import EXPERIMENTS, FP32, SCALED, UNSCALED
from nn.experiments.torch_models import family, torch_lm
from nn.training.history import History

_ACTIVATION_GRADS = ("grad_input", "grad_a", "grad_b", "grad_query", "grad_key", "grad_value",
                     "grad_batch1", "grad_batch2")
_WEIGHT_GRADS = ("grad_weight", "grad_bias")
EVAL_BATCH = 256  # held-out windows per forward pass when scoring (ours)


@dataclass(frozen=True)
class Variant:
    """One run of an experiment: its label, its policy, whether GradScaler scales the loss,
    and the format the weights are stored in (None: fp32 masters, emulate's way)."""

    label: str
    policy: str
    scaled: bool = False
    stored: str | None = None
    # emulate's accumulator= as (scope or product name, accumulator) pairs (): fp32, torch's
    accumulators: tuple[tuple[str, str], ...] = ()


# fp32 masters against weights stored in fp16 after each step, both loss-scaled (nn's
# master-weights and master-weights-lm: the same pair on the CNN and on the LM)
MASTERS = (Variant(MIXED, "mixed_float16", scaled=True),
           Variant(PURE, "float16", scaled=True, stored="float16"))

# the experiments the torch backend runs: name -> the runs (labels as nn's, so the tables and
# the contrast line up); the experiments whose variants are policies, loss scaling and the
# weights' stored format
SUPPORTED: dict[str, tuple[Variant, ...]] = {
    "underflow": (Variant(FP32, "float32"), Variant(UNSCALED, "mixed_float16"),
                  Variant(SCALED, "mixed_float16", scaled=True)),
    "underflow-sgd": (Variant(FP32, "float32"), Variant(UNSCALED, "mixed_float16"),
                      Variant(SCALED, "mixed_float16", scaled=True)),
    "bf16": (Variant(FP32, "float32"), Variant(SCALED, "mixed_float16", scaled=True),
             Variant("mixed_bfloat16", "mixed_bfloat16")),
    "master-weights-lm": MASTERS,
    "master-weights": MASTERS,
    # nn's accumulation: every convolution's products in an fp16 accumulator, forward and
    # backward, both runs loss-scaled
    "accumulation": (Variant("fp32 accumulation", "mixed_float16", scaled=True),
                     Variant("fp16 accumulation", "mixed_float16", scaled=True,
                             accumulators=(("conv2d", "float16"),))),
    # nn's accumulation-lm: the logits layer's products in an fp16 accumulator
    "accumulation-lm": (Variant("fp32 accumulation", "mixed_float16", scaled=True),
                        Variant("fp16 accumulation", "mixed_float16", scaled=True,
                                accumulators=(("logits", "float16"),))),
}
# experiments whose knob fpsim.torch.emulate does not have: name -> why (said when refused)
REFUSED: dict[str, str] = {
    "statistics": "fpsim.torch.emulate rounds products only: BatchNorm's statistics and "
                  "normalization run in float32 as torch runs them, so fp16 statistics cannot "
                  "be emulated",
}
# the learning rate an experiment trains at where its nn version sets its own (nn's default;
# master-weights's Adam lr 3e-4 is in its table configuration)
LEARNING_RATE: dict[str, float] = {
    "master-weights-lm": inspect.signature(master_weights_lm).parameters[
        "learning_rate"].default,
}


def check_supported(name: str) -> None:
    """ValueError unless experiment ``name`` runs on the torch backend."""
    if name not in SUPPORTED:
        why = f" ({REFUSED[name]})" if name in REFUSED else ""
        raise ValueError(f"--backend torch runs the experiments {', '.join(SUPPORTED)}; "
                         f"{name!r} runs on --backend nn only{why}")


def scaled(config: Any, scale: int) -> Any:
    """``config`` with the model ``scale`` times as wide (``--scale``, ours): the LM's
    embedding width, heads and feed-forward width times ``scale`` (each head keeps its size),
    the CNN's filters times ``scale``; depth, batch and steps as they are (``--steps`` sets
    the steps)."""
    if isinstance(scale, bool) or not isinstance(scale, int) or scale < 1:
        raise ValueError(f"--scale must be an integer >= 1 (the model's width as a multiple "
                         f"of the classroom size), got {scale!r}")
    return family(config).widen(config, scale)


def make_optimizer(config: Any, model: Any) -> Any:
    """The torch optimizer ``config`` names for ``model``'s parameters (torch's other
    defaults: theirs)."""
    import torch

    if config.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=config.learning_rate,
                               momentum=config.momentum)
    if config.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    raise ValueError(f"{type(config).__name__}: optimizer must be 'sgd' or 'adam', got "
                     f"{config.optimizer!r}")


def _share(counts: dict[str, dict[str, int]], kinds: tuple[str, ...],
           event: str = "underflow") -> float:
    """Events ``event`` over the elements rounded at the sites ending in one of ``kinds``."""
    rows = [row for site, row in counts.items() if site.rpartition("/")[2] in kinds]
    elements = sum(row["elements"] for row in rows)
    return sum(row[event] for row in rows) / elements if elements else 0.0


def _record_activation_gradients(model: Any, history: History) -> list[Any]:
    """Hooks that add each module's output gradient (the leaf modules and each
    MultiheadAttention; not Dropout, an identity here) to ``history``'s "activation" exponent
    counts; returns their handles."""
    import torch

    def hook(module: Any, args: Any, output: Any) -> None:
        out = output[0] if isinstance(output, tuple) else output
        if isinstance(out, torch.Tensor) and out.requires_grad:
            out.register_hook(lambda g: history.record_gradients(
                "activation", g.detach().float().cpu().numpy().ravel()))

    return [m.register_forward_hook(hook) for m in model.modules()
            if (not any(True for _ in m.children()) and not isinstance(m, torch.nn.Dropout))
            or isinstance(m, torch.nn.MultiheadAttention)]


@dataclass
class Trained:
    """One run measured (``run``), its trained model, and per parameter name the updates its
    stored weights swamped (empty where the weights are fp32 masters)."""

    run: LMRun
    model: Any
    swamped: dict[str, int]


def _loss(logits: Any, y: Any, reduction: str = "mean") -> Any:
    """Cross-entropy of ``logits`` (..., classes) against the class ids ``y`` (...)."""
    import torch.nn.functional as F

    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                           reduction=reduction)


def _train(variant: Variant, config: Any, device: str) -> Trained:
    """One run of ``config``'s model (the LM or the CNN) under ``variant``."""
    import torch

    import fpsim.torch as ft

    model_family = family(config)
    (x, y), (x_test, y_test) = model_family.data(config)
    model = ft.emulate(model_family.build(config).to(device), variant.policy,
                       accumulator=dict(variant.accumulators) or None)
    if variant.stored is not None:
        _store(model, variant.stored)
    opt = make_optimizer(config, model)
    scaler = torch.amp.GradScaler(device, enabled=variant.scaled)
    history = History()
    exact = variant.policy == "float32"  # its true gradients are recorded for the picture
    hooks = _record_activation_gradients(model, history) if exact else []
    b = config.batch_size
    swamped: dict[str, int] = {}
    start = time.perf_counter()
    model.train()
    with fpsim.monitor() as m:
        for step in range(config.steps):
            xb = torch.from_numpy(x[step * b:(step + 1) * b]).to(device)
            yb = torch.from_numpy(y[step * b:(step + 1) * b]).to(device)
            opt.zero_grad()
            loss = _loss(model(xb), yb)
            scale = scaler.get_scale() if variant.scaled else 1.0
            scaler.scale(loss).backward()
            if exact:
                history.record_gradients("weight", torch.cat(
                    [p.grad.detach().reshape(-1) for p in model.parameters()
                     if p.grad is not None]).cpu().numpy())
            before = ([p.detach().clone() for p in model.parameters()]
                      if variant.stored is not None else None)
            scaler.step(opt)
            if before is not None and variant.stored is not None:
                for name, count in _store(model, variant.stored, before).items():
                    swamped[name] = swamped.get(name, 0) + count
            scaler.update()
            history.record_step(loss.item(), scale, variant.scaled and scaler.get_scale() < scale)
    for h in hooks:
        h.remove()
    history.record_epoch(0, {"loss": final_loss(history)})
    model.eval()  # held out: BatchNorm's moving statistics, as nn evaluates
    test_loss, accuracy = held_out(model, x_test, y_test, device)
    run = LMRun(
        label=variant.label, policy=variant.policy,
        test_loss=test_loss if math.isfinite(test_loss) else math.nan,
        final_loss=final_loss(history),
        activation_underflow=_share(m.counts, _ACTIVATION_GRADS),
        activation_subnormal=_share(m.counts, _ACTIVATION_GRADS, "subnormal"),
        weight_underflow=_share(m.counts, _WEIGHT_GRADS),
        swamped_updates=sum(swamped.values()),
        skipped_steps=int(np.sum(history.step_skipped)),
        final_loss_scale=scaler.get_scale() if variant.scaled else None,
        nan_step=first_nonfinite_step(history), wall_time=time.perf_counter() - start,
        history=history, test_accuracy=accuracy if model_family.accuracy else None)
    return Trained(run, model, swamped)


def _store(model: Any, fmt: str, before: list[Any] | None = None) -> dict[str, int]:
    """Round every parameter of ``model`` to ``fmt`` in place (weights stored in ``fmt``);
    with ``before`` (the stored weights before the optimizer's step) returns, per parameter
    name, how many elements the step changed whose stored value it left as before (swamped
    updates; empty without ``before``)."""
    import torch

    import fpsim.torch as ft

    swamped = {}
    with torch.no_grad():
        for i, (name, p) in enumerate(model.named_parameters()):
            stored = ft.round(p, fmt)
            if before is not None:
                swamped[name] = int(((p != before[i]) & (stored == before[i])).sum())
            p.copy_(stored)
    return swamped


def train(variant: Variant, config: Any, device: str = "cpu") -> LMRun:
    """One run of ``config``'s torch model under ``variant`` (the module docstring says what is
    measured)."""
    return _train(variant, config, device).run


def held_out(model: Any, x_test: np.ndarray, y_test: np.ndarray, device: str
             ) -> tuple[float, float]:
    """Mean cross-entropy of ``model`` over every held-out prediction (nats per character for
    the LM) and the share of them whose largest logit is the right class."""
    import torch

    total, right = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(x_test), EVAL_BATCH):
            xt = torch.from_numpy(x_test[i:i + EVAL_BATCH]).to(device)
            yt = torch.from_numpy(y_test[i:i + EVAL_BATCH]).to(device)
            logits = model(xt)
            total += float(_loss(logits, yt, "sum"))
            right += int((logits.argmax(-1) == yt).sum())
    return total / y_test.size, right / y_test.size


def held_out_loss(model: Any, x_test: np.ndarray, y_test: np.ndarray, device: str) -> float:
    """Mean cross-entropy of ``model`` over every held-out prediction (``held_out``'s loss)."""
    return held_out(model, x_test, y_test, device)[0]


def forward_errors(reference: Any, config: LMConfig, device: str) -> dict[str, float]:
    """As ``nn.experiments.stories.forward_errors``: the logits of the float32 run's weights
    under mixed_bfloat16 and mixed_float16 against its own float32 logits, on the first
    held-out batch, relative error in the 2-norm."""
    import torch

    import fpsim.torch as ft

    _, (x_test, _) = data_for(config)
    xb = torch.from_numpy(x_test[:config.batch_size]).to(device)
    errors = {}
    with torch.no_grad():
        exact = reference(xb).double()
        for policy, key in (("mixed_bfloat16", "logit_error_bf16"),
                            ("mixed_float16", "logit_error_fp16")):
            model = ft.emulate(torch_lm(config).to(device), policy)
            model.load_state_dict(reference.state_dict())
            got = model(xb).double()
            errors[key] = float(torch.linalg.norm(got - exact) / torch.linalg.norm(exact))
    return errors


def swamped_shares(runs: list[LMRun], config: Any) -> dict[str, dict[str, float]]:
    """As nn's master_weights_lm: per run, swamped updates over the updates made (parameter
    elements times the steps not skipped)."""
    elements = sum(p.numel() for p in family(config).build(config).parameters())
    return {"swamped_share": {r.label: r.swamped_updates / max(
        elements * (config.steps - r.skipped_steps), 1) for r in runs}}


TOP_SWAMPED = 5  # as nn's master_weights: the variables with the most swamped updates


def master_weights_numbers(trained: dict[str, Trained], config: Any) -> dict[str, Any]:
    """As nn's master_weights (its ``spread``: the seeds are the caller's): the swamped shares,
    per run the parameters with the most swamped updates, and the magnitude from which a step
    of the learning rate is lost in fp16."""
    runs = [t.run for t in trained.values()]
    return {**swamped_shares(runs, config),
            "swamped_by_variable": {label: dict(sorted(
                t.swamped.items(), key=lambda item: -item[1])[:TOP_SWAMPED])
                for label, t in trained.items()},
            "swamp_threshold": swamp_threshold(config.learning_rate), "spread": {}}


def first_batch_operands(config: Any, device: str, scale: float, kind: type
                         ) -> dict[str, tuple[Any, Any]]:
    """Per submodule of type ``kind`` in the mixed_float16 model (fp32 accumulation), on the
    first batch with the loss times ``scale``: its input and its output's gradient, each
    rounded to fp16 as emulate rounds them (float32 tensors on the CPU)."""
    import torch

    import fpsim.torch as ft

    model_family = family(config)
    (x, y), _ = model_family.data(config)
    model = ft.emulate(model_family.build(config).to(device), "mixed_float16")
    seen: dict[str, list[Any]] = {}

    def keep(name: str) -> Callable[..., None]:
        def hook(module: Any, args: Any, output: Any) -> None:
            seen[name] = [args[0].detach(), None]
            output.register_hook(lambda g: seen[name].__setitem__(1, g.detach()))
        return hook

    chosen: list[tuple[str, Any]] = [(n, m) for n, m in model.named_modules()
                                     if isinstance(m, kind)]
    handles = [m.register_forward_hook(keep(n)) for n, m in chosen]
    b = config.batch_size
    xb, yb = (torch.from_numpy(a[:b]).to(device) for a in (x, y))
    (_loss(model(xb), yb) * scale).backward()
    for h in handles:
        h.remove()
    return {name: (ft.round(h_in, "fp16").cpu(), ft.round(g, "fp16").cpu())
            for name, (h_in, g) in seen.items()}


def conv_kernel_sums(config: Any, device: str, scale: float) -> dict[str, tuple[Any, Any]]:
    """As nn's ``conv_kernel_sums``, on the torch CNN: per convolution of the mixed_float16
    model (fp32 accumulation) on the first batch, loss times ``scale``, the two operands of
    its kernel gradient as fp16 values in float64: the input's patches (one row per image and
    output pixel, torch's (channel, row, column) patch order) and the output's gradient (one
    row per the same)."""
    import torch
    import torch.nn.functional as F

    sums = {}
    for name, (h_in, g) in first_batch_operands(config, device, scale,
                                                torch.nn.Conv2d).items():
        k = config.kernel_size
        cols = F.unfold(h_in, k, padding=k // 2)  # "same" (nn's odd kernels)
        rows = cols.transpose(1, 2).reshape(-1, cols.shape[1])
        grads = g.permute(0, 2, 3, 1).reshape(-1, g.shape[1])
        sums[name] = (rows.double().numpy(), grads.double().numpy())
    return sums


def logits_kernel_swamping(config: Any, device: str, scale: float = 2.0**15
                           ) -> dict[str, float]:
    """As nn's ``kernel_gradient_swamping``, on the torch LM: the logits layer's kernel
    gradient on the first batch (loss times ``scale``, the dynamic scale's start) summed over
    batch x positions in an fp16 accumulator, from the torch model's own fp16 input and
    output gradient: the share of additions swamped and the relative error."""
    import torch

    h, g = first_batch_operands(config, device, scale, torch.nn.Linear)["logits"]
    rows = h.reshape(-1, h.shape[-1]).double().numpy()
    grads = g.reshape(-1, g.shape[-1]).double().numpy()
    fp16_sum, swamped = sequential_fp16_sum(rows, grads)
    exact = rows.T @ grads
    return {"swamped_additions": swamped,
            "relative_error": float(np.linalg.norm(fp16_sum - exact) / np.linalg.norm(exact))}


def accumulation_numbers(config: Any, device: str) -> dict[str, Any]:
    """As nn's fp32_accumulation's extra (its ``spread``: the seeds are the caller's): the
    first batch's kernel-gradient sums in an fp16 accumulator, at the configuration's batch
    and at nn's small batch."""
    found = kernel_gradient_stats(conv_kernel_sums(config, device, LOSS_SCALE))
    found["small_batch"] = kernel_gradient_stats(conv_kernel_sums(
        config.with_(batch_size=SMALL_BATCH), device, LOSS_SCALE))
    found["spread"] = {}
    return found


# what an experiment measures beyond its runs, as nn's version of it does: name -> (the runs
# trained, by label; config; device) -> extra numbers (for its findings)
EXTRA: dict[str, Callable[[dict[str, Trained], Any, str], dict[str, Any]]] = {
    "underflow": lambda trained, config, device: {},
    "underflow-sgd": lambda trained, config, device: {},
    "bf16": lambda trained, config, device: forward_errors(trained[FP32].model, config,
                                                           device),
    "master-weights-lm": lambda trained, config, device: swamped_shares(
        [t.run for t in trained.values()], config),
    "master-weights": lambda trained, config, device: master_weights_numbers(trained, config),
    "accumulation": lambda trained, config, device: accumulation_numbers(config, device),
    "accumulation-lm": lambda trained, config, device: logits_kernel_swamping(config, device),
}


def run_config(name: str, config: Any, *, device: str = "cpu",
               progress: Callable[[str], None] | None = None) -> ExperimentResult:
    """Experiment ``name`` (one of ``SUPPORTED``) on torch at ``config`` (its seed included):
    every variant trained from the same initial weights and batches. What
    ``nn.experiments.seeds`` calls per seed (``runner``)."""
    check_supported(name)
    entry = EXPERIMENTS[name]
    if name in LEARNING_RATE:
        config = config.with_(learning_rate=LEARNING_RATE[name])
    trained = {}
    for variant in SUPPORTED[name]:
        trained[variant.label] = _train(variant, config, device)
        run = trained[variant.label].run
        if progress is not None:
            progress(f"  {variant.label}: test loss {run.test_loss:.3f} ({run.wall_time:.1f} s)")
    contrast = entry.claims[0] if entry.claims else None
    return ExperimentResult(
        name, f"{entry.title} [torch, {device}]", config,
        f"the policy and loss scaling of fpsim.torch.emulate (torch {device})",
        [t.run for t in trained.values()],
        {"backend": "torch", "device": device, **EXTRA[name](trained, config, device)},
        None if contrast is None else (contrast.variant, contrast.reference))


def runner(name: str, device: str = "cpu") -> Callable[[Any], ExperimentResult]:
    """``run_config`` for experiment ``name`` on ``device``, as a function of the
    configuration (picklable, for ``nn.experiments.seeds.run_seeds(run=...)``)."""
    check_supported(name)
    return functools.partial(run_config, name, device=device)


def run_experiment(name: str, *, steps: int | None = None, device: str = "cpu",
                   progress: Callable[[str], None] | None = None) -> ExperimentResult:
    """Experiment ``name`` (one of ``SUPPORTED``) on torch, at its configuration with ``steps``
    changed where given, from the configuration's seed."""
    check_supported(name)
    return run_config(name, EXPERIMENTS[name].config_for(steps=steps), device=device,
                      progress=progress)


def warm_up(name: str, device: str = "cpu") -> float:
    """Run experiment ``name`` on torch at 2 steps (torch's first calls, the numba kernels
    the monitor uses); returns seconds."""
    start = time.perf_counter()
    run_experiment(name, steps=2, device=device)
    return time.perf_counter() - start


def describe(device: str, scale: int) -> dict[str, Any]:
    """What the results file adds for this backend: backend, device, scale, torch's version
    and its intra-op threads."""
    import torch

    return {"backend": "torch", "device": device, "scale": scale,
            "torch": torch.__version__, "torch_threads": torch.get_num_threads()}
