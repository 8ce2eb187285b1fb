"""The fp8 experiment: a model that dies under plain e4m3fn trains under fp8 recipes.

The model: a character-level language model on the text that ships with CPython
(``pydoc_data.topics``, the help topics), printable ASCII plus newline (94 characters). Input:
the one-hot codes of the previous ``CONTEXT`` characters, concatenated; ``Dense(128, relu)``,
``Dense(94)`` logits; mean cross-entropy over the batch; Adam (learning rate 3e-3), batches of
256, one pass over the training text. The loss is the per-token mean, as in every language
model, so the logits' gradient ``(p - onehot) / 256`` is tiny: with p near 1/94, about 4e-5.

- plain e4m3fn (the policy "mixed_e4m3fn": every op's output cast to e4m3fn, no scaling):
  those gradients lie far below e4m3fn's smallest subnormal 2^-9 and flush to zero, except the
  target's own -1/256; the updates are lopsided and the loss climbs (diverges);
- "fp8_hybrid_delayed" (per-tensor delayed scaling, E4M3 forward, E5M2 backward) and "mxfp8"
  (32-element blocks with power-of-two scales): every tensor gets its own scale, and the test
  loss lands within a small margin of bf16's;
- "mxfp4" vs "nvfp4": the same 4-bit E2M1 elements, but NVFP4's blocks of 16 with an E4M3
  scale (plus one fp32 tensor scale) place each block better than MXFP4's blocks of 32 with
  power-of-two scales, and its loss is lower.

``run_fp8_experiment()`` returns one ``Fp8Result`` per policy; ``python -m nn.experiments.fp8``
prints the table (``--tokens`` for a quicker run).
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

import nn
import nn.experiments.progress as progress
from nn.engine.checks import count
from nn.experiments.lm import LMRun, final_loss, first_nonfinite_step
from nn.experiments.progress import variant_bar
from nn.experiments.result import ExperimentResult
from nn.losses import SparseCategoricalCrossentropy

POLICIES = ("mixed_bfloat16", "mixed_e4m3fn", "fp8_hybrid_delayed", "mxfp8", "mxfp4", "nvfp4")
CONTEXT = 3
HIDDEN = 128
LEARNING_RATE = 3e-3
BATCH_SIZE = 256
TOKENS = 36_000  # characters of text used (the last TEST_SHARE of them held out)
TEST_SHARE = 1 / 6
SEED = 0


@dataclass(frozen=True)
class Fp8Result:
    """One policy's run: held-out loss (nats per character), the training losses per step,
    whether any step's loss was NaN, and the wall time."""

    policy: str
    test_loss: float
    step_loss: np.ndarray
    nan_steps: int
    seconds: float

    @property
    def diverged(self) -> bool:
        """NaN, or a final training loss above the first one."""
        loss = self.step_loss
        return bool(self.nan_steps or not np.isfinite(self.test_loss)
                    or np.mean(loss[-10:]) > loss[0])


def load_text(tokens: int = TOKENS) -> tuple[np.ndarray, int]:
    """(character codes of the first ``tokens`` printable characters of CPython's pydoc
    topics in sorted-key order, vocabulary size)."""
    from pydoc_data.topics import topics

    text = "\n".join(topics[k] for k in sorted(topics))
    text = "".join(c for c in text if 32 <= ord(c) < 127 or c == "\n")
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    return np.array([index[c] for c in text[:tokens]], np.int64), len(chars)


def make_data(tokens: int = TOKENS) -> tuple[tuple[np.ndarray, ...], int]:
    """((x, y, x_test, y_test), vocabulary): one-hot contexts and next-character labels."""
    ids, vocab = load_text(tokens)
    onehot = np.eye(vocab, dtype=np.float32)
    x = np.concatenate([onehot[ids[i:len(ids) - CONTEXT + i]] for i in range(CONTEXT)], 1)
    y = ids[CONTEXT:]
    n_test = int(len(y) * TEST_SHARE)
    return (x[:-n_test], y[:-n_test], x[-n_test:], y[-n_test:]), vocab


def build_model(policy: str, vocab: int, seed: int = SEED) -> nn.Sequential:
    nn.set_random_seed(seed)
    return nn.Sequential([nn.Dense(HIDDEN, activation="relu", dtype=policy),
                          nn.Dense(vocab, dtype=policy)])


def run_policy(policy: str, data: tuple[np.ndarray, ...], vocab: int,
               seed: int = SEED) -> Fp8Result:
    """Train the model once under ``policy`` (one pass; ``seed`` draws the weights and the
    batch order) and measure it."""
    return _fit_policy(policy, data, vocab, seed)[0]


def _fit_policy(policy: str, data: tuple[np.ndarray, ...], vocab: int,
                seed: int) -> tuple[Fp8Result, Any]:
    x, y, x_test, y_test = data
    model = build_model(policy, vocab, seed)
    model.compile(nn.Adam(LEARNING_RATE), SparseCategoricalCrossentropy(from_logits=True))
    start = time.perf_counter()
    with np.errstate(all="ignore"):  # a diverging run's NaN and inf are the story here
        history = model.fit(x, y, batch_size=BATCH_SIZE, epochs=1, seed=seed, verbose=0,
                            telemetry=False, loss_scale="none")
        scores = model.evaluate(x_test, y_test, batch_size=1000, verbose=0, return_dict=True)
    assert isinstance(scores, dict)
    test_loss = float(scores["loss"])
    loss = np.array(history.step_loss)
    return Fp8Result(policy, test_loss, loss, int(np.count_nonzero(np.isnan(loss))),
                     time.perf_counter() - start), history


