"""Dynamic loss scaling: one state machine, two faces (tf.keras and PyTorch).

Why: fp16 gradients below 2**-24 flush to zero. Multiplying the loss by a scale S multiplies
every gradient of the backward pass by S (exactly, for a power of two without overflow),
lifting small gradients into fp16's range; the weight update divides by S again.

- ``DynamicLossScale``: the shared rule (grow after N finite steps, back off on inf/NaN).
- ``LossScaleOptimizer``: tf.keras's face (``get_scaled_loss``, ``get_unscaled_gradients``,
  ``apply_gradients`` of unscaled gradients), used by ``Model.fit``. Keras 3's face
  (``scale_loss``, and ``apply_gradients`` of *scaled* gradients, unscaled inside) is
  ``nn.faces.keras.optimizers.LossScaleOptimizer``, a subclass with Keras 3's rules.
- ``GradScaler`` (in ``nn.precision.grad_scaler``): PyTorch's face (``scale``, ``unscale_``,
  ``step``, ``update``).

Both keep the scale in float32, as their frameworks do.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np

import fpsim
from nn.engine.checks import count, factor, loss_scale, positive_float32
from nn.engine.registry import OPTIMIZERS
from nn.engine.tensor import Tensor
from nn.optimizers import Optimizer, _needs_rounding, gradient_array

KERAS_INITIAL_SCALE = 2.0**15  # Keras's LossScaleOptimizer defaults (theirs)
KERAS_GROWTH_STEPS = 2000


class DynamicLossScale:
    """The loss-scale state machine both faces share. The scale is a float32.

    ``update(finite)`` is called once per training step:

    - finite gradients: ``counter += 1``; when ``counter`` reaches ``growth_interval``, the
      counter resets to 0 and ``new = float32(scale * growth_factor)`` (capped at
      ``max_scale`` if given) replaces the scale only if it is finite.
    - a non-finite gradient (inf or NaN): ``scale = float32(scale * backoff_factor)``, raised to
      ``min_scale`` if given (no floor otherwise: the scale can reach 0), counter = 0.
    - the return value says whether the step's update should be applied (= ``finite``).

    >>> s = DynamicLossScale(8.0, growth_interval=2, growth_factor=2.0, backoff_factor=0.5)
    >>> s.update(True), s.scale
    (True, 8.0)
    >>> s.update(True), s.scale
    (True, 16.0)
    >>> s.update(False), s.scale
    (False, 8.0)
    """

    def __init__(self, initial_scale: float, growth_interval: int, growth_factor: float,
                 backoff_factor: float, min_scale: float | None = None,
                 max_scale: float | None = None) -> None:
        self.growth_interval = count("growth_interval", growth_interval, minimum=1)
        self.growth_factor = factor("growth_factor", growth_factor, above_one=True)
        self.backoff_factor = factor("backoff_factor", backoff_factor, above_one=False)
        self.min_scale = None if min_scale is None else positive_float32("min_scale", min_scale)
        self.max_scale = None if max_scale is None else positive_float32("max_scale", max_scale)
        scale = positive_float32("initial_scale", initial_scale)
        lo = self.min_scale if self.min_scale is not None else scale
        hi = self.max_scale if self.max_scale is not None else scale
        if not lo <= scale <= hi:
            raise ValueError(f"initial_scale {float(scale)} must lie in [min_scale, max_scale] "
                             f"= [{min_scale}, {max_scale}]")
        self._scale = scale
        self.counter = 0

    @property
    def scale(self) -> float:
        """The current scale (a float32 value, returned as a Python float)."""
        return float(self._scale)

    def update(self, finite: bool) -> bool:
        """Advance one step; returns True if the step's update should be applied."""
        if finite:
            self.counter += 1
            if self.counter >= self.growth_interval:
                with np.errstate(over="ignore"):  # an overflow to inf is checked just below
                    grown = np.float32(float(self._scale) * self.growth_factor)
                if self.max_scale is not None:
                    grown = min(grown, self.max_scale)
                if np.isfinite(grown):
                    self._scale = grown
                self.counter = 0
            return True
        shrunk = np.float32(float(self._scale) * self.backoff_factor)
        if self.min_scale is not None:
            shrunk = max(shrunk, self.min_scale)
        self._scale = shrunk
        self.counter = 0
        return False

    def set_scale(self, value: float, name: str = "scale") -> None:
        """Overwrite the scale (rounded to float32); the counter is left as it is.

        The value must be finite and > 0 in float32 and lie in [min_scale, max_scale];
        ``name`` is the argument the caller's user wrote, for the error message.
        """
        self._set_scale(value, name, allow_zero=False)

    def _set_scale(self, value: object, name: str, allow_zero: bool) -> None:
        if allow_zero and isinstance(value, (int, float, np.floating, np.integer)) \
                and not isinstance(value, bool) and value == 0:
            value32 = np.float32(0)
        else:
            value32 = positive_float32(name, value)
        lo, hi = self.min_scale, self.max_scale
        if (lo is not None and value32 < lo) or (hi is not None and value32 > hi):
            raise ValueError(f"{name} must lie in [min_scale, max_scale] = "
                             f"[{None if lo is None else float(lo)}, "
                             f"{None if hi is None else float(hi)}], got {value!r}")
        self._scale = value32

    def state_dict(self) -> dict[str, Any]:
        """``{"scale": float, "counter": int}`` (the configuration is not state)."""
        return {"scale": self.scale, "counter": self.counter}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()`` output: ``scale`` as ``set_scale`` checks it (0 also, when
        there is no ``min_scale``: backoff can underflow to it), ``counter``
        an integer >= 0 (validated first; nothing changes on error)."""
        try:
            scale, counter = state["scale"], state["counter"]
        except (KeyError, TypeError) as e:
            raise ValueError(f"not a loss-scale state ({e!r}); expected keys 'scale', "
                             "'counter'") from None
        counter = count("counter", counter)
        # without a floor, repeated backoff can reach 0 (float32 underflow): a reachable state
        self._set_scale(scale, "scale", allow_zero=self.min_scale is None)
        self.counter = counter

    def __repr__(self) -> str:
        return (f"DynamicLossScale(scale={self.scale}, counter={self.counter}, "
                f"growth_interval={self.growth_interval}, growth_factor={self.growth_factor}, "
                f"backoff_factor={self.backoff_factor}, min_scale={self.min_scale}, "
                f"max_scale={self.max_scale})")


def _all_finite(arrays: Iterable[np.ndarray]) -> bool:
    return all(bool(np.isfinite(a).all()) for a in arrays)


def _times(x: np.ndarray, factor: np.float32) -> np.ndarray:
    """x * factor computed in at least float32 and returned in x's float dtype (fp16 stays fp16,
    rounded once: a float16 copy of the factor could itself overflow or underflow)."""
    if x.dtype.kind != "f":
        return x * float(factor)
    return (x * factor).astype(x.dtype, copy=False)


def _scale_value(x: Any, scale: float) -> Any:
    """x * scale for a Tensor (recorded by autograd), an ndarray, a number, or a list/tuple."""
    if isinstance(x, (list, tuple)):
        return type(x)(_scale_value(v, scale) for v in x)
    if isinstance(x, np.ndarray):
        return _times(x, np.float32(scale))
    if isinstance(x, (int, float, np.number)) and not isinstance(x, bool):
        return x * scale
    if hasattr(x, "data") and hasattr(x, "__mul__"):
        return x * scale
    raise TypeError(f"cannot scale a {type(x).__name__}; pass an nn.Tensor, an ndarray, a "
                    "number or a list/tuple of them")


def _like(g: Any, data: np.ndarray, fmt: Any) -> Any:
    """A gradient of the same kind as g holding ``data``."""
    if isinstance(g, np.ndarray) or not hasattr(g, "data"):
        return data
    return Tensor(data, fmt=fmt)


class LossScaleOptimizer:
    """tf.keras's ``LossScaleOptimizer``: wraps an optimizer and scales the loss.

    Usage (the tf.keras custom training loop)::

        opt = LossScaleOptimizer(Adam())
        with nn.GradientTape() as tape:
            loss = loss_fn(y, model(x))
            scaled_loss = opt.get_scaled_loss(loss)               # loss * scale
        scaled_grads = tape.gradient(scaled_loss, model.trainable_variables)
        grads = opt.get_unscaled_gradients(scaled_grads)
        opt.apply_gradients(zip(grads, model.trainable_variables))

    The tape returns fresh gradients and leaves ``.grad`` alone, so nothing carries over from one
    step to the next. ``apply_gradients`` consumes what it is given: afterwards ``.grad`` of
    every variable it was handed is None (applied or skipped), so even the PyTorch-style spelling
    (``scaled_loss.backward()``, gradients from ``v.grad``) cannot accumulate across steps.

    Rules (dynamic=True):

    - the scale starts at ``initial_scale`` (``KERAS_INITIAL_SCALE``, 2**15) and is a float32;
    - ``get_unscaled_gradients`` multiplies each gradient by ``float32(1 / scale)`` (the
      reciprocal taken in float32, as tf.keras does), rounded to the gradient's format;
    - ``apply_gradients`` checks the gradients it is given (the *unscaled* ones) for inf/NaN;
    - a non-finite gradient skips the update: variables and optimizer slots stay bit-identical,
      the inner optimizer's ``iterations`` still advances by one (as in tf.keras), the scale
      halves but never goes below 1, and the growth counter resets;
    - after ``dynamic_growth_steps`` consecutive finite steps the scale doubles, if the doubled
      float32 value is finite; the counter resets either way.

    With ``dynamic=False`` the scale stays ``initial_scale`` and every update is applied, finite
    or not (tf.keras's fixed loss scale); ``dynamic_growth_steps`` is then None, and passing one
    raises, as in tf.keras. ``dynamic`` must be True or False (the string "False" is refused,
    not read as true).

    ``scale_loss`` (Keras 3's name) raises here: Keras 3 pairs it with an ``apply_gradients``
    that unscales, tf.keras's ``apply_gradients`` does not, so the pair would step
    ``loss_scale`` times too far. Keras 3's contract is ``nn.faces.keras.optimizers.
    LossScaleOptimizer``. ``Model.fit`` steps through ``scale_loss_for_fit`` and
    ``apply_scaled_gradients``, which each face defines by its own rules.
    """

    def __init__(self, inner_optimizer: Optimizer, initial_scale: float = KERAS_INITIAL_SCALE,
                 dynamic_growth_steps: int | None = None, dynamic: bool = True) -> None:
        if isinstance(inner_optimizer, LossScaleOptimizer):
            raise TypeError("LossScaleOptimizer cannot wrap another LossScaleOptimizer")
        if not isinstance(inner_optimizer, Optimizer):
            raise TypeError(f"inner_optimizer must be an nn optimizer (SGD, RMSprop, Adam), got "
                            f"{type(inner_optimizer).__name__}")
        if not isinstance(dynamic, (bool, np.bool_)):
            raise TypeError(f"{type(self).__name__}: dynamic must be True or False, got "
                            f"{dynamic!r} ({type(dynamic).__name__})")
        self.inner_optimizer = inner_optimizer
        self.dynamic = bool(dynamic)
        self.initial_scale = float(np.float32(loss_scale("initial_scale", initial_scale)))
        self.dynamic_growth_steps: int | None = None
        self._state: DynamicLossScale | None = None
        if self.dynamic:
            steps = KERAS_GROWTH_STEPS if dynamic_growth_steps is None else dynamic_growth_steps
            self.dynamic_growth_steps = count("dynamic_growth_steps", steps, minimum=1)
            self._state = DynamicLossScale(initial_scale, self.dynamic_growth_steps,
                                           growth_factor=2.0, backoff_factor=0.5, min_scale=1.0)
        elif dynamic_growth_steps is not None:
            raise ValueError(f"dynamic_growth_steps must be None when dynamic=False (a fixed "
                             f"scale never grows), got {dynamic_growth_steps!r}")
        self.skipped_steps = 0
        self.last_step_skipped = False

    _faces: ClassVar[list[type[LossScaleOptimizer]]] = []
    """The subclasses (other faces' rules), asked in turn by ``from_config``."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        LossScaleOptimizer._faces.append(cls)

    @classmethod
    def _reads_config(cls, config: dict[str, Any]) -> bool:
        """True for a config this class wrote: tf.keras's has ``dynamic``."""
        return "dynamic" in config

    # ---- read-only views -----------------------------------------------------------------
    @property
    def loss_scale(self) -> float:
        """The current loss scale."""
        return self._state.scale if self._state is not None else self.initial_scale

    @property
    def dynamic_counter(self) -> int | None:
        """Consecutive finite steps since the scale last changed (None if not dynamic)."""
        return self._state.counter if self._state is not None else None

    @property
    def iterations(self) -> int:
        """The inner optimizer's step counter (it also counts skipped steps)."""
        return self.inner_optimizer.iterations

    @iterations.setter
    def iterations(self, value: int) -> None:
        self.inner_optimizer.iterations = value  # validated by the optimizer

    @property
    def learning_rate(self) -> float:
        return self.inner_optimizer.learning_rate

    @learning_rate.setter
    def learning_rate(self, value: float) -> None:
        self.inner_optimizer.learning_rate = value

    @property
    def variables(self) -> list[Any]:
        return self.inner_optimizer.variables

    # ---- scaling ---------------------------------------------------------------------------
    def get_scaled_loss(self, loss: Any) -> Any:
        """``loss * loss_scale``; a callable loss gives a callable returning the scaled loss."""
        if callable(loss) and not hasattr(loss, "data"):
            return lambda: self.get_scaled_loss(loss())
        return _scale_value(loss, self.loss_scale)

    def scale_loss(self, loss: Any) -> Any:
        """Keras 3's name: refused here, where ``apply_gradients`` follows tf.keras (it expects
        gradients already unscaled), so that a Keras 3 loop cannot step 2**15 times too far."""
        raise AttributeError(
            "nn.LossScaleOptimizer follows tf.keras: write scaled = opt.get_scaled_loss(loss), "
            "grads = opt.get_unscaled_gradients(scaled_grads), opt.apply_gradients(...). "
            "Keras 3's scale_loss, whose apply_gradients unscales, is "
            "nn.faces.keras.optimizers.LossScaleOptimizer")

    def scale_loss_for_fit(self, loss: Any) -> Any:
        """The loss ``Model.fit`` differentiates: ``loss * loss_scale``."""
        return self.get_scaled_loss(loss)

    def get_unscaled_gradients(self, grads: Iterable[Any]) -> list[Any]:
        """Each gradient times ``float32(1 / loss_scale)``; None stays None.

        A Tensor gives a Tensor (in the same format, rounded to it), an array an array.
        """
        reciprocal = np.float32(1) / np.float32(self.loss_scale)  # tf.keras: 1/scale in float32
        out: list[Any] = []
        for g in grads:
            if g is None:
                out.append(None)
                continue
            data = gradient_array(g)
            fmt = getattr(g, "fmt", None)
            new = _times(data, reciprocal)
            if fmt is not None and _needs_rounding(fmt):
                new = fpsim.round(new, fmt)
            out.append(_like(g, new, fmt))
        return out

    # ---- applying ----------------------------------------------------------------------------
    def apply_scaled_gradients(self, grads_and_vars: Iterable[tuple[Any, Any]]) -> bool:
        """What ``Model.fit`` calls with the gradients of ``scale_loss_for_fit``'s loss: here
        ``get_unscaled_gradients`` then ``apply_gradients`` (tf.keras); returns True if
        applied."""
        pairs = list(grads_and_vars)
        unscaled = self.get_unscaled_gradients([g for g, _ in pairs])
        return self.apply_gradients(zip(unscaled, [v for _, v in pairs], strict=True))

    def apply_gradients(self, grads_and_vars: Iterable[tuple[Any, Any]]) -> bool:
        """Apply unscaled gradients unless one is non-finite; returns True if applied.

        Invalid input (shapes, no gradients at all) raises before the scale changes. Afterwards
        ``.grad`` of every variable given is None: the gradients are consumed (TF has no
        ``.grad``), so a loop that reads ``v.grad`` cannot carry them into the next step.
        """
        pairs = list(grads_and_vars)
        prepared = self.inner_optimizer._prepare(pairs)
        apply = True
        if self._state is not None:
            apply = self._state.update(_all_finite(g for g, _ in prepared))
        self.last_step_skipped = not apply
        if apply:
            self.inner_optimizer._apply_prepared(prepared)
        else:
            self.skipped_steps += 1
            self.inner_optimizer.iterations += 1  # tf.keras counts the skipped step
        for pair in pairs:
            if hasattr(pair[1], "grad"):
                pair[1].grad = None
        return apply

    # ---- config and checkpoints --------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        """The constructor arguments; the inner optimizer serialized through the optimizer
        registry (``nn.engine.registry.OPTIMIZERS``)."""
        return {"inner_optimizer": OPTIMIZERS.serialize(self.inner_optimizer),
                "initial_scale": self.initial_scale,
                "dynamic_growth_steps": self.dynamic_growth_steps, "dynamic": self.dynamic}

    @classmethod
    def from_config(cls, config: dict[str, Any], inner_optimizer: Optimizer | None = None
                    ) -> LossScaleOptimizer:
        """A new LossScaleOptimizer from ``get_config``'s output (around ``inner_optimizer``
        if given, else the one the config describes). A config without ``dynamic`` is Keras
        3's (``nn.precision.loss_scale_keras3``), and makes that face's optimizer: each subclass
        says which configs it reads (``_reads_config``) and is found in ``_faces``."""
        if cls is LossScaleOptimizer and not cls._reads_config(config):
            for face in LossScaleOptimizer._faces:
                if face._reads_config(config):
                    return face.from_config(config, inner_optimizer)
            raise ValueError(f"not a LossScaleOptimizer config: {sorted(config)}")
        inner = (OPTIMIZERS.deserialize(config["inner_optimizer"]) if inner_optimizer is None
                 else inner_optimizer)
        return cls(inner, initial_scale=config["initial_scale"],
                   dynamic_growth_steps=config["dynamic_growth_steps"],
                   dynamic=config["dynamic"])

    def state_dict(self) -> dict[str, Any]:
        """Everything a checkpoint needs to resume: loss-scale state and the inner optimizer's."""
        return {"loss_scale": self.loss_scale,
                "dynamic_counter": self.dynamic_counter or 0,
                "skipped_steps": self.skipped_steps,
                "last_step_skipped": self.last_step_skipped,
                "optimizer": self.inner_optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any], variables: Iterable[Any] | None = None
                        ) -> None:
        """Restore ``state_dict()`` output (validated first; nothing changes on error)."""
        try:
            scale_state = {"scale": state["loss_scale"], "counter": state["dynamic_counter"]}
            skipped = count("skipped_steps", state["skipped_steps"])
            inner_state = state["optimizer"]
            last = state.get("last_step_skipped", False)
        except (KeyError, TypeError) as e:
            raise ValueError(f"not a LossScaleOptimizer state ({e!r}); expected keys "
                             "'loss_scale', 'dynamic_counter', 'skipped_steps', 'optimizer'"
                             ) from None
        probe = copy.copy(self._state) if self._state else DynamicLossScale(1.0, 1, 2.0, 0.5)
        probe.load_state_dict(scale_state)  # validates without touching self
        if not self.dynamic and probe.scale != self.loss_scale:
            raise ValueError(f"state has loss scale {probe.scale}, this fixed-scale optimizer "
                             f"uses {self.loss_scale}")
        if not isinstance(last, bool):
            raise ValueError(f"last_step_skipped must be true or false, got {last!r}")
        self.inner_optimizer.load_state_dict(inner_state, variables)
        if self._state is not None:
            self._state.load_state_dict(scale_state)
        self.skipped_steps = skipped
        self.last_step_skipped = last

    def __repr__(self) -> str:
        return (f"LossScaleOptimizer({self.inner_optimizer!r}, loss_scale={self.loss_scale}, "
                f"dynamic={self.dynamic})")
