"""Training plots: loss curves, the loss-scale timeline with its skipped steps, gradient
exponent histograms against a format's range (through ``fpsim.plot.exponent_histogram``), the
same histograms epoch by epoch, the per-epoch shares of gradients that underflowed,
became subnormal or overflowed, and the per-epoch fp8 telemetry of each quantized tensor.

Each function draws on ``ax`` (a new figure when None) and returns the axes; matplotlib is
imported only when a function runs. ``compare_figure`` is the picture ``fpsim compare`` writes.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fpsim.plot import save
from nn import experiments
from nn.training.history import EVENTS, History


def _axes(ax: Any) -> Any:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(9, 4))[1]


def loss_curves(histories: dict[str, History], *, scale: float = 1.0, ax: Any = None) -> Any:
    """One curve per run of the per-epoch training loss divided by ``scale`` (log y axis)."""
    ax = _axes(ax)
    styles = ("-", "--", ":", "-.")  # runs that coincide (float32 and bf16) stay visible
    for i, (label, h) in enumerate(histories.items()):
        epochs = np.arange(1, len(h.epoch) + 1)
        ax.plot(epochs, np.asarray(h.history["loss"]) / scale, marker=".", label=label,
                linestyle=styles[i % len(styles)], linewidth=2.5 - 0.4 * (i % 4))
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss" if scale == 1.0 else f"training loss / {scale:g}")
    ax.set_title("loss curves")
    ax.legend(fontsize="small")
    return ax


def loss_scale_timeline(history: History, *, label: str = "loss scale", ax: Any = None) -> Any:
    """log2 of the loss scale each step used, with a red x on every skipped step."""
    ax = _axes(ax)
    log2s = np.log2(np.asarray(history.step_loss_scale, dtype=np.float64))
    skipped = np.flatnonzero(history.step_skipped)
    ax.step(np.arange(len(log2s)), log2s, where="post", label=label)
    ax.plot(skipped, log2s[skipped], "rx", label=f"skipped steps ({len(skipped)})")
    ax.set_xlabel("training step")
    ax.set_ylabel("log2 loss scale")
    ax.legend(fontsize="small")
    return ax


def gradient_exponents(history: History, fmt: Any = "fp16", *, kind: str = "activation",
                       ax: Any = None) -> Any:
    """The run's gradient exponents (as stored, so times the loss scale) against ``fmt``'s
    range: zero, subnormal, normal and overflow regions shaded by ``fpsim.plot``."""
    import fpsim.plot

    return fpsim.plot.exponent_histogram(history.exponent_values(kind), fmt, ax=_axes(ax))


def gradient_exponents_over_time(history: History, fmt: Any = "fp16", *,
                                 kind: str = "activation", ax: Any = None) -> Any:
    """The gradient exponents epoch by epoch: one column per epoch, one row per power of two,
    the colour the share of that epoch's non-zero gradients in the bin (as stored, so times the
    loss scale), with ``fmt``'s smallest subnormal, smallest normal and max drawn across."""
    import fpsim

    fmt = fpsim.get_format(fmt)
    ax = _axes(ax)
    counts = np.array(history.epoch_exponent_counts[kind], dtype=np.float64)  # (epochs, bins)
    if not counts.any():
        raise ValueError("the history has no gradient exponents: fit with telemetry=True")
    shares = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    used = np.flatnonzero(counts.sum(axis=0))
    lo, hi = used.min(), used.max() + 1
    edges = history.exponent_edges
    ax.pcolormesh(np.arange(1, len(counts) + 2) - 0.5, edges[lo:hi + 1], shares[:, lo:hi].T,
                  cmap="viridis", shading="flat")
    for value, name in ((fmt.smallest_subnormal, "smallest subnormal"),
                        (fmt.smallest_normal, "smallest normal"), (fmt.max, "max")):
        ax.axhline(np.log2(value), color="w", linestyle="--", linewidth=0.8)
        ax.annotate(f"{fmt.name} {name}", (0.6, np.log2(value)), color="w", fontsize="small",
                    va="bottom")
    ax.set_xlabel("epoch")
    ax.set_ylabel("log2 |gradient|")
    ax.set_title(f"{kind} gradient exponents, epoch by epoch (colour: share of the epoch)")
    return ax


