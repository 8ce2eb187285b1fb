"""The digits story (``fpsim compare --experiment digits``): its data, settings and runs.

The CLI (``nn.cli``), the tests and the tutorials all import this module; the settings below
are written here once.

The setting, chosen so that fp16's narrow range matters (digits is otherwise too easy):

- The loss is the mean cross-entropy times ``LOSS_WEIGHT = 2**-18``, as when a per-sample loss
  is averaged over a very large effective batch (gradient accumulation over many micro-batches,
  or per-token averaging in a language model). Every gradient is then 2**18 times smaller:
  the logits' gradient (p - onehot) / 64 * 2**-18 is at most 2**-24, fp16's smallest
  subnormal; the many entries at or below 2**-25 round to zero and what survives is
  subnormal (a few significant bits at most).
- The SGD learning rate is multiplied by 2**18 to compensate. Both factors are powers of two,
  so the float32 run is *bit-identical* to plain SGD (lr 0.05, momentum 0.9) on the plain loss:
  the setting changes nothing but where the gradients lie on fp16's exponent scale.
- Under mixed_float16 without loss scaling a large share of the activation gradients flush to
  zero and training ends far worse; the dynamic loss scale (Keras's rule, starting at 2**15,
  but doubling after ``GROWTH_STEPS = 10`` finite steps instead of 2000 so that a short run
  shows the climb, the overflow, the skipped step and the halving) lifts them back into range
  and matches float32; mixed_bfloat16 needs no scaling (fp32's exponent range); pure float16
  (fp16 weights, no master copy) also loses updates to swamping.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import nn
from nn.engine.registry import OPTIMIZERS
from nn.losses import SparseCategoricalCrossentropy
from nn.models.model import Model, WeightedLoss
from nn.precision.loss_scale import LossScaleOptimizer
from nn.training.history import History

HIDDEN = (64, 64)
LOSS_WEIGHT = 2.0**-18
LEARNING_RATE = 0.05
MOMENTUM = 0.9
BATCH_SIZE = 64
EPOCHS = 20
QUICK_EPOCHS = 4
GROWTH_STEPS = 10
SEED = 0

# ``fpsim train``'s defaults (its --help shows them from here)
TRAIN_POLICY = "mixed_float16"
TRAIN_OPTIMIZER = "sgd"
TRAIN_EPOCHS = 10
TRAIN_BATCH_SIZE = 64

# ``make_optimizer`` (and so ``fpsim train --optimizer``) offers every optimizer registered in
# nn.optimizers; the story's SGD runs with its own learning rate and momentum, the others with
# their Keras defaults.
STORY_OPTIMIZER_SETTINGS: dict[str, dict[str, float]] = {
    "sgd": {"learning_rate": LEARNING_RATE, "momentum": MOMENTUM},
}


def optimizer_names() -> list[str]:
    """The short names ``make_optimizer`` takes (nn.optimizers' registry)."""
    return nn.optimizers.names()


def default_learning_rate(name: str) -> float:
    """The learning rate ``make_optimizer(name)`` uses when none is given."""
    return float(make_optimizer(name).learning_rate)

RUNS: tuple[tuple[str, str, str], ...] = (
    # (label, policy, loss scaling)
    ("float32", "float32", "none"),
    ("mixed_float16, no scaling", "mixed_float16", "none"),
    ("mixed_float16 + dynamic", "mixed_float16", "dynamic"),
    ("mixed_bfloat16", "mixed_bfloat16", "none"),
    ("float16 (no master)", "float16", "none"),
)


def load_data() -> Any:
    """The digits data, ``((x_train, y_train), (x_test, y_test))``."""
    return nn.datasets.load_digits()


def build_mlp(policy: str, hidden: tuple[int, ...] = HIDDEN, seed: int = SEED,
              classes: int = 10) -> nn.Sequential:
    """Dense-relu layers and a Dense logits layer under ``policy``, initialised from ``seed``."""
    nn.set_random_seed(seed)
    with nn.policy_scope(policy):
        layers = [nn.Dense(h, activation="relu") for h in hidden] + [nn.Dense(classes)]
        return nn.Sequential(layers)


def make_optimizer(name: str, learning_rate: float | None = None) -> nn.optimizers.Optimizer:
    """A new optimizer by its registered name, with the story's settings for SGD (see
    STORY_OPTIMIZER_SETTINGS) and ``learning_rate`` if given."""
    cls = OPTIMIZERS.get_class(name)  # an unknown name raises, listing the known ones
    settings = dict(STORY_OPTIMIZER_SETTINGS.get(name.lower(), {}))
    if learning_rate is not None:
        settings["learning_rate"] = learning_rate
    optimizer: nn.optimizers.Optimizer = cls(**settings)
    return optimizer


def held_out_scores(model: Model, x_test: Any, y_test: Any) -> dict[str, float]:
    """``{"loss": ..., "accuracy": ...}`` of ``model`` on the test data."""
    scores = model.evaluate(x_test, y_test, batch_size=256, verbose=0, return_dict=True)
    assert isinstance(scores, dict)
    return scores


@dataclass
class RunResult:
    """One run of the compare story: one row of the ``fpsim compare`` table."""

    label: str
    policy: str
    loss_scaling: str
    test_accuracy: float
    skipped_steps: int
    final_loss_scale: float | None
    activation_underflow: float
    swamped_updates: int
    wall_time: float
    history: History

    def summary(self) -> dict[str, Any]:
        """The row's plain numbers (no history), e.g. for a test or a notebook table."""
        return {"label": self.label, "policy": self.policy, "loss_scaling": self.loss_scaling,
                "test_accuracy": self.test_accuracy, "skipped_steps": self.skipped_steps,
                "final_loss_scale": self.final_loss_scale,
                "activation_underflow": self.activation_underflow,
                "swamped_updates": self.swamped_updates, "wall_time": self.wall_time}


def story_model(policy: str, loss_scaling: str) -> Model:
    """The compare set-up's MLP, compiled with the weighted loss and scaled SGD (see above)."""
    model = build_mlp(policy)
    opt: Any = nn.SGD(LEARNING_RATE / LOSS_WEIGHT, momentum=MOMENTUM)
    if loss_scaling == "dynamic":
        opt = LossScaleOptimizer(opt, dynamic_growth_steps=GROWTH_STEPS)
    loss = WeightedLoss(SparseCategoricalCrossentropy(from_logits=True), LOSS_WEIGHT)
    model.compile(opt, loss, metrics=["accuracy"])
    return model


def run_story(label: str, policy: str, loss_scaling: str, data: Any, epochs: int,
              verbose: int = 0) -> RunResult:
    """Train one compare configuration and measure it."""
    (x, y), (x_test, y_test) = data
    model = story_model(policy, loss_scaling)
    start = time.perf_counter()
    history = model.fit(x, y, batch_size=BATCH_SIZE, epochs=epochs, seed=SEED, verbose=verbose,
                        loss_scale=None if loss_scaling == "dynamic" else "none")
    accuracy = held_out_scores(model, x_test, y_test)["accuracy"]
    wall = time.perf_counter() - start
    scaler = model.loss_scale_optimizer
    return RunResult(
        label=label, policy=policy, loss_scaling=loss_scaling, test_accuracy=float(accuracy),
        skipped_steps=history.skipped_steps,
        final_loss_scale=None if scaler is None else scaler.loss_scale,
        activation_underflow=history.gradient_share("underflow", "activation"),
        swamped_updates=int(sum(history.swamped_updates)), wall_time=wall, history=history)


def warm_up(data: Any) -> float:
    """One throwaway step (and evaluation) of every configuration of ``RUNS``, so that the
    one-time compilation of the rounding kernels is not counted in any run's time; returns
    the seconds it took. The runs that follow are unchanged: each builds its model from the
    seed again and shuffles from ``SEED``."""
    (x, y), (x_test, y_test) = data
    start = time.perf_counter()
    for _, policy, loss_scaling in RUNS:
        model = story_model(policy, loss_scaling)
        model.fit(x[:BATCH_SIZE], y[:BATCH_SIZE], batch_size=BATCH_SIZE, epochs=1, seed=SEED,
                  verbose=0, loss_scale=None if loss_scaling == "dynamic" else "none")
        model.evaluate(x_test[:256], y_test[:256], batch_size=256, verbose=0)
    return time.perf_counter() - start


def run_compare(epochs: int = EPOCHS, verbose: int = 0, data: Any = None) -> list[RunResult]:
    """Every configuration of ``RUNS`` on the digits data (same seed, same batches)."""
    data = load_data() if data is None else data
    return [run_story(label, policy, scaling, data, epochs, verbose)
            for label, policy, scaling in RUNS]
