"""Keras 3's ``LossScaleOptimizer``: the contract of ``keras.optimizers.LossScaleOptimizer``
(keras/src/optimizers/loss_scale_optimizer.py, Keras 3.x), over the same state machine as
tf.keras's (``nn.precision.loss_scale.DynamicLossScale``).

The Keras 3 custom loop::

    opt = LossScaleOptimizer(keras.optimizers.SGD(0.1))
    with nn.GradientTape() as tape:
        loss = loss_fn(y, model(x))
        scaled_loss = opt.scale_loss(loss)                  # loss * scale
    grads = tape.gradient(scaled_loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))   # unscales inside

How it differs from tf.keras's (``nn.LossScaleOptimizer``), each as Keras 3 does it:

- ``apply_gradients`` takes the gradients of the *scaled* loss and divides them by the scale
  itself (tf.keras's takes gradients already unscaled by ``get_unscaled_gradients``);
- the finiteness check is on those scaled gradients;
- a skipped step does not advance ``iterations`` (the inner optimizer is not called);
- the scale has no floor: repeated non-finite steps give 2, 1, 0.5, 0.25, ...;
- the scale has no ceiling either: after ``dynamic_growth_steps`` finite steps it doubles in
  float32 even when that overflows, and stores inf (``Keras3LossScale``); from then on every
  scaled loss is inf, every step is skipped and inf * 0.5 keeps the scale at inf, as in
  Keras 3 (tf.keras and PyTorch keep the last finite scale);
- there is no fixed scale: ``dynamic=False`` raises (our fixed scale is tf.keras's face),
  and tf.keras's ``get_scaled_loss``/``get_unscaled_gradients`` raise naming this spelling.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

import fpsim
from nn.engine.checks import count
from nn.engine.registry import OPTIMIZERS
from nn.engine.tensor import Tensor
from nn.optimizers import Optimizer, _needs_rounding, gradient_array
from nn.precision.loss_scale import (
    KERAS_GROWTH_STEPS,
    KERAS_INITIAL_SCALE,
    DynamicLossScale,
    LossScaleOptimizer,
    _all_finite,
    _scale_value,
)


class Keras3LossScale(DynamicLossScale):
    """Keras 3's scale rule (``LossScaleOptimizer._stateful_handle_finite_grads`` and
    ``_stateful_handle_non_finite_grads``), one float32 scale and an int counter:

    - finite step: if ``counter == growth_interval - 1``: ``counter = 0`` and
      ``scale = float32(scale * 2)``, stored even when it overflows to inf; else
      ``counter += 1``;
    - non-finite step: ``counter = 0`` and ``scale = float32(scale * 0.5)`` (no floor; inf
      stays inf).

    >>> s = Keras3LossScale(2.0**127, 1, growth_factor=2.0, backoff_factor=0.5)
    >>> s.update(True), s.scale
    (True, inf)
    >>> s.update(False), s.scale
    (False, inf)
    """

    def update(self, finite: bool) -> bool:
        with np.errstate(over="ignore", under="ignore"):
            if not finite:
                self._scale = np.float32(self._scale) * np.float32(self.backoff_factor)
                self.counter = 0
                return False
            if self.counter == self.growth_interval - 1:
                self._scale = np.float32(self._scale) * np.float32(self.growth_factor)
                self.counter = 0
            else:
                self.counter += 1
        return True

    def _set_scale(self, value: object, name: str, allow_zero: bool) -> None:
        """As the shared rule, and +inf too: a Keras 3 scale that overflowed is a reachable
        state (a checkpoint taken then restores it)."""
        if isinstance(value, (float, np.floating)) and value == np.inf:
            self._scale = np.float32(np.inf)
            return
        super()._set_scale(value, name, allow_zero)


_TF_KERAS_ONLY = ("nn.faces.keras.optimizers.LossScaleOptimizer follows Keras 3, which has no "
                  "{name}: write scaled = opt.scale_loss(loss) and pass the gradients of "
                  "scaled to opt.apply_gradients, which unscales them; tf.keras's "
                  "get_scaled_loss/get_unscaled_gradients contract is nn.LossScaleOptimizer")


class Keras3LossScaleOptimizer(LossScaleOptimizer):
    """Keras 3's ``LossScaleOptimizer(inner_optimizer, initial_scale=2**15,
    dynamic_growth_steps=2000, name=None)`` (see the module docstring for the rules).

    - ``scale_loss(loss)``: ``loss * scale``, the scale a float32;
    - ``apply_gradients(zip(grads, vars))`` with the gradients of the scaled loss: if one is
      inf or NaN, the step is skipped (variables, slots and ``iterations`` untouched), the
      scale halves (no floor) and the counter resets; else each gradient is divided by the
      scale (one rounding, to the gradient's format), the inner optimizer applies them, and
      after ``dynamic_growth_steps`` such steps in a row the scale doubles (to inf, if it
      overflows: ``Keras3LossScale``);
    - ``dynamic_scale`` and ``step_counter`` are Keras 3's names of the scale and counter.

    >>> import numpy as np, nn
    >>> w = nn.Variable(np.ones(1, np.float32))
    >>> opt = Keras3LossScaleOptimizer(nn.SGD(0.1), initial_scale=2.0)
    >>> for _ in range(3):
    ...     _ = opt.apply_gradients([(np.float32([np.inf]), w)])
    >>> opt.dynamic_scale, opt.iterations, float(w.numpy()[0])
    (0.25, 0, 1.0)
    """

    def __init__(self, inner_optimizer: Optimizer, initial_scale: float = KERAS_INITIAL_SCALE,
                 dynamic_growth_steps: int = KERAS_GROWTH_STEPS, name: str | None = None,
                 **kwargs: Any) -> None:
        dynamic = kwargs.pop("dynamic", True)
        if not isinstance(dynamic, (bool, np.bool_)):
            raise TypeError(f"LossScaleOptimizer: dynamic must be True or False, got "
                            f"{dynamic!r} ({type(dynamic).__name__})")
        if not dynamic:
            raise ValueError("LossScaleOptimizer: Keras 3 has no dynamic=False (a fixed loss "
                             "scale); nn's is tf.keras's: nn.LossScaleOptimizer(optimizer, "
                             "initial_scale=S, dynamic=False)")
        if kwargs:
            raise ValueError(f"LossScaleOptimizer does not support arguments: "
                             f"{', '.join(sorted(kwargs))} (Keras 3's are inner_optimizer, "
                             "initial_scale, dynamic_growth_steps, name)")
        if dynamic_growth_steps is None:
            raise ValueError("LossScaleOptimizer: dynamic_growth_steps must be a positive "
                             "integer (Keras 3's default is 2000), got None")
        super().__init__(inner_optimizer, initial_scale, dynamic_growth_steps, dynamic=True)
        steps = count("dynamic_growth_steps", dynamic_growth_steps, minimum=1)
        self._state = Keras3LossScale(initial_scale, steps, growth_factor=2.0,
                                      backoff_factor=0.5)  # Keras 3: no floor, no ceiling
        if name is not None and not (isinstance(name, str) and name):
            raise ValueError(f"LossScaleOptimizer: name must be a non-empty string or None, "
                             f"got {name!r}")
        self.name = name or "loss_scale_optimizer"

    # ---- Keras 3's names -------------------------------------------------------------------
    @property
    def dynamic_scale(self) -> float:
        """The current loss scale (a float32 value)."""
        return self.loss_scale

    @property
    def step_counter(self) -> int:
        """Finite steps in a row since the scale last changed."""
        return self.dynamic_counter or 0

    def scale_loss(self, loss: Any) -> Any:
        """``loss * dynamic_scale`` (Keras 3); differentiate this, then ``apply_gradients``."""
        return _scale_value(loss, self.loss_scale)

    def get_scaled_loss(self, loss: Any) -> Any:
        raise AttributeError(_TF_KERAS_ONLY.format(name="get_scaled_loss"))

    def get_unscaled_gradients(self, grads: Iterable[Any]) -> list[Any]:
        raise AttributeError(_TF_KERAS_ONLY.format(name="get_unscaled_gradients"))

    def scale_loss_for_fit(self, loss: Any) -> Any:
        return self.scale_loss(loss)

    # ---- applying ----------------------------------------------------------------------------
    def _unscale(self, g: Any) -> Any:
        """``g / scale``: the quotient of two float32 values, rounded once to float32 (float64
        division then a float32 rounding is correctly rounded: 53 >= 2 * 24 + 2), then to the
        gradient's format if it is a Tensor of a narrower one."""
        data = gradient_array(g)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            new = (np.asarray(data, np.float64) / np.float64(np.float32(self.loss_scale)))
        new = new.astype(data.dtype if data.dtype.kind == "f" else np.float32)
        fmt = getattr(g, "fmt", None)
        if not isinstance(g, Tensor):
            return new
        if fmt is not None and _needs_rounding(fmt):
            new = fpsim.round(new, fmt)
        return Tensor(new, fmt=fmt)

    def apply_gradients(self, grads_and_vars: Iterable[tuple[Any, Any]]) -> int:  # type: ignore[override]
        """Apply the gradients of ``scale_loss``'s loss, unscaled here, unless one is inf or
        NaN (Keras 3's rules, in the class docstring); returns ``iterations`` (as Keras 3's
        ``apply_gradients``). Invalid input raises before anything changes; afterwards
        ``.grad`` of every variable given is None."""
        pairs = list(grads_and_vars)
        inner = self.inner_optimizer
        inner._prepare(pairs)  # validates (pairs, shapes, some gradient) before any change
        finite = _all_finite(gradient_array(g) for g, _ in pairs if g is not None)
        assert self._state is not None  # always dynamic
        if finite:
            unscaled = [(g if g is None or getattr(v, "overwrite_with_gradient", False)
                         else self._unscale(g), v) for g, v in pairs]  # Keras 3 keeps those
            inner._apply_prepared(inner._prepare(unscaled))
        else:
            self.skipped_steps += 1
        self._state.update(finite)
        self.last_step_skipped = not finite
        for pair in pairs:
            if hasattr(pair[1], "grad"):
                pair[1].grad = None
        return self.iterations

    def apply_scaled_gradients(self, grads_and_vars: Iterable[tuple[Any, Any]]) -> bool:
        self.apply_gradients(grads_and_vars)
        return not self.last_step_skipped

    def apply(self, grads: Iterable[Any], trainable_variables: Iterable[Any]) -> None:
        """Keras 3's ``apply(grads, trainable_variables)``: ``apply_gradients`` of the pairs."""
        self.apply_gradients(zip(grads, trainable_variables, strict=True))

    # ---- config ------------------------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        """Keras 3's keys: name, inner_optimizer (through nn's optimizer registry),
        initial_scale, dynamic_growth_steps."""
        return {"name": self.name, "inner_optimizer": OPTIMIZERS.serialize(self.inner_optimizer),
                "initial_scale": self.initial_scale,
                "dynamic_growth_steps": self.dynamic_growth_steps}

    @classmethod
    def _reads_config(cls, config: dict[str, Any]) -> bool:
        return "dynamic" not in config and "dynamic_growth_steps" in config

    @classmethod
    def from_config(cls, config: dict[str, Any], inner_optimizer: Optimizer | None = None
                    ) -> Keras3LossScaleOptimizer:
        inner = (OPTIMIZERS.deserialize(config["inner_optimizer"]) if inner_optimizer is None
                 else inner_optimizer)
        return cls(inner, initial_scale=config["initial_scale"],
                   dynamic_growth_steps=config["dynamic_growth_steps"],
                   name=config.get("name"))

    def __repr__(self) -> str:
        return (f"keras.optimizers.LossScaleOptimizer({self.inner_optimizer!r}, "
                f"dynamic_scale={self.loss_scale}, step_counter={self.step_counter})")