def gradient_events_timeline(history: History, *, kind: str = "activation",
                             ax: Any = None) -> Any:
    """Per epoch, the share of ``kind`` gradients that underflowed to 0, became subnormal or
    overflowed while rounding (``history.gradient_share(event, kind, epoch=i)``)."""

    ax = _axes(ax)
    epochs = np.arange(1, len(history.gradient_events) + 1)
    for event in EVENTS:
        shares = [history.gradient_share(event, kind, epoch=i) for i in range(len(epochs))]
        ax.plot(epochs, shares, marker=".", label=event)
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"share of {kind} gradients")
    ax.set_title(f"{kind} gradients: what rounding did to them, epoch by epoch")
    ax.legend(fontsize="small")
    return ax


def fp8_telemetry(history: History, field: str = "max_saturated_share", *,
                  tensors: Sequence[str] | None = None, ax: Any = None) -> Any:
    """Per epoch, ``field`` of each fp8-quantized tensor (``history.fp8_series``; default every
    tensor the history holds): the largest share saturated in one step by default, or e.g.
    ``"last_scale"`` (then a log y axis), ``"max_amax"``, ``"max_flushed_share"``."""
    names = list(history.fp8_names() if tensors is None else tensors)
    if not names:
        raise ValueError("the history has no fp8 telemetry: no matmul ran under an fp8 recipe "
                         "in this fit")
    ax = _axes(ax)
    epochs = np.arange(1, len(history.fp8) + 1)
    for name in names:
        ax.plot(epochs, history.fp8_series(name, field), marker=".", label=name)
    if field.endswith(("scale", "amax")):
        ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel(field.replace("_", " "))
    ax.set_title(f"fp8 tensors: {field.replace('_', ' ')}, epoch by epoch")
    ax.legend(fontsize="small")
    return ax


def compare_figure(results: Sequence[experiments.RunResult], path: str | Path) -> Path:
    """The ``fpsim compare`` PNG: loss curves, the loss-scale timeline, and activation-gradient
    exponent histograms (float32's true gradients and the scaled fp16 ones) against fp16."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 8.5), layout="constrained")
    loss_curves({r.label: r.history for r in results}, scale=experiments.LOSS_WEIGHT,
                ax=axes[0, 0])
    axes[0, 0].set_ylabel("training cross-entropy (loss / 2^-18)")
    for r in results:
        if r.final_loss_scale is not None:
            loss_scale_timeline(r.history, label=f"{r.label}: scale", ax=axes[0, 1])
    axes[0, 1].set_title(f"dynamic loss scale (x2 after {experiments.GROWTH_STEPS} finite "
                         "steps, /2 on inf)")
    by_label = {r.label: r for r in results}
    if "float32" in by_label:
        ax = gradient_exponents(by_label["float32"].history, "fp16", ax=axes[1, 0])
        share = ax.get_title().split(": ", 1)[-1]
        ax.set_title(f"float32 run: the true activation gradients against fp16's range\n"
                     f"(in fp16: {share}, bin centres rounded)", fontsize="medium")
    if "mixed_float16 + dynamic" in by_label:
        run = by_label["mixed_float16 + dynamic"]
        ax = gradient_exponents(run.history, "fp16", ax=axes[1, 1])
        ax.set_title("mixed_float16 + dynamic: activation gradients as stored in fp16 "
                     f"(x loss scale)\n{run.activation_underflow:.1%} flushed to 0 while "
                     "rounding (fpsim.monitor)", fontsize="medium")
    fig.suptitle(f"digits MLP {experiments.HIDDEN}, loss x 2^-18, SGD lr "
                 f"{experiments.LEARNING_RATE} x 2^18, momentum {experiments.MOMENTUM}")
    path = Path(path)
    save(fig, path, dpi=90)  # all or nothing: a failed write keeps the old picture
    plt.close(fig)
    return path


def step_loss_curves(histories: dict[str, History], *, window: int = 10, ax: Any = None) -> Any:
    """The training loss step by step (a moving mean over ``window`` steps), one curve per run;
    a run's curve stops where its loss stopped being finite."""
    ax = _axes(ax)
    for label, h in histories.items():
        loss = np.asarray(h.step_loss, dtype=np.float64)
        w = max(1, min(window, len(loss)))
        smooth = np.convolve(loss, np.ones(w) / w, mode="valid")
        ax.plot(np.arange(w - 1, len(loss)), smooth, label=label)
    ax.set_xlabel("training step")
    ax.set_ylabel(f"training loss (mean of {window} steps)")
    ax.set_title("loss curves")
    ax.legend(fontsize="small")
    return ax


