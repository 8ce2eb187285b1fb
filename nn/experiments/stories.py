"""Experiments 1-6: each technique of mixed precision shown to matter on the small transformer
language model (``nn.experiments.lm``), or for experiment 3 a small CNN
(``nn.experiments.statistics``), with no loss multiplier. Each function trains the
same model (same weights, same batches) a few ways and returns a result whose ``runs`` are the
rows of ``fpsim compare --experiment NAME`` and whose properties are the numbers the tests
assert. ``knob`` says which real setting produced the effect at this size.

1. ``underflow_from_averaging``: unscaled mixed_float16 vs float32 vs dynamic loss scaling.
2. ``master_weights`` (``nn.experiments.masters``, ``--experiment master-weights``): pure
   float16 weights vs fp32 master weights on the CNN, Adam lr 3e-4 (``master_weights_lm``:
   the LM, Adam lr 1e-4, ``--experiment master-weights-lm``).
3. ``fp32_statistics``: BatchNormalization statistics in fp16 vs fp32 on a CNN fed raw
   pixels (``fp32_statistics_lm``: attention softmax and LayerNorm statistics on the LM).
4. ``fp32_accumulation``: the convolutions' products added in fp16 vs fp32 on the CNN
   (``nn.experiments.accumulation``; ``fp32_accumulation_lm``: the LM's logits layer).
5. ``adam_state``: Adam with fp16 slots (epsilon 1e-8 is 0, v underflows) vs fp32 slots.
6. ``bf16_vs_fp16``: mixed_bfloat16 without scaling vs mixed_float16 with it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import fpsim
import nn
import nn.experiments.progress as progress
from nn.experiments.lm import LMConfig, LMRun, build_lm, data_for, train_lm
from nn.experiments.result import ExperimentResult
from nn.experiments.statistics_lm import (  # noqa: F401  (their former home: re-exported)
    FP16_SQUARE_LIMIT,
    findings_lm,
    forward_events,
    fp32_statistics_lm,
    largest_norm_deviation,
    norm_inputs,
)

DEFAULT = LMConfig()


def _opt(config: LMConfig, **kwargs: Any) -> Any:
    return config.make_optimizer(**kwargs)


ADAM_LEARNING_RATE = 3e-3  # experiment 5's Adam (the other experiments use config's optimizer)


# --- 1 ----------------------------------------------------------------------------------------
@progress.option
def underflow_from_averaging(config: LMConfig = DEFAULT, *, progress: bool = False
                             ) -> ExperimentResult:
    """float32, unscaled mixed_float16 and mixed_float16 with dynamic loss scaling.

    The loss is the mean over batch x positions, so each logit's gradient is (p - onehot)
    divided by their number (2048 by default): most land in fp16's subnormals, where they keep
    a few bits, and the smallest flush to zero. ``extra["positions"]`` is that number.
    """
    runs = [
        train_lm("float32", config, "float32", _opt(config)),
        train_lm("mixed_float16, no scaling", config, "mixed_float16", _opt(config)),
        train_lm("mixed_float16 + dynamic", config, "mixed_float16", _opt(config),
                 loss_scale="dynamic"),
    ]
    return ExperimentResult(
        "underflow", "underflow from averaging over batch x positions", config,
        f"the mean over batch x sequence_length = {config.positions} positions", runs,
        {"positions": config.positions}, ("mixed_float16, no scaling", "float32"))


SGD_CONFIG = DEFAULT.with_(optimizer="sgd", learning_rate=0.5, momentum=0.9, steps=300)


@progress.option
def underflow_with_sgd(config: LMConfig = SGD_CONFIG, *, progress: bool = False
                       ) -> ExperimentResult:
    """Experiment 1 with SGD (momentum 0.9, lr 0.5, 300 steps) instead of Adam: SGD's step is
    proportional to the gradient, so the bits lost to fp16's subnormals and the values
    flushed to zero are lost from the update itself, where Adam's per-weight normalization
    absorbs them."""
    result = underflow_from_averaging(config)
    result.name = "underflow-sgd"
    result.knob = (f"the optimizer (SGD: steps proportional to the gradients) and {result.knob}")
    return result


# --- 2 ----------------------------------------------------------------------------------------
@progress.option
def master_weights_lm(config: LMConfig = DEFAULT, learning_rate: float = 1e-4, *,
                      progress: bool = False) -> ExperimentResult:
    """fp32 master weights (mixed_float16) against pure float16 weights, both loss-scaled so
    that underflow is not the difference, at ``learning_rate`` (default 1e-4, a late-training
    or fine-tuning rate: Adam's steps are then about 1e-4, below half an ulp of every fp16
    weight above 0.25). In fp16 such an update is lost (``swamped_updates``;
    ``extra["swamped_share"]`` per run: swamped / updates made)."""
    config = config.with_(learning_rate=learning_rate)
    runs = [
        train_lm("mixed_float16 (fp32 masters)", config, "mixed_float16", _opt(config),
                 loss_scale="dynamic"),
        train_lm("float16 (no master)", config, "float16", _opt(config),
                 loss_scale="dynamic"),
    ]
    shares = {r.label: r.swamped_updates / max(_updates(config, r), 1) for r in runs}
    return ExperimentResult(
        "master-weights-lm", "fp32 master weights vs pure float16 weights", config,
        f"the learning rate {learning_rate:g}: updates below half an ulp of fp16 weights", runs,
        {"swamped_share": shares}, (runs[1].label, runs[0].label))


def _updates(config: LMConfig, run: LMRun) -> int:
    """Weight elements times steps taken (an upper bound on the updates made)."""
    return _parameter_count(config) * (config.steps - run.skipped_steps)


def _parameter_count(config: LMConfig) -> int:
    model = build_lm(config, "float32")
    return sum(v.size for v in model.trainable_variables)


# --- 4 ----------------------------------------------------------------------------------------
@progress.option
def fp32_accumulation_lm(config: LMConfig = DEFAULT,
                         accumulate_in: tuple[str, ...] = ("logits",), *,
                         progress: bool = False) -> ExperimentResult:
    """The matmuls of the layers in ``accumulate_in`` ("logits", "ff": see ``build_lm``)
    accumulated in fp32 against fp16 (mixed_float16, dynamic loss scaling). The logits
    kernel gradient sums over batch x positions (2048 terms by default):
    ``extra`` has, on the first batch, the share of those additions that left the fp16
    accumulator unchanged (``swamped_additions``) and the fp16 sum's relative error against
    an exact float64 sum (``relative_error``)."""
    runs = [
        train_lm("fp32 accumulation", config, "mixed_float16", _opt(config),
                 loss_scale="dynamic"),
        train_lm("fp16 accumulation", config, "mixed_float16", _opt(config),
                 loss_scale="dynamic", model=build_lm(config, "mixed_float16",
                                                      accumulator="float16",
                                                      accumulate_in=accumulate_in)),
    ]
    where = " and ".join({"logits": "logits layer", "ff": "feed-forward layers"}[name]
                         for name in accumulate_in)
    inner = (f"; the feed-forward matmuls' inner dimensions {config.embed_dim} and "
             f"{config.ff_dim}" if "ff" in accumulate_in else "")
    return ExperimentResult(
        "accumulation-lm", f"fp32 vs fp16 accumulation ({where})", config,
        f"the kernel gradients' inner dimension: {config.positions} positions{inner}", runs,
        kernel_gradient_swamping(config), ("fp16 accumulation", "fp32 accumulation"))


def kernel_gradient_swamping(config: LMConfig, scale: float = 2.0**15) -> dict[str, float]:
    """On the first batch under mixed_float16 (loss times ``scale``, the dynamic scale's
    start): the logits kernel gradient ``h^T @ g`` summed left to right over the positions in
    an fp16 accumulator. Returns the share of non-zero products whose addition left the
    accumulator unchanged and the relative error (2-norm) against the exact float64 sum."""
    (x, y), _ = data_for(config)
    model = build_lm(config, "mixed_float16")
    xb, yb = x[:config.batch_size], y[:config.batch_size]
    hidden = nn.Sequential(model.layers[:-1])
    with nn.no_grad():
        h = hidden(xb, training=True)
        logits = model.layers[-1](h, training=True)
    g = _logit_gradient(logits.data, yb, scale)  # d(scale * mean cross-entropy)/d logits
    hv = fpsim.round(h.data.reshape(-1, h.shape[-1]), "fp16").astype(np.float64)
    gv = fpsim.round(g.reshape(-1, g.shape[-1]), "fp16").astype(np.float64)
    acc = np.zeros((hv.shape[1], gv.shape[1]))
    swamped = nonzero = 0
    for k in range(hv.shape[0]):  # one addition per position, every kernel element at once
        product = np.outer(hv[k], gv[k])
        new = fpsim.round(acc + product, "fp16").astype(np.float64)
        live = product != 0
        swamped += int(np.count_nonzero(live & (new == acc)))
        nonzero += int(np.count_nonzero(live))
        acc = new
    exact = hv.T @ gv
    return {"swamped_additions": swamped / max(nonzero, 1),
            "relative_error": float(np.linalg.norm(acc - exact) / np.linalg.norm(exact))}


def _logit_gradient(logits: np.ndarray, labels: np.ndarray, scale: float) -> np.ndarray:
    z = logits.astype(np.float64)
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    p[np.arange(labels.shape[0])[:, None], np.arange(labels.shape[1])[None, :], labels] -= 1
    return p * scale / labels.size


# --- 5 ----------------------------------------------------------------------------------------
@progress.option
def adam_state(config: LMConfig = DEFAULT, epsilon: float = 1e-8, *,
               progress: bool = False) -> ExperimentResult:
    """Adam (epsilon 1e-8, PyTorch's default) with fp32 slots against fp16 slots, under
    mixed_float16 with dynamic loss scaling (the optimizer sees unscaled gradients). In fp16
    epsilon is 0 and a second moment below 2**-24 is 0, so a small gradient divides by zero.
    ``extra``: after the first step, the share of second moments that are 0 although their
    first moment is not (``v_flushed``), and whether the weights are still finite."""
    # no gradient telemetry: the story is the optimizer's state, and counting every rounding
    # of a NaN backward pass, step after skipped step, costs most of the run's time
    runs = [
        train_lm("Adam, fp32 slots", config, "mixed_float16",
                 nn.Adam(ADAM_LEARNING_RATE, epsilon=epsilon), loss_scale="dynamic",
                 telemetry=False),
        train_lm("Adam, fp16 slots", config, "mixed_float16",
                 nn.Adam(ADAM_LEARNING_RATE, epsilon=epsilon, slot_dtype="float16"),
                 loss_scale="dynamic", telemetry=False),
    ]
    return ExperimentResult(
        "adam-state", "Adam's state (m, v, epsilon) in fp32 vs fp16", config,
        f"epsilon {epsilon:g} and second moments g^2 of small gradients", runs,
        first_step_second_moments(config, epsilon), ("Adam, fp16 slots", "Adam, fp32 slots"))


def first_step_second_moments(config: LMConfig, epsilon: float) -> dict[str, Any]:
    """One step of Adam from the same start with fp16 and with fp32 slots (the first step the
    dynamic loss scale does not skip). Returns, for the
    fp16 slots, the share of elements whose v is 0 while m is not (``v_flushed``) and the
    share of weights that became non-finite (``nonfinite_weights``); and the fp32 slots'
    second moments themselves (``second_moments``, an array), whose exponents show how many
    lie below fp16's smallest subnormal."""
    (x, y), _ = data_for(config)
    found: dict[str, Any] = {}
    for slot_dtype in ("float16", None):
        model = build_lm(config, "mixed_float16")
        opt = nn.Adam(ADAM_LEARNING_RATE, epsilon=epsilon, slot_dtype=slot_dtype)
        model.compile(opt, nn.losses.SparseCategoricalCrossentropy(from_logits=True))
        variables = model.trainable_variables
        b = config.batch_size
        for k in range(len(x) // b):  # until a step is taken (the scaler skips an inf one)
            model.fit(x[k * b:(k + 1) * b], y[k * b:(k + 1) * b], batch_size=b, epochs=1,
                      shuffle=False, verbose=0, telemetry=False, loss_scale="dynamic")
            if _has_slots(opt, variables[0]):
                break
        ms = np.concatenate([opt.get_slot(v, "momentum").ravel() for v in variables])
        vs = np.concatenate([opt.get_slot(v, "velocity").ravel() for v in variables])
        if slot_dtype is None:
            found["second_moments"] = vs
            continue
        bad = sum(int(np.count_nonzero(~np.isfinite(v.data))) for v in variables)
        live = int(np.count_nonzero(ms))
        found["v_flushed"] = int(np.count_nonzero((vs == 0) & (ms != 0))) / max(live, 1)
        found["nonfinite_weights"] = bad / max(sum(v.size for v in variables), 1)
    return found


def _has_slots(optimizer: Any, variable: Any) -> bool:
    try:
        optimizer.get_slot(variable, "momentum")
    except KeyError:
        return False
    return True


# --- 6 ----------------------------------------------------------------------------------------
@progress.option
def bf16_vs_fp16(config: LMConfig = DEFAULT, *, progress: bool = False) -> ExperimentResult:
    """float32, mixed_float16 with dynamic loss scaling, and mixed_bfloat16 with none: bf16
    has fp32's exponent range (nothing underflows, no scale needed) and 8 significant bits
    instead of fp16's 11. Its price: the held-out loss gap to float32, and ``extra``'s
    relative error (2-norm) of the logits that the float32 run's final weights give on
    held-out text when the forward pass runs under each mixed policy
    (``logit_error_bf16``, ``logit_error_fp16``)."""
    reference = build_lm(config, "float32")
    runs = [
        train_lm("float32", config, "float32", _opt(config), model=reference),
        train_lm("mixed_float16 + dynamic", config, "mixed_float16", _opt(config),
                 loss_scale="dynamic"),
        train_lm("mixed_bfloat16", config, "mixed_bfloat16", _opt(config)),
    ]
    return ExperimentResult("bf16", "mixed_bfloat16 (no scaling) vs mixed_float16 (scaled)",
                            config, "none", runs, forward_errors(reference, config),
                            ("mixed_bfloat16", "float32"))


def forward_errors(reference: Any, config: LMConfig) -> dict[str, float]:
    """The logits of ``reference``'s weights under mixed_bfloat16 and mixed_float16 against
    its own float32 logits, on the first held-out batch: relative error in the 2-norm."""
    _, (x_test, _) = data_for(config)
    xb = x_test[:config.batch_size]
    with nn.no_grad():
        exact = reference(xb).data.astype(np.float64)
        errors = {}
        for policy, key in (("mixed_bfloat16", "logit_error_bf16"),
                            ("mixed_float16", "logit_error_fp16")):
            model = build_lm(config, policy)
            model.set_weights(reference.get_weights())
            got = model(xb).data.astype(np.float64)
            errors[key] = float(np.linalg.norm(got - exact) / np.linalg.norm(exact))
    return errors


def underflow_findings(r: ExperimentResult) -> list[str]:
    """What ``underflow_from_averaging``'s (and ``underflow_with_sgd``'s) numbers say."""
    bad = r.run("mixed_float16, no scaling")
    return [
        f"unscaled mixed_float16: {bad.activation_underflow:.1%} of activation gradients "
        f"flushed to 0 and {bad.activation_subnormal:.1%} subnormal (a few bits left); "
        f"held-out loss {r.gap(bad.label):+.3f} nats/char vs float32",
        f"dynamic loss scaling: {r.gap('mixed_float16 + dynamic'):+.3f} vs float32"]


def master_weights_lm_findings(r: ExperimentResult) -> list[str]:
    """What ``master_weights_lm``'s numbers say."""
    shares = r.extra["swamped_share"]
    return [*(f"{label}: {share:.1%} of weight updates swamped (lost below half an ulp)"
              for label, share in shares.items()),
            f"pure float16: held-out loss {r.gap(r.runs[1].label, r.runs[0].label):+.3f}"
            " vs fp32 masters"]


def accumulation_lm_findings(r: ExperimentResult) -> list[str]:
    """What ``fp32_accumulation_lm``'s numbers say."""
    return [
        f"first batch, logits kernel gradient over {r.config.positions} positions in an "
        f"fp16 accumulator: {r.extra['swamped_additions']:.1%} of additions swamped, "
        f"relative error {r.extra['relative_error']:.2%}",
        f"fp16 accumulation: held-out loss {r.gap(r.runs[1].label, r.runs[0].label):+.3f} "
        "vs fp32"]


def adam_state_findings(r: ExperimentResult) -> list[str]:
    """What ``adam_state``'s numbers say."""
    bad = r.runs[1]
    return [
        f"after one step with fp16 slots: {r.extra['v_flushed']:.1%} of second moments "
        f"are 0 while the first moment is not, {r.extra['nonfinite_weights']:.1%} of "
        "weights non-finite (epsilon 1e-8 is 0 in fp16)",
        f"fp16 slots: first non-finite loss at step {bad.nan_step}"]


def bf16_findings(r: ExperimentResult) -> list[str]:
    """What ``bf16_vs_fp16``'s numbers say."""
    return [
        f"mixed_bfloat16: {r.run('mixed_bfloat16').activation_underflow:.1%} of activation "
        f"gradients flushed, no loss scale; held-out loss {r.gap('mixed_bfloat16'):+.4f} "
        "vs float32",
        f"mixed_float16 + dynamic: {r.gap('mixed_float16 + dynamic'):+.4f} vs float32",
        f"the float32 run's weights on held-out text: logits off by "
        f"{r.extra['logit_error_bf16']:.2%} under mixed_bfloat16, "
        f"{r.extra['logit_error_fp16']:.2%} under mixed_float16 (relative 2-norm)"]
