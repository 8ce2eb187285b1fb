"""nn's commands for the ``fpsim`` command line: ``fpsim train`` and ``fpsim compare``.

``COMMANDS`` is what fpsim's command line finds through the ``fpsim.commands`` entry point
(see ``fpsim.cli``). The experiments and their defaults live in ``nn.experiments``, the
pictures in ``nn.plot``; this module only declares options, checks them and prints.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nn
from fpsim.atomic import write_bytes
from fpsim.cli import Command, check_writable, positive_int
from nn import experiments as ex
from nn.engine import checks
from nn.engine.blas import BLAS_THREADS, limit_blas
from nn.experiments import replay, seeds, torch_backend, torch_replay
from nn.experiments.result import loss_text
from nn.losses import SparseCategoricalCrossentropy


def parse_loss_scale(text: str | None) -> str | float | None:
    """``--loss-scale``: "dynamic", "none" or a fixed scale, checked by the one rule of
    ``nn.engine.checks.loss_scale`` (a normal float32)."""
    if text is None:
        return None
    key = text.strip().lower()
    if key in ("dynamic", "none"):
        return key
    try:
        value = float.fromhex(key) if "0x" in key else float(key)
    except (ValueError, OverflowError):
        value = math.nan
    return checks.loss_scale("--loss-scale", value, alternatives="'dynamic', 'none' or ",
                             written=text.strip())


def _loss_scale_arg(text: str) -> str | float | None:
    try:
        return parse_loss_scale(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--loss-scale ")) from None


# --- fpsim train --------------------------------------------------------------------------------
def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.ArgumentDefaultsHelpFormatter
    parser.add_argument("--policy", default=ex.TRAIN_POLICY, metavar="P",
                        help="precision policy: float32, mixed_float16, mixed_bfloat16, "
                             "float16, bfloat16, mixed_e4m3fn, ...")
    parser.add_argument("--loss-scale", type=_loss_scale_arg, default=None, metavar="S",
                        help="dynamic, none or a fixed number; None: dynamic under "
                             "mixed_float16 (and other narrow mixed policies), none otherwise")
    parser.add_argument("--optimizer", choices=ex.optimizer_names(),
                        default=ex.TRAIN_OPTIMIZER,
                        help="optimizer with its default learning rate: "
                             + ", ".join(f"{k} {ex.default_learning_rate(k):g}"
                                         for k in ex.optimizer_names()))
    parser.add_argument("--epochs", type=positive_int, default=ex.TRAIN_EPOCHS,
                        help="passes over the training data")
    parser.add_argument("--batch-size", type=positive_int, default=ex.TRAIN_BATCH_SIZE,
                        help="samples per step")
    parser.add_argument("--seed", type=int, default=ex.SEED,
                        help="seed of the weights and of the shuffling")
    parser.add_argument("--save", default=None, metavar="PATH",
                        help="write a checkpoint (.npz) there at the end")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def train(args: argparse.Namespace) -> int:
    """``fpsim train --policy P ...``: one MLP on digits, a progress bar, a summary at the end."""
    nn.Policy(args.policy)  # an unknown policy name fails here with the list of valid ones
    if args.save:
        check_writable(Path(args.save), "--save")
    (x, y), (x_test, y_test) = ex.load_data()
    model = ex.build_mlp(args.policy, seed=args.seed)
    model.compile(ex.make_optimizer(args.optimizer),
                  SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    history = model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs, seed=args.seed,
                        verbose=0 if args.quiet else 1, loss_scale=args.loss_scale)
    scores = ex.held_out_scores(model, x_test, y_test)
    loss, accuracy = scores["loss"], scores["accuracy"]
    scaler = model.loss_scale_optimizer
    print(f"policy {args.policy}, optimizer {args.optimizer}, {args.epochs} epochs: "
          f"test loss {loss:.4f}, test accuracy {accuracy:.1%}")
    scale = "none" if scaler is None else f"{scaler.loss_scale:g}"
    print(f"loss scale {scale}, skipped steps {history.skipped_steps}, swamped updates "
          f"{sum(history.swamped_updates):,}, {history.wall_time:.1f} s")
    print(history.gradient_table())
    if args.save:
        model.save(args.save)
        print(f"saved {args.save}")
    return 0


# --- fpsim compare ------------------------------------------------------------------------------
def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.ArgumentDefaultsHelpFormatter
    parser.add_argument("--experiment", choices=ex.experiment_names(),
                        default=ex.DEFAULT_EXPERIMENT,
                        help="which story: " + "; ".join(
                            f"{e.name}: {e.title}" for e in ex.EXPERIMENTS.values())
                        + f"; {ex.DIGITS}: {ex.table.DIGITS_TITLE}")
    parser.add_argument("--list", action="store_true",
                        help="print one line per experiment (its technique and claims) and stop")
    parser.add_argument("--all", action="store_true",
                        help="every experiment of the table in turn (not digits)")
    parser.add_argument("--seeds", type=_seeds_arg, default=None, metavar="K|LIST",
                        help="a count K (seeds 0 to K-1) or a list such as 100,101,102: every "
                             "variant is trained from each seed (initial weights and batch "
                             f"order); None: {ex.LOSS_CLAIM_SEEDS} for an experiment with a "
                             "loss claim")
    parser.add_argument("--json", default=None, metavar="PATH",
                        help="write the seeds' numbers, intervals and verdicts there (a list "
                             "of objects with --all)")
    parser.add_argument("--what-if", action="store_true",
                        help="replay steps of one float32 trajectory of the experiment's "
                             "model (the language model or the CNN; the language model for "
                             "the others) under each alternative and measure its gradients "
                             "and update per layer")
    parser.add_argument("--resume", action="store_true",
                        help="with --all and --json: keep the experiments PATH already holds "
                             "for the same seeds and steps, and run only the others")
    parser.add_argument("--processes", type=positive_int, default=None, metavar="N",
                        help="seeds trained at once, one process each; None: one per core")
    parser.add_argument("--blas-threads", type=_threads_arg, default=BLAS_THREADS,
                        metavar="N",
                        help="BLAS threads per process (threadpoolctl; 0: as the environment "
                             "sets them, e.g. OPENBLAS_NUM_THREADS)")
    parser.add_argument("--out", default=".", metavar="DIR",
                        help="directory for compare.png (created if missing)")
    parser.add_argument("--epochs", type=positive_int, default=None,
                        help=f"digits only: epochs per run; None: {ex.EPOCHS} "
                             f"({ex.QUICK_EPOCHS} with --quick)")
    parser.add_argument("--steps", type=positive_int, default=None,
                        help=f"the experiments (not digits): training steps per run; None: "
                             f"{ex.DEFAULT.steps} (" + ", ".join(
                                 f"{e.name} {e.config.steps}"
                                 for e in ex.EXPERIMENTS.values()
                                 if e.config.steps != ex.DEFAULT.steps)
                             + f"; {ex.QUICK_STEPS} with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help=f"a short run ({ex.QUICK_EPOCHS} epochs, or {ex.QUICK_STEPS} "
                             "steps)")
    parser.add_argument("--backend", choices=("nn", "torch"), default="nn",
                        help="nn: this package's trainer; torch: the LM or the CNN as a "
                             "PyTorch module under fpsim.torch.emulate, with the same seeds, "
                             "verdicts, JSON and picture (nn.experiments.torch_backend; "
                             "experiments "
                             f"{', '.join(torch_backend.SUPPORTED)})")
    parser.add_argument("--device", default="cpu",
                        help="--backend torch: the torch device (cpu, cuda)")
    parser.add_argument("--scale", type=positive_int, default=1, metavar="K",
                        help="--backend torch: the model K times as wide as the classroom "
                             "one (the LM's embedding, heads and feed-forward width, the CNN's "
                             "filters, times K)")


def _threads_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (as the environment sets them) or a "
                                         f"positive thread count, got {text.strip()!r}")
    return value


def _seeds_arg(text: str) -> list[int]:
    try:
        return seeds.parse_seeds(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--seeds ")) from None


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    table = [header, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(row, widths, strict=True)))
             for row in table]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def _scale(scale: float | None) -> str:
    return "-" if scale is None else f"2^{math.log2(scale):g}"


def compare_table(results: list[ex.RunResult]) -> str:
    """The digits story's printed table: one row per configuration."""
    header = ("run", "test acc", "skipped", "final scale", "act. grads -> 0", "swamped",
              "time")
    return _table(header, [
        (r.label, f"{r.test_accuracy:.1%}", str(r.skipped_steps), _scale(r.final_loss_scale),
         f"{r.activation_underflow:.1%}", f"{r.swamped_updates:,}", f"{r.wall_time:.1f} s")
        for r in results])


