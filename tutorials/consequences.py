"""What the committed experiments establish, in the sentences the training notebooks quote.

Notebooks 06, 07 and 09 close with a "Consequences" section read at run time from the results
the project commits: ``docs/results/experiments.json`` (``fpsim compare --all --seeds 5 --json
docs/results/experiments.json``) and ``docs/results/whatif.json`` (``fpsim compare --what-if``).
No number is typed: each claim of an experiment becomes one sentence with its gap in held-out
loss, its 95% interval and its seeds; a claim not shown at this size is followed by the what-if
replay's mechanism numbers and, where the failure is shown at a published scale, the reference.
``check`` asserts each sentence against the file, re-deriving the verdict from the interval.

    >>> import consequences  # doctest: +SKIP
    >>> found = consequences.for_techniques(["loss scaling"])  # doctest: +SKIP
    >>> print(consequences.markdown(found))  # doctest: +SKIP
    >>> for t in found: consequences.check(t)  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nn.experiments.intervals import NOT_SHOWN, SHOWN
from nn.experiments.report import MECHANISM, PUBLISHED, load
from nn.experiments.result import loss_text

RESULTS_FILE = Path("docs") / "results" / "experiments.json"
WHATIF_FILE = Path("docs") / "results" / "whatif.json"


def repository_root(start: Path | None = None) -> Path:
    """The folder above ``start`` (default: the working directory) that holds the results."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / RESULTS_FILE).is_file():
            return folder
    raise FileNotFoundError(
        f"no {RESULTS_FILE} in {here} or above it: open the notebook from the repository's "
        "tutorials/ folder (the results are committed under docs/results/)")


@dataclass(frozen=True)
class Claim:
    """One claim of one experiment, and its sentence."""

    experiment: dict[str, Any]
    claim: dict[str, Any]
    text: str

    @property
    def seeds(self) -> list[int]:
        return list(self.experiment["seeds"])

    @property
    def verdict(self) -> str:
        return str(self.claim["verdict"])


@dataclass(frozen=True)
class Technique:
    """What the results file establishes about one technique: its claims' sentences and, when
    one is not shown, the what-if replay of its mechanism and where it is shown instead."""

    name: str
    claims: list[Claim]
    replay_name: str | None   # the what-if alternative that takes the technique away
    replay: dict[str, Any] | None
    whatif: dict[str, Any] | None
    published: str | None     # where the failure is shown at a published scale

    @property
    def shown(self) -> int:
        return sum(c.verdict == SHOWN for c in self.claims)

    def notes(self) -> list[str]:
        """The sentences after the claims: the replay's numbers and the published case,
        given only when some claim is not shown at this size."""
        if self.shown == len(self.claims):
            return []
        notes = []
        if self.replay is not None and self.whatif is not None and self.replay_name:
            notes.append("Not shown at this size, but the mechanism is measured: "
                         + replay_text(self.replay_name, self.replay, self.whatif) + ".")
        if self.published is not None:
            notes.append(f"Where the failure does arise: {self.published}.")
        return notes


def _seeds(seeds: Sequence[int]) -> str:
    return f"{len(seeds)} seeds ({', '.join(map(str, seeds))})"


def gap_text(claim: dict[str, Any]) -> str:
    """The claim's gap as the sentence gives it: mean and 95% interval, or the divergence."""
    if claim["gap_mean"] is None or claim["gap_ci95"] is None:
        return (f"{claim['variant']} against {claim['reference']}: "
                f"{claim['diverged_seeds']} diverged seed(s), {claim['reason']}")
    lo, hi = claim["gap_ci95"]
    return (f"held-out loss of {claim['variant']} minus {claim['reference']}: "
            f"{loss_text(claim['gap_mean'], True)}, 95% interval "
            f"[{loss_text(lo, True)}, {loss_text(hi, True)}]")


def worst_layer(replay: dict[str, Any]) -> tuple[str, float]:
    """The layer whose update the alternative moved most at the last replayed step."""
    layers = replay.get("per_layer_last_step") or {}
    if not layers:
        return "", 0.0
    name = max(layers, key=lambda k: layers[k]["update_error"])
    return name, float(layers[name]["update_error"])


def replay_text(name: str, replay: dict[str, Any], whatif: dict[str, Any]) -> str:
    """The what-if replay's mechanism numbers for one alternative."""
    steps = ", ".join(map(str, whatif["steps"]))
    text = (f"replaying steps {steps} of one float32 run of the language model "
            f"({whatif['config']}) as *{name}*, from the same weights and batch, gives a "
            f"gradient cosine of {replay['cosine']:.6f} against float32, flushes "
            f"{replay['flushed_norm']:.4%} of the gradient norm to zero, moves the update by "
            f"{replay['update_error']:.2%} and swamps {replay['swamped']:.2%} of the updates")
    layer, error = worst_layer(replay)
    if layer:
        text += f"; the layer it moves most at the last step is {layer} ({error:.2%})"
    return text


