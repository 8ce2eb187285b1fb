"""A reference model of dynamic loss scaling, and one driver per scaler face.

The reference keeps the scale as an exact power of two, ``2**e`` (or exactly 0), so it needs
no floating point at all: growth adds to ``e`` (if ``2**e`` stays below float32's overflow,
2**128), back-off subtracts (clamped at a floor if there is one; below float32's smallest
subnormal 2**-149 the scale is 0, since float32(2**-150) ties to even, to 0).

A driver turns an event ("finite", "inf", "nan") into one training step of its face:

- ``DLSDriver``: ``DynamicLossScale.update(finite)``;
- ``LSODriver``: ``LossScaleOptimizer.apply_gradients`` with an (unscaled) gradient holding
  inf or NaN on a non-finite step;
- ``GSDriver``: ``GradScaler.scale -> (.grad set to the scaled gradient) -> step -> update``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

import fpsim
import nn
from fpsim.testing import FINITE, INF, NAN
from nn.engine.tensor import Tensor, Variable
from nn.precision.grad_scaler import GradScaler
from nn.precision.loss_scale import DynamicLossScale, LossScaleOptimizer

F32_MAX_EXP = 127  # 2**127 is float32's largest power of two
F32_MIN_EXP = -149  # 2**-149 its smallest subnormal


@dataclass
class ReferenceScale:
    """Dynamic loss scaling with power-of-two scale and factors, in integer exponents."""

    e: int | None  # the scale is 2**e; None means exactly 0
    interval: int
    grow: int = 1  # growth factor 2**grow
    back: int = 1  # backoff factor 2**-back
    floor: int | None = None  # min_scale 2**floor
    cap: int | None = None  # max_scale 2**cap
    counter: int = 0

    @property
    def scale(self) -> float:
        return 0.0 if self.e is None else 2.0**self.e

    def step(self, event: str) -> bool:
        if event == FINITE:
            self.counter += 1
            if self.counter >= self.interval:
                self.counter = 0
                if self.e is not None:
                    new = self.e + self.grow
                    if self.cap is not None:
                        new = min(new, self.cap)
                    if new <= F32_MAX_EXP:
                        self.e = new
            return True
        self.counter = 0
        new = None if self.e is None else self.e - self.back
        if self.floor is not None:
            new = self.floor if new is None else max(new, self.floor)
        self.e = None if new is None or new < F32_MIN_EXP else new
        return False


def gradient_for(event: str, size: int = 3) -> np.ndarray:
    """A small float32 gradient, with an inf or a NaN in it for a non-finite event."""
    g = np.float32([0.25, -0.5, 0.125, 1.0][:size])
    if event == INF:
        g[-1] = np.inf
    elif event == NAN:
        g[0] = np.nan
    return g


@dataclass
class DLSDriver:
    """``DynamicLossScale`` itself."""

    config: dict[str, Any]
    impl: DynamicLossScale = field(init=False)

    def __post_init__(self) -> None:
        self.impl = DynamicLossScale(**self.config)

    def step(self, event: str) -> bool:
        return self.impl.update(event == FINITE)

    @property
    def scale(self) -> float:
        return self.impl.scale

    @property
    def counter(self) -> int:
        return self.impl.counter

    def round_trip(self) -> tuple[dict, dict]:
        """Replace the scaler by a fresh one loaded from its state_dict; (before, after)."""
        state = self.impl.state_dict()
        self.impl = DynamicLossScale(**self.config)
        self.impl.load_state_dict(state)
        return state, self.impl.state_dict()


@dataclass
class LSODriver:
    """tf.keras's ``LossScaleOptimizer`` around SGD (with momentum), RMSprop or Adam."""

    initial_scale: float = 2.0**15
    growth_steps: int = 2000
    inner: str = "sgd"
    w: Variable = field(init=False)
    opt: LossScaleOptimizer = field(init=False)

    def __post_init__(self) -> None:
        self.w = Variable(np.float32([1.0, -2.0, 0.5]), fmt=fpsim.FP32, name="w")
        self.opt = self._fresh()

    def _fresh(self) -> LossScaleOptimizer:
        return LossScaleOptimizer(make_optimizer(self.inner), initial_scale=self.initial_scale,
                                  dynamic_growth_steps=self.growth_steps)

    def step(self, event: str) -> bool:
        return self.opt.apply_gradients([(gradient_for(event), self.w)])

    @property
    def scale(self) -> float:
        return self.opt.loss_scale

    @property
    def counter(self) -> int:
        return self.opt.dynamic_counter

    def round_trip(self) -> tuple[dict, dict]:
        state = self.opt.state_dict()
        self.opt = self._fresh()
        built = bool(state["optimizer"]["variables"])  # no slots yet before the first step
        self.opt.load_state_dict(state, [self.w] if built else None)
        return _comparable(state), _comparable(self.opt.state_dict())


@dataclass
class GSDriver:
    """PyTorch's ``GradScaler`` with one optimizer over one fp32 parameter."""

    init_scale: float = 2.0**16
    growth_interval: int = 2000
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    inner: str = "sgd"
    w: Variable = field(init=False)
    opt: Any = field(init=False)
    scaler: GradScaler = field(init=False)

    def __post_init__(self) -> None:
        self.w = Variable(np.float32([1.0, -2.0, 0.5]), fmt=fpsim.FP32, name="w")
        self.opt = make_optimizer(self.inner, params=[self.w])
        self.scaler = self._fresh()

    def _fresh(self) -> GradScaler:
        return GradScaler("cpu", init_scale=self.init_scale, growth_factor=self.growth_factor,
                          backoff_factor=self.backoff_factor,
                          growth_interval=self.growth_interval)

    def step(self, event: str) -> bool:
        self.scaler.scale(np.float32(1.0))
        with np.errstate(all="ignore"):  # scaled gradients may overflow, 1/0 is inf
            scaled = gradient_for(event) * np.float32(self.scaler.get_scale())
        self.w.grad = Tensor._make(scaled.astype(np.float32), fpsim.FP32)
        before = self.opt.iterations
        with np.errstate(all="ignore"):
            self.scaler.step(self.opt)
            self.scaler.update()
        return self.opt.iterations != before  # the optimizer stepped

    @property
    def scale(self) -> float:
        return self.scaler.get_scale()

    @property
    def counter(self) -> int:
        return self.scaler.state_dict()["_growth_tracker"]

    def round_trip(self) -> tuple[dict, dict]:
        state = self.scaler.state_dict()
        self.scaler = self._fresh()
        self.scaler.load_state_dict(state)
        return state, self.scaler.state_dict()


def make_optimizer(name: str, params: list | None = None) -> Any:
    """SGD with momentum, RMSprop or Adam: each keeps at least one slot per variable."""
    if name == "sgd":
        return nn.SGD(0.01, momentum=0.9, params=params)
    if name == "rmsprop":
        return nn.RMSprop(0.01, momentum=0.5, params=params)
    return nn.Adam(0.01, params=params)


def _comparable(state: dict) -> dict:
    """A state dict with arrays turned into bytes (so == compares bit for bit)."""
    def conv(v: Any) -> Any:
        if isinstance(v, np.ndarray):
            return (v.dtype.str, v.shape, v.tobytes())
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        if isinstance(v, list):
            return [conv(x) for x in v]
        return v
    return conv(state)