def experiment_table(result: ex.ExperimentResult) -> str:
    """An experiment's printed table: one row per run; the held-out accuracy (a classifier's
    runs), the held-out loss (nats per character, or per image) and its gap to the first row,
    then what the rounding did."""
    header: tuple[str, ...] = ("run", "test loss", "gap", "act. grads -> 0", "subnormal",
                               "swamped", "skipped", "final scale", "NaN at step", "time")
    first = result.runs[0].test_loss
    accuracy = all(r.test_accuracy is not None for r in result.runs)  # a classifier's runs

    def loss(v: float) -> str:
        return "nan" if not math.isfinite(v) else f"{v:.3f}"

    def share(r: ex.LMRun, v: float) -> str:
        return f"{v:.1%}" if r.telemetry else "-"  # "-": not counted in this experiment

    rows: list[tuple[str, ...]] = [
        (r.label, loss(r.test_loss), "-" if i == 0 else (
            "nan" if not math.isfinite(r.test_loss) else f"{r.test_loss - first:+.4f}"),
         share(r, r.activation_underflow), share(r, r.activation_subnormal),
         f"{r.swamped_updates:,}", str(r.skipped_steps), _scale(r.final_loss_scale),
         "-" if r.nan_step is None else str(r.nan_step), f"{r.wall_time:.1f} s")
        for i, r in enumerate(result.runs)]
    if accuracy:
        header = (*header[:1], "test acc", *header[1:])
        rows = [(row[0], f"{r.test_accuracy:.1%}", *row[1:])
                for row, r in zip(rows, result.runs, strict=True)]
    return _table(header, rows)


