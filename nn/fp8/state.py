"""Per-tensor fp8 state for nn.fp8: the scaling rules (``ScalingState`` and the scale
functions) live in ``fpsim.scaling`` (Transformer Engine's delayed- and current-scaling rules,
shared with ``fpsim.torch``) and are re-exported here; this module adds the telemetry log.

Telemetry: every quantization appends a ``TensorRecord`` to its recipe's log (see
``nn.fp8.recipes``): the tensor's name, role, format, the state's step, amax, the scale used,
and the shares of its non-zero elements that saturated (scaled magnitude above the format's
max) or flushed to zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fpsim.scaling import (
    AMAX_ALGOS,
    MAX_AMAX_HISTORY_LEN,
    ScalingState,
    check_history_len,
    check_margin,
    current_scale,
    current_scales,
    max_margin,
    scale_from_amax,
    scaled_max,
    tensor_amax,
    unfused_scale,
)

__all__ = [
    "AMAX_ALGOS", "MAX_AMAX_HISTORY_LEN", "ScalingState", "TelemetryLog", "TensorRecord",
    "check_history_len", "check_margin", "current_scale", "current_scales", "max_margin",
    "scale_from_amax", "scaled_max", "summarize", "tensor_amax", "unfused_scale",
]


@dataclass(frozen=True)
class TensorRecord:
    """One quantization of one tensor (a row of a recipe's telemetry log)."""

    name: str  # e.g. "dense/Linear/input"
    role: str  # "forward" (activations, weights) or "backward" (gradients)
    fmt: str  # the element format (e.g. "float8_e4m3fn", "mxfp8_e4m3")
    step: int  # how many times this tensor was quantized before
    amax: float  # the largest |value| of the tensor (NaN/inf if it holds them)
    scale: float  # the scale the quantization used (1.0 for block and tf32 recipes)
    elements: int
    saturated: int  # elements whose scaled magnitude exceeded the format's max
    flushed: int  # non-zero elements that became zero

    @property
    def saturated_share(self) -> float:
        return self.saturated / self.elements if self.elements else 0.0

    @property
    def flushed_share(self) -> float:
        return self.flushed / self.elements if self.elements else 0.0


FIELDS = ("step", "amax", "scale", "saturated_share", "flushed_share")


# What ``TelemetryLog.summary`` gives per tensor (``fit``'s ``History.fp8`` per epoch):
SUMMARY_FIELDS = (
    "format",               # the element format's name
    "quantizations",        # how many times the tensor was quantized
    "max_amax",             # the largest amax (NaN if one was NaN)
    "last_amax",
    "last_scale",           # the scale of its last quantization
    "max_saturated_share",  # the largest share saturated in one quantization
    "saturated_share",      # saturated / elements over all its quantizations
    "max_flushed_share",
    "flushed_share",        # flushed to zero / elements over all its quantizations
)


def summarize(rows: list[TensorRecord]) -> dict[str, Any]:
    """``SUMMARY_FIELDS`` of one tensor's records (at least one)."""
    elements = max(1, sum(r.elements for r in rows))
    amaxes = np.array([r.amax for r in rows])
    return {"format": rows[-1].fmt, "quantizations": len(rows),
            "max_amax": float(np.max(amaxes)), "last_amax": rows[-1].amax,
            "last_scale": rows[-1].scale,
            "max_saturated_share": max(r.saturated_share for r in rows),
            "saturated_share": sum(r.saturated for r in rows) / elements,
            "max_flushed_share": max(r.flushed_share for r in rows),
            "flushed_share": sum(r.flushed for r in rows) / elements}


@dataclass
class TelemetryLog:
    """Every ``TensorRecord`` of a recipe, in order; ``series(name)`` gives one tensor's
    columns over steps and ``table()`` one summary row per tensor."""

    records: list[TensorRecord] = field(default_factory=list)

    def append(self, record: TensorRecord) -> None:
        self.records.append(record)

    def names(self) -> list[str]:
        """The tensors logged, in first-seen order."""
        return list(dict.fromkeys(r.name for r in self.records))

    def series(self, name: str) -> dict[str, np.ndarray]:
        """``{"step", "amax", "scale", "saturated_share", "flushed_share"}`` arrays of one tensor
        over its quantizations; an unknown name raises KeyError listing the logged ones."""
        rows = [r for r in self.records if r.name == name]
        if not rows:
            raise KeyError(f"no tensor {name!r} in the fp8 log; logged: {self.names()}")
        return {f: np.array([getattr(r, f) for r in rows]) for f in FIELDS}

    def table(self) -> str:
        """One row per tensor: format, quantizations, last scale, mean shares saturated and
        flushed to zero."""
        if not self.records:
            return "no fp8 telemetry (no quantized matmul ran under this recipe)"
        lines = [f"{'tensor':<34} {'format':<14} {'steps':>6} {'last scale':>11} "
                 f"{'saturated':>10} {'flushed':>10}"]
        for name in self.names():
            rows = [r for r in self.records if r.name == name]
            sat = sum(r.saturated for r in rows) / max(1, sum(r.elements for r in rows))
            flushed = sum(r.flushed for r in rows) / max(1, sum(r.elements for r in rows))
            lines.append(f"{name:<34} {rows[-1].fmt:<14} {len(rows):>6} {rows[-1].scale:>11.4g} "
                         f"{sat:>10.2%} {flushed:>10.2%}")
        return "\n".join(lines)

    def summary(self, start: int = 0, end: int | None = None) -> dict[str, dict[str, Any]]:
        """One summary per tensor of the records ``start:end`` (e.g. one epoch's), in
        first-seen order: ``SUMMARY_FIELDS`` (see there)."""
        rows: dict[str, list[TensorRecord]] = {}
        for r in self.records[start:end]:
            rows.setdefault(r.name, []).append(r)
        return {name: summarize(found) for name, found in rows.items()}

    def clear(self) -> None:
        self.records.clear()

    def __len__(self) -> int:
        return len(self.records)
