"""Experiment 3 on the language model (``fpsim compare --experiment statistics-lm``): its
attention softmax and LayerNorm statistics in fp16 against fp32, and the headroom that explains
why nothing fails at this size (the largest ``|x - mean|`` a LayerNorm sees, against the 256
where fp16's variance overflows). Experiment 3 itself runs on the CNN
(``nn.experiments.statistics``), where the overflow arises by itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import fpsim
import nn
import nn.experiments.progress as progress
from nn.experiments.lm import LMConfig, build_lm, data_for, train_lm
from nn.experiments.result import ExperimentResult

DEFAULT = LMConfig()

FP16_SQUARE_LIMIT = 256.0  # |x - mean| above this squares past fp16's max (65504): var is inf


@progress.option
def fp32_statistics_lm(config: LMConfig = DEFAULT, *, progress: bool = False
                       ) -> ExperimentResult:
    """Attention softmax and LayerNorm statistics in fp32 (nn's default under mixed_float16;
    PyTorch autocast's rule for softmax, Keras's for the norm layers)
    against the same layers given ``statistics_dtype="float16"`` (softmax, mean, variance and
    the normalization in fp16; the weights stay fp32 masters, so the statistics' format is the
    only difference), both loss-scaled. ``extra``: the fp16-statistics model's forward pass
    on held-out text (``forward_events``: overflow share and first overflowing site), the
    steps each run skipped for non-finite gradients, the first step skipped by the fp16 run
    only (``first_fp16_only_skip``), and the headroom: the largest ``|x - mean|`` at any
    LayerNorm input (``largest_deviation``; fp16's variance overflows above 256)."""
    fp16_model = build_lm(config, "mixed_float16", stats_dtype="float16")
    runs = [
        train_lm("fp32 statistics", config, "mixed_float16", config.make_optimizer(),
                 loss_scale="dynamic"),
        train_lm("fp16 statistics", config, "mixed_float16", config.make_optimizer(),
                 loss_scale="dynamic", model=fp16_model),
    ]
    skipped = [[i for i, s in enumerate(r.history.step_skipped) if s] for r in runs]
    only = sorted(set(skipped[1]) - set(skipped[0]))
    extra = {**forward_events(fp16_model, config), "skipped_fp32": skipped[0],
             "skipped_fp16": skipped[1], "first_fp16_only_skip": only[0] if only else None,
             "largest_deviation": largest_norm_deviation(fp16_model, config)}
    return ExperimentResult(
        "statistics-lm", "fp32 vs fp16 softmax and LayerNorm statistics (language model)", config,
        f"none found at this size: the largest |x - mean| at a LayerNorm input is "
        f"{extra['largest_deviation']:.3g} (fp16's variance overflows above "
        f"{FP16_SQUARE_LIMIT:g})", runs, extra, ("fp16 statistics", "fp32 statistics"))


def largest_norm_deviation(model: Any, config: LMConfig) -> float:
    """The largest ``|x - mean(x)|`` (over the features) at the input of any LayerNormalization
    of ``model`` in a forward pass on the first held-out batch: how far the statistics are
    from squaring past fp16's max."""
    _, (x_test, _) = data_for(config)
    with nn.no_grad(), np.errstate(all="ignore"):
        inputs, _ = norm_inputs(model, x_test[:config.batch_size])
    return max((float(np.max(np.abs(v - v.mean(-1, keepdims=True)))) for v in inputs),
               default=0.0)


def norm_inputs(model: Any, x: np.ndarray) -> tuple[list[np.ndarray], Any]:
    """(the input of every LayerNormalization in the blocks, as float64 arrays; the last
    block's output): the embedding and blocks of ``build_lm``'s model replayed step by step
    as ``TransformerBlock`` composes them (post-norm or pre-norm)."""
    seen: list[np.ndarray] = []

    def keep(t: Any) -> Any:
        seen.append(t.data.astype(np.float64))
        return t

    h = model.layers[0](x)
    for block in model.layers[1:-1]:
        causal = block.causal
        if block.normalize_first:
            a = block.ln1(keep(h))
            h = h + block.attention(a, a, use_causal_mask=causal)
            h = h + block.ff2(block.ff1(block.ln2(keep(h))))
        else:
            h = block.ln1(keep(h + block.attention(h, h, use_causal_mask=causal)))
            h = block.ln2(keep(h + block.ff2(block.ff1(h))))
    return seen, h


def forward_events(model: Any, config: LMConfig) -> dict[str, Any]:
    """One forward pass of the trained ``model`` on the first held-out batch under
    ``fpsim.monitor``: the share of rounded values that overflowed and that underflowed, and
    the first site (in rounding order) where a value overflowed (None if none did)."""
    _, (x_test, _) = data_for(config)
    with fpsim.monitor() as m, nn.no_grad(), np.errstate(all="ignore"):
        model(x_test[:config.batch_size], training=False)
    total = sum(c["elements"] for c in m.counts.values())
    overflow = sum(c.get("overflow", 0) for c in m.counts.values())
    underflow = sum(c.get("underflow", 0) for c in m.counts.values())
    first = next((site for site, c in m.counts.items() if c.get("overflow", 0)), None)
    return {"forward_overflow": overflow / max(total, 1),
            "forward_underflow": underflow / max(total, 1), "first_overflow_site": first}


def findings_lm(r: ExperimentResult) -> list[str]:
    """What ``fp32_statistics_lm``'s numbers say, one sentence per line."""
    bad = r.runs[1]
    where = "no step" if bad.nan_step is None else f"step {bad.nan_step}"
    site = r.extra["first_overflow_site"]
    step = r.extra["first_fp16_only_skip"]
    return [
        f"fp16 statistics: first non-finite loss at {where}; held-out loss "
        f"{r.gap(bad.label, r.runs[0].label):+.3f} vs fp32 statistics",
        f"its forward pass on held-out text: {r.extra['forward_overflow']:.2%} of rounded "
        "values overflowed" + (f" (first at {site})" if site else "")
        + f", {r.extra['forward_underflow']:.3%} underflowed",
        f"steps skipped for non-finite gradients: {len(r.extra['skipped_fp32'])} with fp32 "
        f"statistics, {len(r.extra['skipped_fp16'])} with fp16"
        + ("" if step is None else f" (the first that fp32 did not skip: step {step})"),
        f"largest |x - mean| at a LayerNorm input: {r.extra['largest_deviation']:.3g}; "
        f"fp16's variance overflows only above {FP16_SQUARE_LIMIT:g}"]