def _compare_digits(args: argparse.Namespace, out: Path) -> None:
    from nn import plot  # matplotlib is needed only here

    epochs = args.epochs if args.epochs is not None else (
        ex.QUICK_EPOCHS if args.quick else ex.EPOCHS)
    data = ex.load_data()
    print(f"digits, MLP {ex.HIDDEN}, {epochs} epochs, batch {ex.BATCH_SIZE}, seed {ex.SEED}")
    print(f"teaching device: the loss is multiplied by 2^{math.log2(ex.LOSS_WEIGHT):g} (and "
          "the SGD learning rate divided by it) to put the gradients where fp16 underflows")
    warm = ex.warm_up(data)
    print(f"one-time compilation and warm-up (one step of each run, not in the times below): "
          f"{warm:.1f} s", flush=True)
    results = ex.run_compare(epochs, data=data)
    print(compare_table(results))
    plot.compare_figure(results, out / "compare.png")


def _interval(v: tuple[float, float] | None) -> str:
    return "-" if v is None else f"[{loss_text(v[0], True)}, {loss_text(v[1], True)}]"


def seeds_table(seeded: seeds.SeededResult) -> str:
    """Per run label: the held-out loss's mean over the seeds with its 95% t interval, and
    each seed's."""
    header = ("run", "mean held-out loss", "95% interval",
              *(f"seed {s}" for s in seeded.seeds))

    def num(v: float) -> str:
        return loss_text(v)

    rows = []
    for label in seeded.labels:
        interval = seeded.variant_interval(label)
        rows.append((label, "-" if interval is None else loss_text(interval[0]),
                     "-" if interval is None else (f"[{loss_text(interval[1])}, "
                                                   f"{loss_text(interval[2])}]"),
                     *(num(v) for v in seeded.losses(label))))
    return _table(header, rows)


