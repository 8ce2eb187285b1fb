"""Per-tensor fp8 scaling: Transformer Engine's delayed- and current-scaling rules (a model of
TE's kernels, from its source), one home for nn.fp8 and fpsim.torch.

``ScalingState`` is the state machine of one tensor (a matmul's input, weight or incoming
gradient). ``update(amax)`` is Transformer Engine's fused amax-and-scale update for that tensor
(``kernel_bulk`` in transformer_engine/common/recipe/delayed_scaling.cu, the default path of
``reduce_and_update_fp8_tensors`` in transformer_engine/pytorch/quantization.py):

- the amax history is a window of ``amax_history_len`` float32 values, zeros at the start;
  position 0 stages the current amax, positions 1..L-1 hold earlier amaxes, oldest first;
- a zero amax (a tensor of zeros, or one whose every element is NaN) changes nothing: no
  roll, the scale is kept (the kernel skips its loop when the staged amax is 0);
- otherwise the window rotates, ``[cur, a1, ..., a(L-1)] -> [0, a2, ..., a(L-1), cur]``, and
  is reduced to one amax: "max" takes ``fmaxf`` over the new window, which drops a NaN (so a
  NaN amax never reaches the scale) and keeps an inf; "most_recent" takes the current one;
- ``scale = scaled_max / amax`` in float32 with ``scaled_max = float32(fp8_max * 2**-margin)``
  when that amax is finite and > 0, else the previous scale; an inf quotient becomes
  float32's max;
- the initial scale is 1;
- ``calibrate(amax)`` (TE's ``Float8Quantizer.calibrate``, run by a module's forward under
  ``autocast(enabled=False, calibrating=True)``) writes the amax into position 0 and changes
  nothing else; the next ``update`` stages the larger of it and its own amax there (TE's cast
  kernels ``atomicMaxFloat`` into that slot, a NaN staying NaN), so the calibrated amax
  reaches the first scale computed after it.

``amax_compute_algo`` may also be a callable (TE's unfused Python path,
``_amax_and_scale_update``): it gets the window (a float32 array, the current amax at
position 0) and returns the amax; the window then always rotates (a zero amax too) and the
scale is ``float32(float32(fp8_max / amax) / 2**margin)``, kept when the amax is 0 or not
finite, float32's max when it overflows.

Delayed scaling quantizes a tensor with the scale *before* its own update (the scale comes from
earlier steps). Current scaling (``current(amax)``) computes the scale from the tensor's own
amax (TE's ``compute_scale_from_amax`` in transformer_engine/common/recipe/recipe_common.cuh):
an amax below ``amax_epsilon`` is raised to it; a zero, inf or NaN amax gives scale 1;
``scaled_max / amax``, float32's max if that overflows; ``power_2`` truncates the scale's
mantissa (a power of two, rounded down).

The amax of a tensor (``tensor_amax``) is ``fmaxf`` over its magnitudes, as TE's cast kernels
compute it: NaN elements are skipped, an inf is kept.

``state_dict()`` / ``load_state_dict()`` carry everything that decides the next scale (the
window, the scale, the step count) through checkpoints, checked field by field on the way in.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from fpsim.formats import Format

AMAX_ALGOS = ("max", "most_recent")
MAX_AMAX_HISTORY_LEN = 2**20  # ours: 4 MiB of float32 per tensor (TE sets no bound)
_F32_MAX = np.float32(np.finfo(np.float32).max)
_F32_TINY = float(np.finfo(np.float32).tiny)


def max_margin(fp8_max: float) -> int:
    """The largest margin for which ``fp8_max * 2**-margin`` is still a normal float32 (134 for
    E4M3's 448, 141 for E5M2's 57344): beyond it TE's ``scaled_max`` goes subnormal and then 0,
    and every scale with it."""
    return math.frexp(float(fp8_max))[1] - 1 - math.frexp(_F32_TINY)[1] + 1


def check_margin(margin: object, fp8_maxes: tuple[float, ...]) -> int:
    """``margin`` as an int in 0..max_margin (over the recipe's formats), else ValueError naming
    it, the value and the allowed range."""
    hi = min(max_margin(m) for m in fp8_maxes)
    if isinstance(margin, (int, np.integer)) and not isinstance(margin, bool) \
            and 0 <= margin <= hi:
        return int(margin)
    raise ValueError(f"margin must be an integer from 0 to {hi} (a larger margin takes the "
                     f"scale fp8_max * 2**-margin below float32's normal range), got {margin!r}")


def check_history_len(value: object) -> int:
    """``amax_history_len`` as an int in 1..MAX_AMAX_HISTORY_LEN, checked before anything is
    allocated."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) \
            and 1 <= value <= MAX_AMAX_HISTORY_LEN:
        return int(value)
    raise ValueError(f"amax_history_len must be an integer from 1 to {MAX_AMAX_HISTORY_LEN} "
                     f"(ours: 4 MiB of float32 per tensor; TE's default is 1024), got {value!r}")


def tensor_amax(x: np.ndarray) -> float:
    """max |x| as TE's cast kernels reduce it (``fmaxf``): NaN elements skipped, inf kept, 0 for
    an empty or all-NaN x."""
    if not x.size:
        return 0.0
    a = np.abs(x)
    m = float(np.max(a))
    if math.isnan(m):
        with np.errstate(invalid="ignore"):
            m = float(np.max(np.where(np.isnan(a), 0, a)))
    return m


def scaled_max(fp8_max: float, margin: int) -> np.float32:
    """``float32(fp8_max * 2**-margin)`` (TE: ``fp8_dtype_max * std::pow(2.f, -margin)``)."""
    return np.float32(fp8_max) * np.float32(2.0**-margin)


def scale_from_amax(amax: float, fp8_max: float, margin: int, previous: float) -> float:
    """``scaled_max / amax`` in float32 (float32's max if it overflows) for a finite
    ``amax > 0``, else ``previous``: the scale rule of the fused delayed-scaling update."""
    a = np.float32(amax)
    if not (np.isfinite(a) and a > 0):
        return float(previous)
    with np.errstate(over="ignore", under="ignore"):
        s = scaled_max(fp8_max, margin) / a
    return float(_F32_MAX if np.isinf(s) else s)


def unfused_scale(amax: float, fp8_max: float, margin: int, previous: float) -> float:
    """TE's ``_default_sf_compute``: ``float32(float32(fp8_max / amax) / 2**margin)``, kept for
    an amax that is 0 or not finite, float32's max when it overflows."""
    a = np.float32(amax)
    if not (np.isfinite(a) and a > 0):
        return float(previous)
    with np.errstate(over="ignore", under="ignore"):
        s = np.float32(fp8_max) / a / np.float32(2.0**margin)
    return float(_F32_MAX if np.isinf(s) else s)


def current_scales(amax: np.ndarray, fp8_max: float, power_2: bool = False,
                   epsilon: float = 0.0, margin: int = 0) -> np.ndarray:
    """TE's ``compute_scale_from_amax`` (current scaling) on an array of amaxes, in float32:
    amax raised to ``epsilon``; 1 for a zero, inf or NaN amax; ``scaled_max / amax`` (float32's
    max on overflow); ``power_2`` clears the mantissa bits (``scale_bits &= 0xFF800000``: a
    power of two, rounded down)."""
    a = np.asarray(amax, np.float32)
    with np.errstate(invalid="ignore"):
        a = np.where(a < np.float32(epsilon), np.float32(epsilon), a)
    bad = ~np.isfinite(a) | (a == 0)
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        s = scaled_max(fp8_max, margin) / np.where(bad, np.float32(1), a)
    s = np.where(np.isinf(s), _F32_MAX, s).astype(np.float32)
    if power_2:
        s = (s.view(np.uint32) & np.uint32(0xFF800000)).view(np.float32)
    return np.where(bad, np.float32(1), s)


def current_scale(amax: float, fp8_max: float, margin: int = 0, power_2: bool = False,
                  epsilon: float = 0.0) -> float:
    """``current_scales`` of one amax."""
    return float(current_scales(np.float32(amax), fp8_max, power_2, epsilon, margin))


class ScalingState:
    """The scale of one tensor and its amax history (see the module docstring for the rule).

    >>> state = ScalingState(fp8_max=448.0, history_len=2)
    >>> state.scale, state.update(2.0), state.update(1.0), state.update(1.0)
    (1.0, 224.0, 224.0, 448.0)
    >>> state.update(0.0), state.amax_history.tolist()  # a zero amax: no roll, scale kept
    (448.0, [0.0, 1.0])
    """

    def __init__(self, fp8_max: float, history_len: int = 1024,
                 algo: str | Callable[[np.ndarray], Any] = "max", margin: int = 0,
                 fmt: Format | None = None) -> None:
        self.fp8_max = float(fp8_max)
        self.history_len = check_history_len(history_len)
        if not (callable(algo) or algo in AMAX_ALGOS):
            raise ValueError(f"amax_compute_algo must be one of {AMAX_ALGOS} or a callable "
                             f"(amax_history -> amax), got {algo!r}")
        self.algo = algo
        self.margin = check_margin(margin, (self.fp8_max,))
        self.fmt = fmt
        self.scale = 1.0
        self.amax_history = np.zeros(self.history_len, dtype=np.float32)
        self.steps = 0

    def reduced_amax(self) -> float:
        """The amax the next scale comes from: ``fmaxf`` over the window (NaN dropped), its
        position 0, or the callable's answer."""
        h = self.amax_history
        if callable(self.algo):
            return float(np.float32(np.asarray(self.algo(h.copy()), np.float32)))
        if self.algo == "most_recent":
            return float(h[0])
        return float(np.max(np.where(np.isnan(h), np.float32(0), h)))

    def _roll(self, amax: np.float32) -> None:
        rolled = np.roll(self.amax_history, -1)
        rolled[-1] = amax
        rolled[0] = 0.0
        self.amax_history = rolled

    def update(self, amax: float) -> float:
        """Record this step's ``amax``, recompute the scale, rotate the window (TE's fused update;
        the unfused one for a callable algorithm); returns the new scale."""
        a = self._staged(np.float32(amax))
        self.steps += 1
        if callable(self.algo):
            self.amax_history[0] = a
            reduced = self.reduced_amax()
            self._roll(a)
            self.scale = unfused_scale(reduced, self.fp8_max, self.margin, self.scale)
            return self.scale
        if a == 0:
            return self.scale  # TE's kernel: a zero amax skips the roll and keeps the scale
        self.amax_history[0] = a  # staged: the window now holds the last L amaxes
        reduced = self.reduced_amax()
        self._roll(a)
        self.scale = scale_from_amax(reduced, self.fp8_max, self.margin, self.scale)
        return self.scale

    def _staged(self, amax: np.float32) -> np.float32:
        """The amax in position 0 once this step's cast has maxed into it (``atomicMaxFloat``
        on the bits of two values >= 0: a NaN wins); position 0 is 0 unless calibrated."""
        held = self.amax_history[0]
        return held if np.isnan(held) or held > amax else amax

    def stage(self, amax: float) -> None:
        """A cast's amax held for a later ``update`` (TE's cast kernels ``atomicMaxFloat`` it
        into position 0; the update runs at the end of the ``autocast`` block or backward):
        position 0 keeps the larger; ``update(0.0)`` then applies it."""
        self.amax_history[0] = self._staged(np.float32(amax))

    def calibrate(self, amax: float) -> None:
        """Calibration (no cast): ``amax`` replaces position 0 (TE's ``amax.copy_``); the
        scale, the rest of the window and the step count stay."""
        self.amax_history[0] = np.float32(amax)

    def current(self, amax: float, power_2: bool = False, epsilon: float = 0.0) -> float:
        """Current scaling: the scale from this tensor's own ``amax`` (``current_scale``), kept
        in the state with the amax at position 0; returns the scale."""
        self.amax_history[0] = np.float32(amax)
        self.scale = current_scale(amax, self.fp8_max, self.margin, power_2, epsilon)
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
        steps = _count(f"{where}.steps", state["steps"])
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


def _count(name: str, value: object) -> int:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0:
        return int(value)
    raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