def _claim_text(r: dict[str, Any], claim: dict[str, Any]) -> str:
    return (f"- `{r['experiment']}`, {r['title']}; {r['steps']} steps, {_seeds(r['seeds'])}: "
            f"{gap_text(claim)}: **{claim['verdict']}**.")


def for_techniques(techniques: Sequence[str], root: Path | None = None) -> list[Technique]:
    """What the committed results establish about each of ``techniques``, in that order."""
    base = repository_root(root)
    results, whatif, _ = load(base / RESULTS_FILE, base / WHATIF_FILE)  # the LM's replay
    known = sorted({r["technique"] for r in results})
    unknown = [t for t in techniques if t not in known]
    if unknown:
        raise ValueError(f"techniques {unknown} have no experiment in {RESULTS_FILE}; "
                         f"it holds {known}")
    found = []
    for technique in techniques:
        claims = [Claim(r, claim, _claim_text(r, claim))
                  for r in results if r["technique"] == technique for claim in r["claims"]]
        replay_name = MECHANISM["language model"].get(technique)
        replay = (whatif or {}).get("alternatives", {}).get(replay_name)
        found.append(Technique(technique, claims, replay_name if replay else None, replay,
                               whatif, PUBLISHED.get(technique)))
    return found


def markdown(found: Sequence[Technique]) -> str:
    """The section's body: per technique, how many claims are shown, a line per claim, then
    the notes on what is not shown."""
    lines: list[str] = []
    for t in found:
        lines += ["", f"**{t.name}**: {t.shown} of {len(t.claims)} claim(s) shown.", ""]
        lines += [c.text for c in t.claims]
        lines += [f"\n{note}" for note in t.notes()]
    return "\n".join(lines).strip() + "\n"


def check_claim(c: Claim) -> None:
    """Assert one claim's sentence against the file: the verdict follows from the interval (or
    from the divergence), the mean is the mean of the per-seed gaps, every number is in it."""
    claim, seeds = c.claim, c.seeds
    assert claim["verdict"] in (SHOWN, NOT_SHOWN), claim["verdict"]
    assert f"**{claim['verdict']}**" in c.text and _seeds(seeds) in c.text, c.text
    assert len(claim["gaps"]) == len(seeds) == len(set(seeds)) >= 2, claim
    if claim["gap_mean"] is None or claim["gap_ci95"] is None:
        # no interval: shown only when the variant diverged from every seed
        diverged = claim["diverged_seeds"]
        assert (claim["verdict"] == SHOWN) == (diverged == len(seeds)), claim
        assert f"{diverged} diverged seed(s)" in c.text
    else:
        lo, hi = claim["gap_ci95"]
        mean = math.fsum(claim["gaps"]) / len(claim["gaps"])
        assert abs(mean - claim["gap_mean"]) < 1e-5, (mean, claim["gap_mean"])
        assert lo <= claim["gap_mean"] <= hi, claim
        assert (claim["verdict"] == SHOWN) == (lo > 0), claim  # shown: the interval above 0
        for number in (claim["gap_mean"], lo, hi):
            assert loss_text(number, True) in c.text, (number, c.text)


def check(t: Technique) -> None:
    """Assert a technique's sentences against the file: each claim (``check_claim``), the count
    of shown claims, and, when one is not shown, the replay's numbers and the reference."""
    assert t.claims, f"no claim about {t.name!r} in {RESULTS_FILE}"
    for c in t.claims:
        check_claim(c)
    text = markdown([t])
    assert f"**{t.name}**: {t.shown} of {len(t.claims)} claim(s) shown." in text
    if t.shown < len(t.claims):
        if t.replay is not None:
            for key, spec in (("cosine", ".6f"), ("flushed_norm", ".4%"),
                              ("update_error", ".2%"), ("swamped", ".2%")):
                assert format(t.replay[key], spec) in text, (key, text)
            layer, error = worst_layer(t.replay)
            errors = [v["update_error"] for v in t.replay.get("per_layer_last_step", {}).values()]
            assert not layer or (error == max(errors) and f"{layer} ({error:.2%})" in text)
        if t.published is not None:
            assert t.published in text
    else:
        assert "Not shown at this size" not in text