def claim_lines(seeded: seeds.SeededResult) -> list[str]:
    """One line per claim: the gap to its reference (mean over the seeds, paired by seed) with
    its 95% interval, and the verdict."""
    lines = []
    for c in seeded.claims():
        v = c.verdict
        gap = ("" if v.gap_mean is None else f"gap {loss_text(v.gap_mean, True)}, 95% interval "
               f"{_interval(v.gap_ci95)} over {len(c.gaps)} seeds (paired); ")
        lines.append(f"claim: {c.claim.describe()}: {gap}{v.verdict.upper()} ({v.reason})")
    return lines


def _command(args: argparse.Namespace, name: str | None, seed_list: list[int]) -> str:
    words = ["fpsim", "compare", "--all" if name is None else f"--experiment {name}",
             f"--seeds {','.join(map(str, seed_list))}" if seed_list != list(
                 range(len(seed_list))) else f"--seeds {len(seed_list)}"]
    if args.steps is not None:
        words.append(f"--steps {args.steps}")
    if args.quick:
        words.append("--quick")
    if args.backend == "torch":
        words += ["--backend torch", f"--device {args.device}",
                  *([f"--scale {args.scale}"] if args.scale != 1 else [])]
    if args.json:
        words.append(f"--json {args.json}")
    return " ".join(words)


@dataclass(frozen=True)
class _Backend:
    """How one backend trains an experiment's seeds: its ``run`` of one seed (None: the
    table's), its warm-up, the configuration it trains, the processes and BLAS threads of
    ``seeds.run_seeds`` and what it adds to the results file."""

    run: Callable[[Any], Any] | None
    warm_up: Callable[[], float]
    config: Any
    processes: int | None
    blas_threads: int | None
    numbers: dict[str, Any]


def _nn_backend(args: argparse.Namespace, name: str, config: Any) -> _Backend:
    return _Backend(None, lambda: ex.warm_up_experiment(name), config, args.processes,
                    args.blas_threads or None, {})


def _torch_backend(args: argparse.Namespace, name: str, config: Any) -> _Backend:
    # one process unless asked (ours): torch spreads one seed over the cores itself; its
    # threads are torch's own, so BLAS is left as the environment set it
    return _Backend(torch_backend.runner(name, args.device),
                    lambda: torch_backend.warm_up(name, args.device),
                    torch_backend.scaled(config, args.scale), args.processes or 1, None,
                    torch_backend.describe(args.device, args.scale))


BACKENDS: dict[str, Callable[[argparse.Namespace, str, Any], _Backend]] = {
    "nn": _nn_backend, "torch": _torch_backend}


def _compare_experiment(args: argparse.Namespace, name: str, png: Path) -> dict[str, object]:
    from nn import plot  # matplotlib is needed only here

    entry = ex.experiment(name)
    backend = BACKENDS[args.backend](args, name, entry.config_for(
        steps=args.steps if args.steps is not None else (
            ex.QUICK_STEPS if args.quick else None)))
    seed_list = args.seeds if args.seeds is not None else list(range(entry.default_seeds))
    print(f"experiment {entry.name}: {entry.title}")
    print(f"technique: {entry.technique}")
    if backend.numbers:
        print("backend: " + ", ".join(f"{k} {v}" for k, v in backend.numbers.items()))
    warm = backend.warm_up()
    print(f"one-time compilation and warm-up (the experiment at 2 steps, not in the times "
          f"below): {warm:.1f} s", flush=True)
    seeded = seeds.run_seeds(name, seed_list, config=backend.config,
                             processes=backend.processes, blas_threads=backend.blas_threads,
                             progress=lambda line: print(line, flush=True), run=backend.run)
    result = seeded.first
    assert result is not None
    print(result.config.describe().replace(f"seed {seed_list[0]}",
                                           f"seeds {', '.join(map(str, seed_list))}"))
    print(seeds_table(seeded))
    for line in claim_lines(seeded):
        print(line)
    print(f"seed {seed_list[0]} in detail; knob: {result.knob}")
    print(experiment_table(result))
    for line in entry.findings(result):
        print(line)
    plot.experiment_figure(seeded, png)
    print(f"wrote {png} ({seeded.wall_time:.1f} s for the seeds)", flush=True)
    return {**seeded.numbers(_command(args, None if args.all else name, seed_list)),
            **backend.numbers}


