"""Per-tensor fp8 scaling state: Transformer Engine's delayed-scaling rule, and the telemetry log.

``ScalingState`` is the state machine of one tensor (a matmul's input, weight or incoming
gradient). ``update(amax)`` is TE's ``amax_and_scale_update`` for that tensor:

- the amax history is a window of ``amax_history_len`` float32 values, zeros at the start;
  position 0 stages the current amax, positions 1..L-1 hold earlier amaxes, oldest first;
- ``update(amax)`` writes ``amax`` to position 0, reduces the window to one amax ("max": the
  largest of all L values, the current one included; "most_recent": the current one), sets
  ``scale = fp8_max / amax / 2**margin`` (float32 arithmetic, clamped to float32's max) when
  that amax is finite and > 0 and otherwise keeps the previous scale, then rotates the window:
  ``[cur, a1, a2, ..., a(L-1)] -> [0, a2, ..., a(L-1), cur]`` (the oldest, a1, drops out);
- a NaN or inf amax is recorded in the window like any other, so under "max" it keeps the scale
  frozen until it rotates out L updates later (TE's behaviour, NaN propagating through max);
- the initial scale is 1.

Delayed scaling quantizes a tensor with the scale *before* its own update (the scale comes from
earlier steps); current scaling updates first and uses the fresh scale (``history_len=1``).

``state_dict()`` / ``load_state_dict()`` carry everything that decides the next scale (the
window, the scale, the step count) through checkpoints, checked field by field on the way in.

Telemetry: every quantization appends a ``TensorRecord`` to its recipe's log (see
``nn.fp8.recipes``): the tensor's name, role, format, the state's step, amax, the scale used,
and the shares of its non-zero elements that saturated (scaled magnitude above the format's
max) or flushed to zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fpsim import Format
from nn.engine.checks import count

AMAX_ALGOS = ("max", "most_recent")
_F32_MAX = np.float32(np.finfo(np.float32).max)


def scale_from_amax(amax: float, fp8_max: float, margin: int, previous: float) -> float:
    """``fp8_max / amax / 2**margin`` in float32 (clamped to float32's max) for a finite
    ``amax > 0``, else ``previous``: the one scale rule of every per-tensor recipe."""
    a = np.float32(amax)
    if not (np.isfinite(a) and a > 0):
        return float(previous)
    with np.errstate(over="ignore"):
        s = np.float32(fp8_max) / a / np.float32(2.0**margin)
    return float(min(s, _F32_MAX))


class ScalingState:
    """The scale of one tensor and its amax history (see the module docstring for the rule).

    >>> state = ScalingState(fp8_max=448.0, history_len=2)
    >>> state.scale, state.update(2.0), state.update(1.0), state.update(1.0)
    (1.0, 224.0, 224.0, 448.0)
    """

    def __init__(self, fp8_max: float, history_len: int = 16, algo: str = "max",
                 margin: int = 0, fmt: Format | None = None) -> None:
        self.fp8_max = float(fp8_max)
        self.history_len = count("amax_history_len", history_len, minimum=1)
        if algo not in AMAX_ALGOS:
            raise ValueError(f"amax_compute_algo must be one of {AMAX_ALGOS}, got {algo!r}")
        self.algo = algo
        self.margin = count("margin", margin)
        self.fmt = fmt
        self.scale = 1.0
        self.amax_history = np.zeros(self.history_len, dtype=np.float32)
        self.steps = 0

    def reduced_amax(self) -> float:
        """The amax the next scale comes from: the window's max, or its position 0."""
        h = self.amax_history
        return float(np.max(h) if self.algo == "max" else h[0])  # NaN propagates through max

    def update(self, amax: float) -> float:
        """Record this step's ``amax``, recompute the scale, rotate the window; returns the
        new scale."""
        self.amax_history[0] = np.float32(amax)
        self.scale = scale_from_amax(self.reduced_amax(), self.fp8_max, self.margin, self.scale)
        rolled = np.roll(self.amax_history, -1)
        rolled[0] = 0.0
        self.amax_history = rolled
        self.steps += 1
        return self.scale

    def state_dict(self) -> dict[str, Any]:
        """What decides this tensor's next scale, as JSON-able values: ``format`` (the element
        format's name), ``scale``, ``steps`` and ``amax_history`` (floats; NaN/inf kept)."""
        return {"format": None if self.fmt is None else self.fmt.name, "scale": self.scale,
                "steps": self.steps, "amax_history": [float(a) for a in self.amax_history]}

    def load_state_dict(self, state: Any, where: str = "state") -> None:
        """Restore ``state_dict()``'s values, checked first (nothing changes on a bad one):
        a bad field raises ValueError naming ``<where>.<field>``, the value and what is allowed.
        The settings (history length, algorithm, margin) are the recipe's, not the state's."""
        if not isinstance(state, dict):
            raise ValueError(f"{where} must be a mapping of format, scale, steps and "
                             f"amax_history, got {state!r:.80}")
        missing = sorted({"format", "scale", "steps", "amax_history"} - set(state))
        if missing:
            raise ValueError(f"{where} lacks {missing}")
        fmt = None if self.fmt is None else self.fmt.name
        if state["format"] != fmt:
            raise ValueError(f"{where}.format must be {fmt!r} (this tensor's format), got "
                             f"{state['format']!r}")
        scale = state["scale"]
        if not (_real(scale) and math.isfinite(scale) and scale > 0
                and float(np.float32(scale)) == scale):
            raise ValueError(f"{where}.scale must be a finite float32 value > 0, got {scale!r}")
        steps = count(f"{where}.steps", state["steps"])
        history = state["amax_history"]
        if not (isinstance(history, list) and len(history) == self.history_len):
            raise ValueError(f"{where}.amax_history must be a list of {self.history_len} "
                             f"(amax_history_len) values, got {history!r:.80}")
        for i, a in enumerate(history):
            if not (_real(a) and (math.isnan(a) or (a >= 0 and float(np.float32(a)) == a))):
                raise ValueError(f"{where}.amax_history[{i}] must be a float32 value >= 0, "
                                 f"inf or NaN (an amax), got {a!r}")
        self.scale = float(scale)
        self.steps = steps
        self.amax_history = np.array(history, dtype=np.float32)

    @property
    def scale_inv(self) -> float:
        """float32(1 / scale): what the matmul multiplies its fp32 result by (TE's scale_inv)."""
        return float(np.float32(1.0) / np.float32(self.scale))

    def __repr__(self) -> str:
        return (f"ScalingState(scale={self.scale:g}, steps={self.steps}, algo={self.algo!r}, "
                f"history_len={self.history_len}, margin={self.margin})")


def _real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


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
