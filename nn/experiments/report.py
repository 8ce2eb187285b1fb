"""docs/experiments.md, written from the committed results: ``python -m nn.experiments.report``.

Every number on the page is formatted here from ``docs/results/experiments.json`` (written by
``fpsim compare --all --seeds 5 --json docs/results/experiments.json``) and
``docs/results/whatif.json`` and ``whatif_cnn.json`` (``fpsim compare --what-if --experiment
adam-state --json docs/results/whatif.json``, ``... --experiment statistics --json
docs/results/whatif_cnn.json``);
nothing is typed by hand, and a test regenerates the page and compares.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from fpsim.atomic import write_bytes
from nn.experiments.cnn import CNNConfig
from nn.experiments.intervals import SHOWN
from nn.experiments.lm import LMConfig
from nn.experiments.result import loss_text
from nn.experiments.table import EXPERIMENTS

RESULTS = Path("docs/results/experiments.json")
WHATIF = Path("docs/results/whatif.json")  # the language model's replay
WHATIF_CNN = Path("docs/results/whatif_cnn.json")  # the CNN's replay
PAGE = Path("docs/experiments.md")

# where a technique's loss effect is shown at a published scale (quoted when ours is not)
PUBLISHED: dict[str, str] = {
    "loss scaling": "Micikevicius et al. 2018, *Mixed Precision Training* (ICLR): the SSD "
                    "object detector diverges in mixed precision without loss scaling and "
                    "trains with a scale of 8; the bigLSTM language model needs a scale of 128",
    "fp32 master weights": "Micikevicius et al. 2018, section 3.1 (an FP32 master copy of the "
                           "weights): updates below half an fp16 ulp of their weight are lost",
    "fp32 accumulation": "Micikevicius et al. 2018, section 3.3 (arithmetic precision): "
                         "fp16 products accumulated into fp32",
}
# the replay alternative that shows each technique's mechanism, per replayed model
_COMMON = {
    "loss scaling": "unscaled fp16",
    "fp32 master weights": "fp16 weights, no masters",
    "fp32 statistics": "fp16 statistics",
    "fp32 softmax and statistics": "fp16 statistics",
    "bf16 vs fp16": "bf16",
}
MECHANISM: dict[str, dict[str, str]] = {
    "language model": {**_COMMON, "fp32 accumulation": "fp16 accumulation (logits)"},
    "CNN": {**_COMMON, "fp32 accumulation": "fp16 accumulation (convolutions)"},
}


def _gap(claim: dict[str, Any]) -> str:
    if claim["gap_mean"] is None:
        return "unbounded: the variant diverged" if claim["diverged_seeds"] else "-"
    ci = claim["gap_ci95"]
    interval = "" if ci is None else f" [{loss_text(ci[0], True)}, {loss_text(ci[1], True)}]"
    return f"{loss_text(claim['gap_mean'], True)}{interval}"


def _timing(r: dict[str, Any]) -> str | None:
    """One seed's cost: CPU seconds (all of the seed's process) and wall seconds, with the
    load the machine had when the experiment finished (None for results without them)."""
    cpu = [s.get("cpu_time") for s in r["per_seed"]]
    if not cpu or any(c is None for c in cpu):
        return None
    wall = [s["wall_time"] for s in r["per_seed"]]
    load = r.get("load_average")
    at = "" if not load else f", load average {load[0]:.1f} (1 min) when it finished"
    return (f"Time per seed: {sum(cpu) / len(cpu):.0f} s of CPU (most {max(cpu):.0f} s), "
            f"{sum(wall) / len(wall):.0f} s wall ({r['processes']} seeds at once{at}).")


def _replay_line(whatif: dict[str, Any] | None, alternative: str) -> str | None:
    if whatif is None or alternative not in whatif["alternatives"]:
        return None
    a = whatif["alternatives"][alternative]
    return (f"what-if replay ({alternative}, against float32 on the same weights and batch, "
            f"steps {', '.join(map(str, whatif['steps']))}): gradient cosine "
            f"{a['cosine']:.6f}, {a['flushed_norm']:.4%} of the gradient norm flushed, update "
            f"error {a['update_error']:.2%}, {a['swamped']:.2%} of updates swamped")


def _backend_options(r: dict[str, Any]) -> str:
    """The options of a result made on another backend than nn's (``--backend torch``: its
    device and scale), "" for nn's."""
    if r.get("backend", "nn") == "nn":
        return ""
    scale = "" if r.get("scale", 1) == 1 else f" --scale {r['scale']}"
    return f" --backend {r['backend']} --device {r['device']}{scale}"


def _model(name: str) -> str | None:
    """The model experiment ``name`` trains, as the replay names it (None: one the replay does
    not follow)."""
    config = EXPERIMENTS[name].config if name in EXPERIMENTS else None
    return {CNNConfig: "CNN", LMConfig: "language model"}.get(type(config))