def seed_loss_curves(seeded: Any, *, window: int = 10, ax: Any = None) -> Any:
    """Every seed's training loss step by step (a moving mean over ``window`` steps), one
    colour per run label, thin lines per seed and a thick line for their mean where every seed
    is finite. A run whose loss stopped being finite is marked with an x where it did, and the
    legend says from which step and from how many seeds."""
    ax = _axes(ax)
    for i, label in enumerate(seeded.labels):
        colour = f"C{i}"
        curves = []
        nan_steps = []
        for run in seeded.runs:
            loss = np.asarray(run.step_loss[label], dtype=np.float64)
            w = max(1, min(window, len(loss)))
            with np.errstate(invalid="ignore"):
                smooth = np.convolve(loss, np.ones(w) / w, mode="valid")
            steps = np.arange(w - 1, len(loss))
            ax.plot(steps, smooth, color=colour, linewidth=0.6, alpha=0.45)
            curves.append(smooth)
            k = run.nan_step[label]
            if k is not None:  # marked at the last finite loss before it
                nan_steps.append(k)
                ax.plot([k], [loss[k - 1] if k > 0 else np.nan], "x", color=colour,
                        markersize=9, markeredgewidth=2)
        stack = np.array(curves)
        finite = np.all(np.isfinite(stack), axis=0)
        mean = np.where(finite, stack.mean(axis=0) if finite.any() else np.nan, np.nan)
        text = label
        if nan_steps:
            first = min(nan_steps)
            text += (f" (loss not finite from step {first}: {len(nan_steps)} of "
                     f"{len(seeded.runs)} seeds)")
            ax.axvline(first, color=colour, linestyle=":", linewidth=1)
        ax.plot(steps, mean, color=colour, linewidth=2.2, label=text)
    ax.set_xlabel("training step")
    ax.set_ylabel(f"training loss (mean of {window} steps)")
    ax.set_title(f"loss curves, {len(seeded.runs)} seeds (thin: each seed; thick: their mean)")
    ax.legend(fontsize="small")
    return ax


