"""What-if replay: a technique's mechanism measured on real training states, without chaos.

Comparing two training runs mixes a technique's effect with chaos (two trajectories drift apart
whatever the cause). ``replay`` trains one reference trajectory in float32 (the language model
of ``nn.experiments.lm`` or the CNN of ``nn.experiments.cnn``) and, at chosen
steps, replays that very step (the same weights, the same batch, the same optimizer state)
under each alternative, measuring its gradients and update against the float32 replay of the
same step, per layer:

- ``cosine``: cosine similarity of the weight gradients (1: same direction);
- ``flushed_norm``: the share of the float32 gradient's 2-norm carried by elements that the
  alternative's gradient holds as 0 (flushed);
- ``update_error``: relative error (2-norm) of the update the alternative applies to its stored
  weights against the update float32 applies;
- ``swamped``: the share of non-zero updates that left the stored weight unchanged (below half
  an ulp of the weight in its format).

The update of a step is the trajectory's own optimizer formula (Keras's Adam or SGD) from the
trajectory's optimizer state at that step, applied once to a copy (the state is not changed);
gradients of a loss-scaled alternative are divided by the scale in float64. An alternative
whose gradients are not finite at the scale is replayed at half the scale, as a dynamic loss
scale would skip and halve (``scale`` in the result says which scale it used).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import fpsim
import nn
from nn.experiments.cnn import CNNConfig, build_cnn
from nn.experiments.cnn import data_for as cnn_data_for
from nn.experiments.lm import LMConfig, build_lm
from nn.experiments.lm import data_for as lm_data_for
from nn.losses import SparseCategoricalCrossentropy

START_SCALE = 2.0**15  # a dynamic loss scale's start (Keras's and PyTorch's)


@dataclass(frozen=True)
class Alternative:
    """One way to run a step: its ``policy``, whether its loss is scaled (``scaled``), whether
    its weights are stored in float32 (``masters``; else in the format the model's variables
    hold), the format of its normalization statistics (``stats``; None: the policy's) and
    whether it accumulates in float16 (``accumulate``). The model family says where those two
    sit: the language model's attention softmax and LayerNorms, and its logits layer; the
    CNN's BatchNormalizations, and its convolutions."""

    name: str
    policy: str
    scaled: bool
    masters: bool = True
    stats: str | None = None
    accumulate: bool = False


@dataclass(frozen=True)
class Family:
    """A model the replay can follow: its configuration type, how to build it under an
    alternative, its training data, and the alternatives it is replayed under (in order)."""

    name: str
    build: Callable[[Any, Alternative], Any]
    data: Callable[[Any], Any]
    alternatives: tuple[Alternative, ...]


def _lm(config: LMConfig, alt: Alternative) -> Any:
    return build_lm(config, alt.policy, stats_dtype=alt.stats,
                    accumulator="float16" if alt.accumulate else None,
                    accumulate_in=("logits",))


def _cnn(config: CNNConfig, alt: Alternative) -> Any:
    return build_cnn(config, alt.policy, stats_dtype=alt.stats,
                     accumulator="float16" if alt.accumulate else None)


def _alternatives(accumulation: str) -> tuple[Alternative, ...]:
    return (
        Alternative("float32", "float32", False),
        Alternative("unscaled fp16", "mixed_float16", False),
        Alternative("scaled fp16", "mixed_float16", True),
        Alternative(f"fp16 accumulation ({accumulation})", "mixed_float16", True,
                    accumulate=True),
        Alternative("fp16 statistics", "mixed_float16", True, stats="float16"),
        # the weights' format the only change: statistics in fp32 as under mixed_float16
        Alternative("fp16 weights, no masters", "float16", True, masters=False,
                    stats="float32"),
        Alternative("bf16", "mixed_bfloat16", False),
        Alternative("fp8 delayed scaling", "fp8_hybrid_delayed", False),
    )


FAMILIES: dict[type, Family] = {
    LMConfig: Family("language model", _lm, lm_data_for, _alternatives("logits")),
    CNNConfig: Family("CNN", _cnn, cnn_data_for, _alternatives("convolutions")),
}
REFERENCE = Alternative("float32", "float32", False)  # the trajectory followed
ALTERNATIVES: dict[str, Alternative] = {a.name: a for a in FAMILIES[LMConfig].alternatives}
REPLAY_STEPS = (0, 50, 149)  # ours: the first step, one in the middle, the last of 150


def family(config: Any) -> Family:
    """The model family ``config`` (an LMConfig or a CNNConfig) configures."""
    if type(config) not in FAMILIES:
        raise TypeError(f"replay: config must be one of {[t.__name__ for t in FAMILIES]}, "
                        f"got {type(config).__name__}")
    return FAMILIES[type(config)]


@dataclass
class LayerNumbers:
    cosine: float
    flushed_norm: float
    update_error: float
    swamped: float


@dataclass
class StepReplay:
    """One alternative at one step: per layer and over all layers (``total``)."""

    alternative: str
    step: int
    scale: float
    layers: dict[str, LayerNumbers]
    total: LayerNumbers


@dataclass
class Replay:
    config: Any  # an LMConfig or a CNNConfig
    steps: list[int]
    replays: list[StepReplay] = field(default_factory=list)

    def mean(self, alternative: str, what: str, layer: str | None = None) -> float:
        """``what`` (a LayerNumbers field) of ``alternative`` averaged over the steps (over
        all layers, or one ``layer``)."""
        values = [getattr(r.total if layer is None else r.layers[layer], what)
                  for r in self.replays if r.alternative == alternative]
        return float(np.mean(values))

    def alternatives(self) -> list[str]:
        return list(dict.fromkeys(r.alternative for r in self.replays))

    def numbers(self) -> dict[str, Any]:
        """JSON-ready: per alternative, the totals averaged over the steps and per step."""
        out: dict[str, Any] = {"config": self.config.describe(), "steps": self.steps,
                               "model": family(self.config).name,
                               "alternatives": {}}
        for name in self.alternatives():
            rows = [r for r in self.replays if r.alternative == name]
            out["alternatives"][name] = {
                **{k: round(self.mean(name, k), 6) for k in LayerNumbers.__dataclass_fields__},
                "scales": [r.scale for r in rows],
                "per_layer_last_step": {
                    layer: {k: round(float(getattr(v, k)), 6)
                            for k in LayerNumbers.__dataclass_fields__}
                    for layer, v in rows[-1].layers.items()}}
        return out


def compare(g_ref: np.ndarray, g_alt: np.ndarray, applied_ref: np.ndarray,
            applied_alt: np.ndarray, delta_alt: np.ndarray) -> LayerNumbers:
    """The four numbers for one set of elements (float64 arrays of the same shape): the
    gradients (reference, alternative), the updates applied to the stored weights (reference,
    alternative) and the alternative's update before it was stored (``delta_alt``)."""
    g_ref, g_alt = g_ref.ravel(), g_alt.ravel()
    norm_ref, norm_alt = np.linalg.norm(g_ref), np.linalg.norm(g_alt)
    finite = bool(np.all(np.isfinite(g_alt)))
    if not finite:
        cosine = math.nan
    elif norm_ref == 0 or norm_alt == 0:
        cosine = 1.0 if norm_ref == norm_alt else 0.0
    else:
        cosine = float(np.dot(g_ref, g_alt) / (norm_ref * norm_alt))
    flushed = (g_alt == 0) & (g_ref != 0)
    flushed_norm = float(np.linalg.norm(g_ref[flushed]) / norm_ref) if norm_ref else 0.0
    a_ref, a_alt = applied_ref.ravel(), applied_alt.ravel()
    norm_update = np.linalg.norm(a_ref)
    with np.errstate(invalid="ignore", over="ignore"):
        error = float(np.linalg.norm(a_alt - a_ref) / norm_update) if norm_update else (
            0.0 if not np.any(a_alt) else math.inf)
    moved = delta_alt.ravel() != 0
    moves = int(np.count_nonzero(moved))
    swamped = float(np.count_nonzero(moved & (a_alt == 0))) / max(moves, 1)
    return LayerNumbers(cosine, flushed_norm, error, swamped)


def _gradients(model: Any, x: np.ndarray, y: np.ndarray, scale: float) -> list[np.ndarray]:
    loss_fn = SparseCategoricalCrossentropy(from_logits=True)
    with nn.GradientTape() as tape, np.errstate(all="ignore"):
        loss = loss_fn(y, model(x, training=True)) * scale
    grads = tape.gradient(loss, model.trainable_variables)
    return [np.asarray(g.data, dtype=np.float64) / scale for g in grads]


def _scaled_gradients(model: Any, x: np.ndarray, y: np.ndarray,
                      scaled: bool) -> tuple[list[np.ndarray], float]:
    scale = START_SCALE if scaled else 1.0
    while True:
        grads = _gradients(model, x, y, scale)
        if not scaled or all(np.all(np.isfinite(g)) for g in grads) or scale <= 1.0:
            return grads, scale
        scale /= 2


def _updates(optimizer: Any, variables: list[Any], grads: list[np.ndarray],
             weights: list[np.ndarray], formats: list[Any]
             ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(update before storing, update applied to the stored weight) per variable: the
    optimizer's own formula from a copy of its state for each variable."""
    deltas, applied = [], []
    for var, g, w, fmt in zip(variables, grads, weights, formats, strict=True):
        w32 = w.astype(np.float32)
        delta = optimizer.preview_update(var, g.astype(np.float32), weight=w32)
        with np.errstate(all="ignore"):
            new = w32 - delta
            if fmt is not None:
                new = fpsim.round(new, fmt)
        deltas.append(np.asarray(delta, np.float64))
        applied.append(np.asarray(new, np.float64) - w32.astype(np.float64))
    return deltas, applied


def _layer_of(name: str) -> str:
    return name.rsplit("/", 1)[0]


def replay(config: Any = None, steps: Sequence[int] = REPLAY_STEPS,
           alternatives: Sequence[str] | None = None,
           progress: Callable[[str], None] | None = None) -> Replay:
    """Train the model ``config`` configures (an LMConfig or a CNNConfig; default
    ``LMConfig()``) in float32 and, at each step in ``steps`` (before that step's update),
    replay the step under every alternative (default all of its family's). Returns the
    per-layer numbers of every replay."""
    config = LMConfig() if config is None else config
    kind = family(config)
    known = {a.name: a for a in kind.alternatives}
    names = list(known if alternatives is None else alternatives)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"replay: alternatives must be among {list(known)} for the "
                         f"{kind.name}, got {unknown}")
    wanted = sorted(set(int(s) for s in steps))
    if not wanted or wanted[0] < 0 or wanted[-1] >= config.steps:
        raise ValueError(f"replay: steps must lie in 0..{config.steps - 1} (config.steps "
                         f"{config.steps}), got {list(steps)}")
    say = progress or (lambda line: None)
    (x, y), _ = kind.data(config)
    b = config.batch_size
    reference = kind.build(config, REFERENCE)
    optimizer = config.make_optimizer()
    reference.compile(optimizer, SparseCategoricalCrossentropy(from_logits=True))
    models = {n: kind.build(config, known[n]) for n in names}
    variables = reference.trainable_variables
    layer_names = [_layer_of(str(v.name)) for v in variables]
    found = Replay(config, wanted)
    done = 0
    for step in wanted:
        if step > done:  # train the reference up to this step
            reference.fit(x[done * b:step * b], y[done * b:step * b], batch_size=b, epochs=1,
                          shuffle=False, verbose=0, telemetry=False, loss_scale="none")
            done = step
        if step == 0:  # Adam's slots exist from its first update: build them (zeros)
            optimizer.build(variables)
        xb, yb = x[step * b:(step + 1) * b], y[step * b:(step + 1) * b]
        weights = [np.asarray(v.data) for v in variables]
        g_ref = _gradients(reference, xb, yb, 1.0)
        d_ref, a_ref = _updates(optimizer, variables, g_ref, weights, [None] * len(weights))
        for name in names:
            alt, model = known[name], models[name]
            model.set_weights(reference.get_weights())
            grads, scale = _scaled_gradients(model, xb, yb, alt.scaled)
            formats = [None if alt.masters else getattr(v, "fmt", None)
                       for v in model.trainable_variables]
            stored = [np.asarray(v.data, np.float64) for v in model.trainable_variables]
            d_alt, a_alt = _updates(optimizer, variables, grads, stored, formats)
            per_layer = {}
            for layer in dict.fromkeys(layer_names):
                idx = [i for i, n in enumerate(layer_names) if n == layer]
                per_layer[layer] = compare(*(np.concatenate([arrays[i].ravel() for i in idx])
                                             for arrays in (g_ref, grads, a_ref, a_alt, d_alt)))
            total = compare(*(np.concatenate([a.ravel() for a in arrays])
                              for arrays in (g_ref, grads, a_ref, a_alt, d_alt)))
            found.replays.append(StepReplay(name, step, scale, per_layer, total))
        say(f"  step {step}: replayed under {len(names)} alternatives")
    return found