def replay_table(found: Any) -> str:
    """Per alternative, averaged over the replayed steps and every layer: gradient cosine to
    float32, share of the gradient norm flushed, update error, share of updates swamped."""
    header = ("alternative", "loss scale", "grad cosine", "norm flushed", "update error",
              "swamped")
    rows: list[tuple[str, ...]] = []
    for name in found.alternatives():
        scales = sorted({r.scale for r in found.replays if r.alternative == name})
        rows.append((name, ", ".join(_scale(s) if s != 1 else "1" for s in scales),
                     f"{found.mean(name, 'cosine'):.6f}",
                     f"{found.mean(name, 'flushed_norm'):.2%}",
                     f"{found.mean(name, 'update_error'):.2%}",
                     f"{found.mean(name, 'swamped'):.2%}"))
    return _table(header, rows)


def _what_if(args: argparse.Namespace) -> None:
    limit_blas(args.blas_threads or None)
    name = args.experiment if args.experiment in ex.EXPERIMENTS else ex.DEFAULT_EXPERIMENT
    config = ex.experiment(name).config
    if type(config) not in replay.FAMILIES:  # e.g. fp8's MLP: the language model instead
        config = ex.DEFAULT
    if args.steps is not None or args.quick:
        config = config.with_(steps=args.steps if args.steps is not None else ex.QUICK_STEPS)
    steps = sorted({0, config.steps // 3, config.steps - 1})
    print(f"what-if replay along one float32 trajectory: {config.describe()}")
    print(f"replayed steps {steps}: the same weights, batch and optimizer state under each "
          "alternative, measured against the float32 replay of the same step")
    found = replay.replay(config, steps, progress=lambda line: print(line, flush=True))
    print(replay_table(found))
    last = [r for r in found.replays if r.step == steps[-1]]
    for r in last:
        layer, worst = min(r.layers.items(), key=lambda item: item[1].cosine
                           if math.isfinite(item[1].cosine) else -math.inf)
        print(f"{r.alternative}, step {r.step}: lowest gradient cosine in {layer} "
              f"({worst.cosine:.6f}; {worst.flushed_norm:.2%} of its norm flushed, update "
              f"error {worst.update_error:.2%}, {worst.swamped:.2%} swamped)")
    if args.json:
        numbers = found.numbers()
        numbers["command"] = " ".join(["fpsim compare --what-if", f"--experiment {name}",
                                       *([f"--steps {args.steps}"] if args.steps else []),
                                       f"--json {args.json}"])
        numbers["date"] = _now()
        numbers["machine"] = seeds.machine()
        _write_json(Path(args.json), numbers)
        print(f"wrote {args.json}")


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


# --- which options each kind of compare run takes --------------------------------------------
# one home for the rule "an option is honoured or refused": a run kind -> (the options it takes,
# what it is). An option given with a value other than its default that its kind does not take
# is refused naming it (it used to be ignored: ``--experiment digits --steps 2``).
_RUNS = frozenset({"--steps", "--quick", "--seeds", "--json", "--out", "--processes",
                   "--blas-threads"})  # what a run of the table's experiments reads
COMPARE_KINDS: dict[str, tuple[frozenset[str], str]] = {
    "list": (frozenset({"--list"}), "--list prints the table and stops"),
    "what-if": (frozenset({"--what-if", "--experiment", "--steps", "--quick", "--json",
                           "--blas-threads"}),
                "--what-if replays --steps steps of one float32 trajectory of a language "
                "model"),
    "all": (_RUNS | {"--all", "--resume"}, "--all runs every experiment of the table"),
    "digits": (frozenset({"--experiment", "--epochs", "--quick", "--out"}),
               f"the {ex.DIGITS} story has one fixed seed and no claims, and trains for "
               "--epochs epochs"),
    "experiment": (_RUNS | {"--experiment"},
                   "the table's experiments train for --steps steps per seed"),
    "torch": (frozenset({"--backend", "--device", "--scale", "--experiment", "--all", "--steps",
                         "--quick", "--seeds", "--json", "--out", "--processes", "--resume"}),
              "--backend torch runs --experiment NAME (or --all of its experiments) from "
              "--seeds on fpsim.torch"),
    "torch what-if": (frozenset({"--backend", "--device", "--scale", "--what-if",
                                 "--experiment", "--steps", "--quick", "--json"}),
                      "--backend torch --what-if replays --steps steps of one float32 "
                      "trajectory of the torch language model"),
}


def _compare_kind(args: argparse.Namespace) -> str:
    """The kind of run ``args`` asks for: the first of --list, --backend torch (with or without
    --what-if), --what-if, --all, digits."""
    if args.list:
        return "list"
    if args.backend == "torch":
        return "torch what-if" if args.what_if else "torch"
    if args.what_if:
        return "what-if"
    if args.all:
        return "all"
    return "digits" if args.experiment == ex.DIGITS else "experiment"


def check_compare_options(args: argparse.Namespace) -> None:
    """Raise ValueError naming every option ``args`` sets that its kind of run would ignore,
    and what that kind takes (``COMPARE_KINDS``). An option counts as set when its value is
    not the parser's default."""
    probe = argparse.ArgumentParser()
    add_compare_arguments(probe)
    defaults = vars(probe.parse_args([]))
    kind = _compare_kind(args)
    takes, what = COMPARE_KINDS[kind]
    given = ["--" + dest.replace("_", "-") for dest, default in defaults.items()
             if getattr(args, dest) != default]  # every compare option is --its-dest
    ignored = [o for o in given if o not in takes]
    if ignored:
        allowed = ", ".join(sorted(takes))
        verb = "does" if len(ignored) == 1 else "do"
        raise ValueError(f"{', '.join(ignored)} {verb} not apply here: {what}; it takes "
                         f"{allowed}")
    if kind == "what-if" and args.experiment != defaults["experiment"]:
        config = ex.default_config(args.experiment) if args.experiment in ex.EXPERIMENTS else None
        if type(config) not in replay.FAMILIES:
            models = [n for n, e in ex.EXPERIMENTS.items() if type(e.config) in replay.FAMILIES]
            raise ValueError(f"--what-if replays an experiment of the language model or the "
                             f"CNN; --experiment {args.experiment} is neither (those that are: "
                             f"{', '.join(models)})")


def compare(args: argparse.Namespace) -> int:
    """``fpsim compare [--experiment NAME | --all | --list] [--seeds K|LIST] [--json PATH]
    [--out DIR] [--steps N | --epochs E] [--quick]``: tables and verdicts on stdout, a PNG per
    experiment in DIR (compare.png; NAME.png with --all)."""
    if args.list:
        check_compare_options(args)
        print("\n".join(ex.table.listing()))
        return 0
    out = Path(args.out)
    if not args.what_if:  # the what-if replay draws no picture
        check_writable(out / "compare.png", "--out")
    if args.json:
        check_writable(Path(args.json), "--json")
    check_compare_options(args)
    start = time.perf_counter()
    if args.backend == "torch" and args.what_if:
        _what_if_torch(args)
        return 0
    if args.what_if:
        _what_if(args)
        return 0
    if args.experiment == ex.DIGITS and not args.all and args.backend == "nn":
        _compare_digits(args, out)
        print(f"wrote {out / 'compare.png'} ({time.perf_counter() - start:.1f} s in all)")
        return 0
    names = ALL[args.backend]() if args.all else [args.experiment]
    if args.backend == "torch":
        for name in names:
            torch_backend.check_supported(name)
    kept = _finished(args) if args.resume else {}
    found: dict[str, object] = {}
    for name in names:
        if name in kept:
            print(f"experiment {name}: kept from {args.json} (same seeds and steps)")
            found[name] = kept[name]
            continue
        png = out / (f"{name}.png" if args.all else "compare.png")
        found[name] = _compare_experiment(args, name, png)
        if args.json:  # written after each experiment: a long --all keeps what finished
            done = [found.get(n, kept.get(n)) for n in names if n in found or n in kept]
            _write_json(Path(args.json), done if args.all else found[name])
    if args.json:
        print(f"wrote {args.json}")
    print(f"{time.perf_counter() - start:.1f} s in all")
    return 0


# what --all runs on each backend (looked up when it runs)
ALL: dict[str, Callable[[], list[str]]] = {"nn": lambda: list(ex.EXPERIMENTS),
                                           "torch": lambda: list(torch_backend.SUPPORTED)}


def _what_if_torch(args: argparse.Namespace) -> None:
    """``--backend torch --what-if``: ``_what_if``'s replay on the torch LM (the experiment's
    LM, or the default one), ``--scale`` times as wide."""
    steps = args.steps if args.steps is not None else (ex.QUICK_STEPS if args.quick else None)
    config = ex.experiment(args.experiment).config if args.experiment in ex.EXPERIMENTS \
        else ex.DEFAULT
    config = torch_backend.scaled(
        (config if isinstance(config, ex.LMConfig) else ex.DEFAULT).with_(
            **({} if steps is None else {"steps": steps})), args.scale)
    replayed = sorted({0, config.steps // 3, config.steps - 1})
    print(f"what-if replay on the torch LM ({args.device}): {config.describe()}; "
          f"replayed steps {replayed}")
    found = torch_replay.what_if(config, replayed, args.device,
                                 lambda line: print(line, flush=True))
    print(replay_table(found))
    if args.json:
        numbers = found.numbers()
        numbers["command"] = " ".join([
            "fpsim compare --what-if --backend torch", f"--device {args.device}",
            *([f"--scale {args.scale}"] if args.scale != 1 else []),
            f"--experiment {args.experiment}",
            *([f"--steps {args.steps}"] if args.steps else []), f"--json {args.json}"])
        numbers["date"] = _now()
        numbers["machine"] = seeds.machine()
        numbers.update(torch_backend.describe(args.device, args.scale))
        _write_json(Path(args.json), numbers)
        print(f"wrote {args.json}")


def _finished(args: argparse.Namespace) -> dict[str, object]:
    """``--resume``: the experiments ``--json``'s file already holds with the seeds and steps
    this command would use, on its backend (an entry without one is nn's) and, on torch, its
    device and scale."""
    if not (args.all and args.json):
        raise ValueError("--resume goes with --all and --json PATH")
    path = Path(args.json)
    if not path.exists():
        return {}
    kept = {}
    for r in json.loads(path.read_text()):
        entry = ex.EXPERIMENTS.get(r.get("experiment"))
        if entry is None:
            continue
        seed_list = args.seeds if args.seeds is not None else list(range(entry.default_seeds))
        steps = args.steps if args.steps is not None else (
            ex.QUICK_STEPS if args.quick else entry.config.steps)
        same_backend = r.get("backend", "nn") == args.backend and (
            args.backend != "torch"
            or (r.get("device"), r.get("scale")) == (args.device, args.scale))
        if r.get("seeds") == seed_list and r.get("steps") == steps and same_backend:
            kept[entry.name] = r
    return kept


def _write_json(path: Path, numbers: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(numbers, indent=1, allow_nan=False) + "\n"
    write_bytes(path, text.encode("utf-8"), what="results file")  # all or nothing


COMMANDS = [
    Command("train", "train an MLP on the digits data under a precision policy",
            add_train_arguments, train),
    Command("compare", "mixed-precision experiments (a small transformer language model on "
            "Python's docs, a small CNN, an fp8 MLP, or the digits story): the same model "
            "trained a few ways from several seeds; per claim a gap with its confidence interval "
            "and a verdict, one PNG; --what-if replays steps under each alternative",
            add_compare_arguments, compare),
]