def _detail_panel(result: Any) -> Any:
    """The second panel of an experiment's picture, as a function of the axes, or None when
    the experiment has nothing to show there (then it is not drawn)."""
    import fpsim.plot

    shown = next((r for r in result.runs if r.activation_underflow > 0), result.runs[0])
    exact = next((r for r in result.runs if r.policy == "float32"), None)
    if "second_moments" in result.extra:  # the Adam-state experiment: v against fp16
        def draw(ax: Any) -> None:
            fpsim.plot.exponent_histogram(result.extra["second_moments"], "fp16", ax=ax)
            share = ax.get_title().split(": ", 1)[-1]
            ax.set_title("Adam's second moments v after one step (fp32 slots) against fp16's "
                         f"range\n(in fp16: {share})", fontsize="medium")
        return draw
    if "squared_deviations" in result.extra:  # experiment 3: what the statistics hold
        def draw(ax: Any) -> None:
            fpsim.plot.exponent_histogram(result.extra["squared_deviations"], "fp16", ax=ax)
            share = ax.get_title().split(": ", 1)[-1]
            ax.set_title(f"{result.runs[0].label}, trained: (x - mean)^2 at the first "
                         f"BatchNormalization's input\nagainst fp16's range (in fp16: "
                         f"{share})", fontsize="medium")
        return draw
    if "running_sums" in result.extra:  # experiment 4: one kernel-gradient sum, replayed
        def draw(ax: Any) -> None:
            fp16, exact_sum = result.extra["running_sums"]
            ax.plot(exact_sum, label="exact", lw=1)
            ax.plot(fp16, label="fp16 accumulator", lw=1)
            ax.set_xlabel("additions (image x pixel)")
            ax.set_title("the first convolution's kernel gradient, the element furthest from "
                         "exact:\nits running sum in fp16 against exact", fontsize="medium")
            ax.legend(fontsize="small")
        return draw
    if exact is not None and exact.history.exponent_counts["activation"].any():
        def draw(ax: Any) -> None:
            gradient_exponents(exact.history, "fp16", ax=ax)
            share = ax.get_title().split(": ", 1)[-1]
            ax.set_title("float32 run: the true activation gradients against fp16's range\n"
                         f"(in fp16: {share})\n{shown.label}: "
                         f"{shown.activation_underflow:.1%} flushed to 0 while rounding",
                         fontsize="medium")
        return draw
    if shown.history.exponent_counts["activation"].any():
        def draw(ax: Any) -> None:
            gradient_exponents(shown.history, "fp16", ax=ax)
            ax.set_title(f"{shown.label}: activation gradients as stored\n"
                         f"({shown.activation_underflow:.1%} flushed to 0 while rounding)",
                         fontsize="medium")
        return draw
    return None


def experiment_draw(seeded: Any) -> Any:
    """The ``fpsim compare --experiment NAME`` PNG: every seed's loss curves (with their mean,
    and an x where a run's loss stopped being finite) and, when the experiment has one, a
    panel of the first seed's run against fp16's range: Adam's second moments (adam-state),
    the statistics' squares (statistics), a replayed fp16 sum (accumulation), else the float32
    run's true activation gradients. The title carries each claim's verdict. Returns the
    figure (``experiment_figure`` saves it)."""
    import matplotlib.pyplot as plt

    result = seeded.first
    detail = None if result is None else _detail_panel(result)
    panels = 1 if detail is None else 2
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels + 0.5, 5.2), layout="constrained",
                             squeeze=False)
    seed_loss_curves(seeded, ax=axes[0, 0])
    if detail is not None:
        detail(axes[0, 1])
    verdicts = "; ".join(
        f"{c.claim.name}: {c.verdict.verdict}" + (
            "" if c.verdict.gap_ci95 is None else
            f" (gap {c.verdict.gap_mean:+.4f}, 95% [{c.verdict.gap_ci95[0]:+.4f}, "
            f"{c.verdict.gap_ci95[1]:+.4f}])")
        for c in seeded.claims())
    title = experiments.experiment(seeded.name).title
    if result is not None and result.extra.get("backend") == "torch":  # (fpsim compare's own)
        title += f" [torch, {result.extra.get('device', 'cpu')}]"
    lines = [title, verdicts,
             f"{seeded.ran_config.describe()} (seeds "
             f"{', '.join(map(str, seeded.seeds))})"]
    width = 100 * panels  # characters that fit across the figure at this font size
    fig.suptitle("\n".join(textwrap.fill(line, width) for line in lines), fontsize="small")
    return fig


def experiment_figure(seeded: Any, path: str | Path) -> Path:
    """``experiment_draw(seeded)`` saved as a PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = experiment_draw(seeded)
    path = Path(path)
    save(fig, path, dpi=90)  # all or nothing: a failed write keeps the old picture
    plt.close(fig)
    return path
