"""nn's experiments: each technique of mixed precision shown to matter, as functions that
return the measured numbers (dataclasses; nothing is printed here).

- ``digits``: the original ``fpsim compare`` story on the 8x8 digits (its 2**-18 loss weight
  is a teaching device, labelled as such); its names are re-exported here, so
  ``import nn.experiments as ex; ex.run_compare()`` works as before.
- ``lm``: the small transformer language model on Python's own documentation, and one
  measured run of it.
- ``table``: every experiment in one table (``EXPERIMENTS``: name -> ``Experiment``, with
  its technique, default configuration and claims). Experiments 1, 5 and 6 (underflow from
  averaging, Adam's state in fp16, bf16 against fp16) run on the language model (``stories``);
  2, 3 and 4 run on ``cnn``'s small CNN fed 0-255 pixels: ``master_weights`` (``masters``),
  ``fp32_statistics`` (``statistics``) and ``fp32_accumulation`` (``accumulation``), each with
  a language-model version named ``..._lm``.
- ``seeds``: an experiment trained from several seeds, its intervals and verdicts.
- ``reconstruction``: bf16 against float32 and fp16 on a per-pixel reconstruction (an MLP
  autoencoder on the digits), a task that asks for more than bf16's 8 bits.
- ``replay``: the what-if replay of one float32 trajectory (the language model or the CNN).
- ``progress``: every experiment function takes ``progress=True`` for one bar per variant,
  e.g. ``ex.fp32_statistics(progress=True)``.
"""

from nn.experiments.accumulation import fp32_accumulation
from nn.experiments.cnn import CNNConfig, build_cnn, train_cnn
from nn.experiments.digits import (
    BATCH_SIZE,
    EPOCHS,
    GROWTH_STEPS,
    HIDDEN,
    LEARNING_RATE,
    LOSS_WEIGHT,
    MOMENTUM,
    QUICK_EPOCHS,
    RUNS,
    SEED,
    STORY_OPTIMIZER_SETTINGS,
    TRAIN_BATCH_SIZE,
    TRAIN_EPOCHS,
    TRAIN_OPTIMIZER,
    TRAIN_POLICY,
    RunResult,
    build_mlp,
    default_learning_rate,
    held_out_scores,
    load_data,
    make_optimizer,
    optimizer_names,
    run_compare,
    run_story,
    story_model,
    warm_up,
)
from nn.experiments.lm import LMConfig, LMRun, build_lm, train_lm
from nn.experiments.masters import master_weights
from nn.experiments.reconstruction import ReconstructionConfig, bf16_reconstruction
from nn.experiments.result import ExperimentResult
from nn.experiments.statistics import fp32_statistics
from nn.experiments.stories import (
    DEFAULT,
    adam_state,
    bf16_vs_fp16,
    fp32_accumulation_lm,
    fp32_statistics_lm,
    master_weights_lm,
    underflow_from_averaging,
    underflow_with_sgd,
)
from nn.experiments.table import (
    DIGITS,
    EXPERIMENTS,
    LOSS_CLAIM_SEEDS,
    QUICK_STEPS,
    Claim,
    Experiment,
    default_config,
    experiment,
    experiment_names,
    findings,
)
from nn.experiments.table import warm_up as warm_up_experiment

# ``fpsim compare``'s story when none is named (see the README for why this one)
DEFAULT_EXPERIMENT = "adam-state"


__all__ = [
    "DEFAULT", "DEFAULT_EXPERIMENT", "DIGITS", "EXPERIMENTS", "LOSS_CLAIM_SEEDS", "QUICK_STEPS",
    "Claim", "Experiment", "experiment",
    "CNNConfig", "ExperimentResult", "LMConfig", "LMRun", "adam_state", "bf16_vs_fp16",
    "build_cnn", "build_lm", "master_weights", "master_weights_lm", "fp32_accumulation_lm",
    "fp32_statistics_lm",
    "train_cnn", "ReconstructionConfig", "bf16_reconstruction",
    "default_config", "underflow_with_sgd",
    "experiment_names", "findings", "fp32_accumulation", "fp32_statistics",
    "train_lm", "underflow_from_averaging", "warm_up_experiment",
    "BATCH_SIZE", "EPOCHS", "GROWTH_STEPS", "HIDDEN", "LEARNING_RATE", "LOSS_WEIGHT", "MOMENTUM",
    "QUICK_EPOCHS", "RUNS", "SEED", "STORY_OPTIMIZER_SETTINGS", "TRAIN_BATCH_SIZE",
    "TRAIN_EPOCHS", "TRAIN_OPTIMIZER", "TRAIN_POLICY", "RunResult", "build_mlp",
    "default_learning_rate", "held_out_scores", "load_data", "make_optimizer",
    "optimizer_names", "run_compare", "run_story", "story_model", "warm_up",
]