def run_fp8_experiment(policies: tuple[str, ...] = POLICIES, tokens: int = TOKENS
                       ) -> dict[str, Fp8Result]:
    """Every policy on the same data and initial weights."""
    data, vocab = make_data(count("tokens", tokens, minimum=10 * BATCH_SIZE))
    return {p: run_policy(p, data, vocab) for p in policies}


@dataclass(frozen=True)
class Fp8Config:
    """The fp8 experiment as a configuration of the experiment table: ``steps`` batches of
    ``BATCH_SIZE`` (one pass over ``steps * BATCH_SIZE`` training characters), ``seed``
    (weights and batch order) and the policies compared."""

    steps: int = round(TOKENS * (1 - TEST_SHARE)) // BATCH_SIZE
    seed: int = SEED
    policies: tuple[str, ...] = ("mixed_bfloat16", "mixed_e4m3fn", "fp8_hybrid_delayed",
                                 "mxfp8")

    @property
    def tokens(self) -> int:
        """The characters whose windows give exactly ``steps`` training batches."""
        train = self.steps * BATCH_SIZE
        windows = math.ceil(train / (1 - TEST_SHARE))
        while windows - int(windows * TEST_SHARE) > train:
            windows -= 1
        while windows - int(windows * TEST_SHARE) < train:
            windows += 1
        return windows + CONTEXT

    def describe(self) -> str:
        return (f"char LM on CPython's pydoc text: {CONTEXT} one-hot characters -> Dense "
                f"{HIDDEN} relu -> Dense logits; {self.steps} steps of Adam lr "
                f"{LEARNING_RATE:g}, batch {BATCH_SIZE}, no loss scale; seed {self.seed}")

    def with_(self, **changes: Any) -> Fp8Config:
        return replace(self, **changes)


FP8_DEFAULT = Fp8Config()


@progress.option
def fp8_recipes(config: Fp8Config = FP8_DEFAULT, *, progress: bool = False
                ) -> ExperimentResult:
    """Every policy of ``config`` trained from ``config.seed``, as an ``ExperimentResult``
    (its runs labelled by policy). ``progress``: one bar over the variants (a run is one
    ``fit`` of its pass, too short to tick by step)."""
    data, vocab = make_data(config.tokens)
    runs = []
    with variant_bar("fp8 variants", len(config.policies), unit="variant") as tick:
        for policy in config.policies:
            found, history = _fit_policy(policy, data, vocab, config.seed)
            tick()
            runs.append(_run(policy, found, history))
    return ExperimentResult(
        "fp8", "fp8 with per-tensor or block scaling vs plain e4m3fn (no scaling)", config,
        "the per-token mean loss: logit gradients near (1/vocab)/batch, far below e4m3fn's "
        "smallest subnormal 2^-9", runs)


def _run(policy: str, found: Fp8Result, history: Any) -> LMRun:
    return (
        LMRun(
            label=policy, policy=policy,
            test_loss=found.test_loss if math.isfinite(found.test_loss) else math.nan,
            final_loss=final_loss(history), activation_underflow=0.0,
            activation_subnormal=0.0, weight_underflow=0.0,
            swamped_updates=int(sum(history.swamped_updates)),
            skipped_steps=history.skipped_steps, final_loss_scale=None,
            nan_step=first_nonfinite_step(history), wall_time=found.seconds, history=history,
            telemetry=False))


def fp8_findings(r: ExperimentResult) -> list[str]:
    """What ``fp8_recipes``' numbers say, one sentence per line."""
    return [f"{run.label}: held-out loss {run.test_loss:.3f}, training loss (last 20 steps) "
            f"{run.final_loss:.3f}" + ("" if run.nan_step is None
                                       else f", not finite from step {run.nan_step}")
            for run in r.runs]


def table(results: dict[str, Fp8Result]) -> str:
    """One row per policy: held-out loss, first and last training loss, NaN steps, time."""
    lines = [f"{'policy':<20} {'test loss':>10} {'first':>7} {'last':>7} {'NaN steps':>10} "
             f"{'seconds':>8}"]
    for r in results.values():
        lines.append(f"{r.policy:<20} {r.test_loss:>10.3f} {r.step_loss[0]:>7.3f} "
                     f"{np.mean(r.step_loss[-10:]):>7.3f} {r.nan_steps:>10} {r.seconds:>8.1f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="fp8 recipes vs plain e4m3fn on a "
                                     "character language model (CPython's pydoc text)")
    parser.add_argument("--tokens", type=int, default=TOKENS)
    args = parser.parse_args(argv)
    print(table(run_fp8_experiment(tokens=args.tokens)))


if __name__ == "__main__":
    main()
