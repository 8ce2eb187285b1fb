"""``History``: what ``Model.fit`` saw, epoch by epoch and step by step.

- ``history.history``: Keras's dict of per-epoch lists: ``"loss"``, each metric, and
  ``"val_loss"``/``"val_<metric>"`` when there is validation data.
- Per step: ``step_loss`` (the unscaled loss), ``step_loss_scale`` (the scale the step used;
  1.0 without loss scaling) and ``step_skipped`` (True where a non-finite gradient made the
  loss-scale optimizer skip the update).
- Gradient telemetry (``fit(telemetry=True)``, through ``fpsim.monitor``), per epoch and per
  layer: ``gradient_events[epoch][layer][kind]`` with ``kind`` "activation" (the gradient of the
  layer's output, rounded at the site ``"<layer>/grad_activation"``) or "weight" (its weights'
  gradients, rounded at ``"<layer>/grad_<weight>"`` when the weight is read through a cast and
  at ``"<layer>/<weight>/grad"`` when it is not), each a dict of counts: ``elements`` rounded,
  ``underflow`` (non-zero -> 0), ``subnormal``, ``overflow``. Nothing is rounded when the
  gradient already lies in its format (float32 everywhere): the counts stay 0.
- ``swamped_updates``: per epoch, the optimizer's count of non-zero updates that left a
  weight unchanged (see ``nn.optimizers``).
- ``exponent_counts[kind]``: raw counts of ``floor(log2|g|)`` per integer bin (edges
  ``exponent_edges``, float32's whole range) over the non-zero finite gradient values *as
  stored in their format* (so scaled by the loss scale when there is one), plus
  ``zero_counts[kind]``. ``exponent_values(kind)`` turns them into sample values for
  ``fpsim.plot.exponent_histogram(values, "fp16")``. ``epoch_exponent_counts[kind]`` holds the
  same counts epoch by epoch (one array per finished epoch; they sum to ``exponent_counts``),
  for histograms over time (``nn.plot.gradient_exponents_over_time``).
- fp8 telemetry (every fit under a recipe policy or an ``nn.fp8_autocast`` around fit): per
  epoch, per quantized tensor (``"dense/Linear/input"``, ``".../weight"``,
  ``".../grad_output"``), the summary of that epoch's training steps in the recipe's log:
  ``fp8[epoch][tensor][field]`` with the fields of ``nn.fp8.state.SUMMARY_FIELDS``
  (``last_scale``, ``max_amax``, ``max_saturated_share``, ``saturated_share``,
  ``max_flushed_share``, ...); ``fp8_series(tensor, field)`` gives one per epoch (NaN where the
  tensor was not quantized), ``fp8_table()`` the last epoch, ``nn.plot.fp8_telemetry`` a plot.
  Validation passes are left out; ``recipe.log`` keeps every quantization.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nn.fp8.state import SUMMARY_FIELDS

EVENTS = ("underflow", "subnormal", "overflow")
KINDS = ("activation", "weight")
EXP_MIN = -149  # floor(log2) of float32's smallest subnormal, 2**-149
EXP_MAX = 127   # floor(log2) of float32's largest finite value
EXPONENT_EDGES = np.arange(EXP_MIN, EXP_MAX + 2)  # bin i holds floor(log2|g|) == EXP_MIN + i


def exponent_counts(values: np.ndarray) -> tuple[np.ndarray, int]:
    """(counts of floor(log2|v|) per bin of ``EXPONENT_EDGES``, number of zeros) for ``values``.

    ``np.frexp`` gives v = m * 2**e with 0.5 <= |m| < 1, so floor(log2|v|) = e - 1 exactly,
    subnormals included; non-finite values are left out.
    """
    v = np.asarray(values).ravel()
    zero = v == 0
    nonzero = v[~zero & np.isfinite(v)]
    e = np.frexp(nonzero)[1] - (1 + EXP_MIN)
    counts = np.bincount(np.clip(e, 0, EXP_MAX - EXP_MIN), minlength=EXP_MAX - EXP_MIN + 1)
    zeros = int(np.count_nonzero(zero))
    return counts.astype(np.int64), zeros


def _empty_row() -> dict[str, int]:
    return {"elements": 0, **dict.fromkeys(EVENTS, 0)}


class History:
    """The record of one ``fit`` call (see the module docstring for every field).

    >>> h = model.fit(x, y, epochs=2, verbose=0)            # doctest: +SKIP
    >>> h.history["loss"], h.gradient_share("underflow")    # doctest: +SKIP
    """

    def __init__(self) -> None:
        self.history: dict[str, list[float]] = {}
        self.epoch: list[int] = []
        self.params: dict[str, Any] = {}
        self.step_loss: list[float] = []
        self.step_loss_scale: list[float] = []
        self.step_skipped: list[bool] = []
        self.gradient_events: list[dict[str, dict[str, dict[str, int]]]] = []
        self.swamped_updates: list[int] = []
        self.exponent_edges = EXPONENT_EDGES.copy()
        self.exponent_counts = {k: np.zeros(len(EXPONENT_EDGES) - 1, np.int64) for k in KINDS}
        self.zero_counts = dict.fromkeys(KINDS, 0)
        self.epoch_exponent_counts: dict[str, list[np.ndarray]] = {k: [] for k in KINDS}
        self._counted_before_epoch = {k: c.copy() for k, c in self.exponent_counts.items()}
        self.fp8: list[dict[str, dict[str, Any]]] = []
        self.wall_time = 0.0

    # --- recording (called by Model.fit) --------------------------------------------------------
    def record_epoch(self, epoch: int, logs: dict[str, float]) -> None:
        self.epoch.append(epoch)
        for kind, total in self.exponent_counts.items():  # this epoch's share of the counts
            self.epoch_exponent_counts[kind].append(total - self._counted_before_epoch[kind])
            self._counted_before_epoch[kind] = total.copy()
        for key, value in logs.items():
            self.history.setdefault(key, []).append(float(value))

    def record_step(self, loss: float, scale: float, skipped: bool) -> None:
        self.step_loss.append(float(loss))
        self.step_loss_scale.append(float(scale))
        self.step_skipped.append(bool(skipped))

    def record_gradients(self, kind: str, values: np.ndarray) -> None:
        counts, zeros = exponent_counts(values)
        self.exponent_counts[kind] += counts
        self.zero_counts[kind] += zeros

    def record_events(self, counts: dict[str, dict[str, int]], layer_sites: dict[str, dict[str,
                      list[str]]]) -> None:
        """Add one epoch's monitor counts, grouped by layer and kind through ``layer_sites``."""
        epoch: dict[str, dict[str, dict[str, int]]] = {}
        for layer, kinds in layer_sites.items():
            epoch[layer] = {}
            for kind, sites in kinds.items():
                row = _empty_row()
                for site in sites:
                    found = counts.get(site)
                    if found:
                        for key in row:
                            row[key] += int(found[key])
                epoch[layer][kind] = row
        self.gradient_events.append(epoch)

    def record_fp8(self, summary: dict[str, dict[str, Any]]) -> None:
        """Add one epoch's fp8 summaries (``TelemetryLog.summary``), per tensor."""
        self.fp8.append(summary)

    # --- reading ---------------------------------------------------------------------------
    @property
    def skipped_steps(self) -> int:
        """How many updates the loss-scale optimizer skipped."""
        return int(sum(self.step_skipped))

    def gradient_counts(self, kind: str = "activation", layer: str | None = None,
                        epoch: int | None = None) -> dict[str, int]:
        """Summed event counts for ``kind`` over the layers (or one) and epochs (or one index)."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        epochs = self.gradient_events if epoch is None else [self.gradient_events[epoch]]
        total = _empty_row()
        for ep in epochs:
            if layer is not None and layer not in ep:
                raise KeyError(f"no layer {layer!r} in the telemetry; layers: {sorted(ep)}")
            for name, kinds in ep.items():
                if layer is None or name == layer:
                    for key in total:
                        total[key] += kinds[kind][key]
        return total

    def gradient_share(self, event: str = "underflow", kind: str = "activation",
                       layer: str | None = None, epoch: int | None = None) -> float:
        """events / elements rounded (0.0 when nothing was rounded), e.g. the share of activation
        gradients that underflowed to zero."""
        if event not in EVENTS:
            raise ValueError(f"event must be one of {EVENTS}, got {event!r}")
        row = self.gradient_counts(kind, layer, epoch)
        return row[event] / row["elements"] if row["elements"] else 0.0

    def gradient_table(self) -> str:
        """One row per layer and kind: elements rounded and the share of each event."""
        if not self.gradient_events:
            return "no gradient telemetry (fit(telemetry=False), or no epoch run)"
        lines = [f"{'layer':<16} {'gradient':<10} {'elements':>10} "
                 + " ".join(f"{e:>10}" for e in EVENTS)]
        for layer in self.gradient_events[-1]:
            for kind in KINDS:
                row = self.gradient_counts(kind, layer)
                shares = " ".join(f"{self.gradient_share(e, kind, layer):>10.2%}" for e in EVENTS)
                lines.append(f"{layer:<16} {kind:<10} {row['elements']:>10,} {shares}")
        return "\n".join(lines)

    def exponent_values(self, kind: str = "activation") -> np.ndarray:
        """One value 2**(e + 0.5) per counted gradient in bin e: its histogram over integer bins
        is ``exponent_counts[kind]``, e.g. for ``fpsim.plot.exponent_histogram(values, fmt)``."""
        centres = 2.0 ** (self.exponent_edges[:-1] + 0.5)
        return np.repeat(centres, self.exponent_counts[kind])

    def fp8_names(self) -> list[str]:
        """The quantized tensors of every epoch, in first-seen order."""
        return list(dict.fromkeys(name for epoch in self.fp8 for name in epoch))

    def fp8_series(self, tensor: str, field: str = "max_saturated_share") -> np.ndarray:
        """One value of ``field`` per epoch for ``tensor`` (NaN where it was not quantized).
        An unknown tensor or field raises KeyError or ValueError listing the known ones."""

        if field not in SUMMARY_FIELDS or field == "format":
            raise ValueError(f"field must be one of {SUMMARY_FIELDS[1:]}, got {field!r}")
        if tensor not in self.fp8_names():
            raise KeyError(f"no fp8 tensor {tensor!r} in the history; tensors: "
                           f"{self.fp8_names() or 'none (no fp8 recipe ran in this fit)'}")
        return np.array([float(epoch[tensor][field]) if tensor in epoch else math.nan
                         for epoch in self.fp8])

    def fp8_table(self) -> str:
        """One row per tensor of the last epoch: format, last scale, largest amax, largest
        shares saturated and flushed to zero in one step."""
        if not any(self.fp8):
            return "no fp8 telemetry (no matmul ran under an fp8 recipe in this fit)"
        lines = [f"{'tensor':<34} {'format':<14} {'last scale':>11} {'max amax':>10} "
                 f"{'saturated':>10} {'flushed':>10}"]
        for name, row in self.fp8[-1].items():
            lines.append(f"{name:<34} {row['format']:<14} {row['last_scale']:>11.4g} "
                         f"{row['max_amax']:>10.4g} {row['max_saturated_share']:>10.2%} "
                         f"{row['max_flushed_share']:>10.2%}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        keys = ", ".join(self.history)
        return f"<History: {len(self.epoch)} epoch(s), {len(self.step_loss)} step(s); {keys}>"