def render(results: list[dict[str, Any]], whatif: dict[str, Any] | None = None,
           whatif_cnn: dict[str, Any] | None = None) -> str:
    """The page's markdown."""
    replays = {"language model": whatif, "CNN": whatif_cnn}
    by_name = {r["experiment"]: r for r in results}
    first = results[0] if results else None
    lines = [
        "# Experiments: does each technique matter, across seeds?",
        "",
        "<!-- generated by `python -m nn.experiments.report` from docs/results/: "
        "do not edit by hand -->",
        "",
        "Each experiment trains the same model a few ways (a technique present and taken "
        "away) from several seeds; a seed draws the initial weights and the batch order. A "
        "claim says that taking the technique away costs held-out loss. Its gap is the "
        "variant's held-out loss minus the reference's, paired by seed, with a 95% t "
        "interval over the seeds. The verdict is **shown** only when that interval lies "
        "above 0 (or when the variant diverged from every seed and the reference from "
        "none); otherwise it is **not shown at this size**. A single run's gap is never a "
        "verdict.",
        "",
    ]
    if first is not None:
        lines += [
            f"Results file: `docs/results/experiments.json`, written by `{first['command']}` "
            f"(with `--resume`, which keeps the experiments the file holds: each entry carries "
            f"its own date, from {min(r['date'] for r in results)} to "
            f"{max(r['date'] for r in results)}), {first['machine']['platform']}, "
            f"{first['machine']['cpu_count']} cores, {first['processes']} processes with "
            f"{first['blas_threads']} BLAS thread(s) each.",
            "",
        ]
    lines += ["| experiment | technique | claim | seeds | gap [95% interval] | verdict |",
              "|---|---|---|---|---|---|"]
    for r in results:
        for c in r["claims"]:
            lines.append(f"| {r['experiment']} | {r['technique']} | {c['name']} | "
                         f"{len(r['seeds'])} | {_gap(c)} | {c['verdict']} |")
    missing = [name for name in EXPERIMENTS if name not in by_name]
    if missing:
        lines += ["", "Not in the results file yet (the command did not reach them): "
                  + ", ".join(f"`{m}`" for m in missing) + "."]
    for r in results:
        lines += ["", f"## {r['experiment']}: {r['title']}", "",
                  f"Technique: {r['technique']}. "
                  + r["config"].replace(f"seed {r['seeds'][0]}",
                                        f"seeds {', '.join(map(str, r['seeds']))}")
                  + f". Reproduce: `fpsim compare "
                  f"--experiment {r['experiment']} --seeds {len(r['seeds'])}"
                  f"{_backend_options(r)}`.", "",
                  "| run | mean held-out loss | 95% interval | diverged seeds |",
                  "|---|---|---|---|"]
        for v in r["variants"]:
            mean = "-" if v["mean"] is None else loss_text(v["mean"])
            ci = "-" if v["ci95"] is None else (f"[{loss_text(v['ci95'][0])}, "
                                                f"{loss_text(v['ci95'][1])}]")
            lines.append(f"| {v['label']} | {mean} | {ci} | {v['diverged_seeds']} |")
        lines.append("")
        timing = _timing(r)
        if timing:
            lines += [timing, ""]
        for c in r["claims"]:
            lines.append(f"- {c['claim']}: gap {_gap(c)}, **{c['verdict']}** ({c['reason']}).")
        if any(c["verdict"] != SHOWN for c in r["claims"]):
            model = _model(r["experiment"])
            replay_line = None if model is None else _replay_line(
                replays[model], MECHANISM[model].get(r["technique"], ""))
            if replay_line:
                lines.append(f"- Not shown at this size; the mechanism, measured: {replay_line}.")
            if r["technique"] in PUBLISHED:
                lines.append(f"- Where it is shown: {PUBLISHED[r['technique']]}.")
    for model, found in replays.items():
        if found is None:
            continue
        lines += ["", f"## What-if replay: the {model}", "",
                  f"Along one float32 trajectory ({found['config']}), steps "
                  f"{', '.join(map(str, found['steps']))} replayed under each alternative "
                  "(same weights, batch and optimizer state), against the float32 replay of "
                  f"the same step; written by `{found['command']}` on {found['date']}.", "",
                  "| alternative | gradient cosine | gradient norm flushed | update error | "
                  "updates swamped |", "|---|---|---|---|---|"]
        for name, a in found["alternatives"].items():
            lines.append(f"| {name} | {a['cosine']:.6f} | {a['flushed_norm']:.4%} | "
                         f"{a['update_error']:.2%} | {a['swamped']:.2%} |")
    return "\n".join(lines) + "\n"


def load(results: Path = RESULTS, whatif: Path = WHATIF, whatif_cnn: Path = WHATIF_CNN
         ) -> tuple[list[dict[str, Any]], dict[str, Any] | None, dict[str, Any] | None]:
    found = json.loads(results.read_text())
    found = found if isinstance(found, list) else [found]
    lm, cnn = (json.loads(p.read_text()) if p.exists() else None for p in (whatif, whatif_cnn))
    return found, lm, cnn


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="write docs/experiments.md from the results")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--whatif", type=Path, default=WHATIF)
    parser.add_argument("--whatif-cnn", type=Path, default=WHATIF_CNN)
    parser.add_argument("--out", type=Path, default=PAGE)
    args = parser.parse_args(argv)
    write_bytes(args.out, render(*load(args.results, args.whatif, args.whatif_cnn)).encode("utf-8"),
                what="page")  # all or nothing
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
