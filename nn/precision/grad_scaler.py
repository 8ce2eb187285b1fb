"""PyTorch's face of dynamic loss scaling: ``GradScaler`` over ``nn.precision.loss_scale``'s
``DynamicLossScale`` (the tf.keras face, ``LossScaleOptimizer``, lives there too)."""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

import fpsim
from nn.engine.checks import count, factor, positive_float32
from nn.engine.checks import device as _check_device
from nn.optimizers import Optimizer, _name_of, _needs_rounding
from nn.precision.loss_scale import DynamicLossScale, _scale_value


def _scaler_device(value: object) -> str:
    """"cpu", or "cuda" (PyTorch's default; the scale works the same, emulated on the CPU)."""
    if isinstance(value, str) and value.strip().lower().split(":")[0] == "cuda":
        return "cuda"
    return _check_device("device", value)


class _Stage(enum.Enum):
    """Where one optimizer is in the scale -> unscale_ -> step -> update cycle."""

    READY = "ready"
    UNSCALED = "unscaled"
    STEPPED = "stepped"


class GradScaler:
    """PyTorch's ``torch.amp.GradScaler``, over ``DynamicLossScale``.

    Usage (the PyTorch training loop; the optimizer is built with ``params=``)::

        scaler = GradScaler("cpu")   # or GradScaler(device="cpu"), or GradScaler()
        scaler.scale(loss).backward()
        scaler.step(opt)          # unscales opt's grads, skips the step on inf/NaN
        scaler.update()
        opt.zero_grad()

    Rules:

    - ``scale(x)`` returns ``x * scale`` (the scale is a float32, initially ``init_scale``);
    - ``unscale_(opt)`` multiplies each param's ``.grad`` in place by
      ``float32(1 / float64(scale))`` and records whether any *scaled* gradient was inf/NaN;
    - ``step(opt)`` calls ``unscale_(opt)`` if not done yet, then ``opt.step()`` only if that
      optimizer's gradients were finite (a per-optimizer skip);
    - ``update()``: any inf/NaN recorded since the last update -> ``scale *= backoff_factor``
      and the growth tracker resets, with no floor (the scale can collapse to 0); otherwise the
      tracker counts up and after ``growth_interval`` finite steps ``scale *= growth_factor``
      if the float32 result is finite (the tracker resets either way);
    - ``update(new_scale)`` sets the scale directly and leaves the tracker alone;
    - misuse raises RuntimeError: ``unscale_``/``step`` without ``scale()`` since the last
      ``update()``, ``unscale_`` twice or after ``step``, ``step`` twice, ``update`` before any
      ``step``/``unscale_``; unscaling fp16 gradients raises ValueError;
    - ``enabled=False`` makes every method a pass-through (``step`` just calls ``opt.step()``);
    - ``device`` (first, as in ``torch.amp.GradScaler``) is "cpu" or "cuda" (the scale
      works the same; fpsim emulates on the CPU); ``enabled`` is True or False (a string
      such as "False" raises). The other arguments follow in ``torch.amp.GradScaler``'s order, so
      ``GradScaler("cpu", 1024.0)`` sets ``init_scale`` as it does in PyTorch, and
      ``GradScaler(1024.0)`` (the old ``torch.cuda.amp`` spelling) raises instead of being
      read as a device.
    """

    def __init__(self, device: str = "cpu", init_scale: float = 2.0**16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        if isinstance(device, (int, float, np.number)) and not isinstance(device, bool):
            raise TypeError(f"GradScaler's first argument is the device ('cpu'), got "
                            f"{device!r}; pass the scale by keyword: "
                            f"GradScaler('cpu', init_scale={device!r})")
        self.device = _scaler_device(device)
        if not isinstance(enabled, (bool, np.bool_)):  # "False" is a truthy string
            raise TypeError(f"GradScaler: enabled must be True or False, got {enabled!r}")
        self._enabled = bool(enabled)
        positive_float32("init_scale", init_scale)  # named as the caller wrote it
        self._state = DynamicLossScale(init_scale, growth_interval, growth_factor,
                                       backoff_factor)
        self._ever_scaled = False
        self._scaled_since_update = False
        self._per_optimizer: dict[int, dict[str, Any]] = {}

    def is_enabled(self) -> bool:
        return self._enabled

    # ---- the cycle -----------------------------------------------------------------------
    def scale(self, outputs: Any) -> Any:
        """``outputs * scale`` (Tensor, array, number, or a list/tuple of them)."""
        if not self._enabled:
            return outputs
        self._ever_scaled = self._scaled_since_update = True
        return _scale_value(outputs, self._state.scale)

    def _opt_state(self, optimizer: Any) -> dict[str, Any]:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"GradScaler works with nn optimizers built with params=[...] (SGD, "
                            f"RMSprop, Adam), got {type(optimizer).__name__}")
        return self._per_optimizer.setdefault(
            id(optimizer), {"stage": _Stage.READY, "found_inf": None, "optimizer": optimizer})

    def _check_scaled(self, verb: str) -> None:
        if not self._scaled_since_update:
            raise RuntimeError(f"{verb} called before scale(): call scaler.scale(loss).backward()"
                               " first in each iteration (the gradients would not be scaled)")

    def unscale_(self, optimizer: Optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale in place and record inf/NaN."""
        if not self._enabled:
            return
        self._check_scaled("unscale_()")
        state = self._opt_state(optimizer)
        if state["stage"] is _Stage.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the "
                               "last update()")
        if state["stage"] is _Stage.STEPPED:
            raise RuntimeError("unscale_() is being called after step(); call it before step()")
        params = optimizer._require_params("unscale_() (through GradScaler)")
        grads = [(p, p.grad) for p in params if p.grad is not None]
        for p, g in grads:
            if getattr(getattr(g, "fmt", None), "name", None) == "float16":
                raise ValueError(f"attempting to unscale FP16 gradients (of {_name_of(p)}); "
                                 "GradScaler needs fp32 master weights: use a mixed_float16 "
                                 "policy, not float16")
        inv_scale = np.float32(1.0 / np.float64(self._state.scale))  # 1/scale in float64
        found_inf = False
        for _, g in grads:
            data = g if isinstance(g, np.ndarray) else g.data
            found_inf = found_inf or not bool(np.isfinite(data).all())
            np.multiply(data, inv_scale, out=data, casting="unsafe")  # >= fp32, one rounding
            fmt = getattr(g, "fmt", None)
            if fmt is not None and _needs_rounding(fmt):
                np.copyto(data, fpsim.round(data, fmt))
        state["found_inf"] = found_inf if grads else None
        state["stage"] = _Stage.UNSCALED

    def step(self, optimizer: Optimizer) -> Any:
        """``optimizer.step()`` unless its unscaled gradients held inf/NaN; returns None (nn
        optimizers' ``step`` returns nothing)."""
        if not self._enabled:
            optimizer.step()
            return None
        self._check_scaled("step()")
        state = self._opt_state(optimizer)
        if state["stage"] is _Stage.STEPPED:
            raise RuntimeError("step() has already been called since the last update()")
        if state["stage"] is _Stage.READY:
            self.unscale_(optimizer)
        if state["found_inf"] is None:
            raise RuntimeError("no inf checks were recorded for this optimizer: none of its "
                               "params has a .grad; call backward() on the scaled loss first")
        if not state["found_inf"]:
            optimizer.step()
        state["stage"] = _Stage.STEPPED
        return None

    def update(self, new_scale: float | None = None) -> None:
        """Update the scale for the next iteration (see the class rules)."""
        if not self._enabled:
            return
        if not self._ever_scaled:
            raise RuntimeError("update() called before scale(): nothing to update yet")
        if new_scale is not None:
            if isinstance(new_scale, bool) or not isinstance(
                    new_scale, (int, float, np.floating, np.integer)):
                raise TypeError(f"new_scale must be a number, got {type(new_scale).__name__}")
            self._state.set_scale(new_scale, name="new_scale")
        else:
            found = [s["found_inf"] for s in self._per_optimizer.values()
                     if s["found_inf"] is not None]
            if not found:
                raise RuntimeError("no inf checks were recorded prior to update(): call "
                                   "step(optimizer) (or unscale_(optimizer)) first")
            self._state.update(finite=not any(found))
        self._per_optimizer.clear()
        self._scaled_since_update = False

    # ---- getters, setters, state -----------------------------------------------------------
    def get_scale(self) -> float:
        """The current scale, or 1.0 when disabled."""
        return self._state.scale if self._enabled else 1.0

    def get_growthfactor(self) -> float:
        return self._state.growth_factor

    def set_growthfactor(self, new_factor: float) -> None:
        self._state.growth_factor = factor("growth_factor", new_factor, above_one=True)

    def get_backofffactor(self) -> float:
        return self._state.backoff_factor

    def set_backofffactor(self, new_factor: float) -> None:
        self._state.backoff_factor = factor("backoff_factor", new_factor, above_one=False)

    def get_growth_interval(self) -> int:
        return self._state.growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._state.growth_interval = count("growth_interval", new_interval, minimum=1)

    _KEYS = ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")

    def state_dict(self) -> dict[str, Any]:
        """PyTorch's keys: scale, growth_factor, backoff_factor, growth_interval,
        _growth_tracker. Empty when disabled."""
        if not self._enabled:
            return {}
        s = self._state
        return {"scale": s.scale, "growth_factor": s.growth_factor,
                "backoff_factor": s.backoff_factor, "growth_interval": s.growth_interval,
                "_growth_tracker": s.counter}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore ``state_dict()`` output (validated first; nothing changes on error)."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("the source state dict is empty, possibly because it was saved "
                               "from a disabled GradScaler")
        missing = [k for k in self._KEYS if k not in state_dict]
        if missing:
            raise ValueError(f"GradScaler state dict lacks {missing}; expected keys {self._KEYS}")
        new = DynamicLossScale(1.0, state_dict["growth_interval"], state_dict["growth_factor"],
                               state_dict["backoff_factor"])
        tracker = count("_growth_tracker", state_dict["_growth_tracker"])
        new._set_scale(state_dict["scale"], "scale", allow_zero=True)
        new.counter = tracker
        self._state = new

    def __repr__(self) -> str:
        return (f"GradScaler(scale={self.get_scale()}, growth_tracker={self._state.counter}, "
                f"enabled={self._enabled})")

