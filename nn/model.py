"""``Model``: Keras's training API (compile, fit, evaluate, predict, summary, save) for nn layers.

``Model`` is a mixin over anything that is called on a batch and has ``weights`` and
``trainable_variables``; ``nn.Sequential`` is a ``Model`` (write a custom model as
``class Net(nn.Layer, nn.Model)``).

The loop itself and its numerics are in ``nn.training``.

Under a "mixed_float16" policy ``fit`` wraps the optimizer in ``nn.LossScaleOptimizer``
(initial scale 2**15, doubling after 2000 finite steps) as Keras does; ``loss_scale=``
overrides: None (the policy's default), ``"dynamic"``, a number (a fixed scale) or
``"none"``/0/False (no scaling).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

import fpsim
from nn import losses as nn_losses
from nn import metrics as nn_metrics
from nn import optimizers as nn_optimizers
from nn.autograd import no_grad
from nn.checks import count
from nn.history import History
from nn.loss_scale import LossScaleOptimizer
from nn.policy import format_name
from nn.registry import LOSSES
from nn.tensor import Tensor, Variable
from nn.training import (
    as_arrays,
    is_mixed_float16,
    iter_layers,
    serial_numba,
    telemetry_sites,
    train_epoch,
)

LossScaleArg = float | int | str | None


@LOSSES.register
class WeightedLoss(nn_losses.Loss):
    """``weight * loss(y_true, y_pred)`` in fp32, as Keras's ``compile(loss_weights=...)``.

    A power-of-two weight is exact (barring fp32 underflow): it only moves the gradients along
    the exponent scale, which is what loss scaling and fp16's range are about.
    """

    def __init__(self, loss: nn_losses.Loss, weight: float) -> None:
        if not isinstance(loss, nn_losses.Loss):
            raise TypeError(f"WeightedLoss wraps an nn.losses.Loss, got {type(loss).__name__}")
        if not (isinstance(weight, (int, float)) and math.isfinite(weight) and weight > 0):
            raise ValueError(f"a loss weight must be a finite number > 0, got {weight!r}")
        self.inner = loss
        self.weight = float(weight)
        self.name = loss.name

    def call(self, y_true: Any, y_pred: Any) -> Tensor:
        return self.inner.call(y_true, y_pred) * self.weight

    def get_config(self) -> dict[str, Any]:
        return {"inner": LOSSES.serialize(self.inner), "weight": self.weight}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> WeightedLoss:
        return cls(LOSSES.deserialize(config["inner"]), config["weight"])


class Model:
    """Training and inference for a callable model with ``weights``/``trainable_variables``.

    >>> model = nn.Sequential([nn.Dense(32, activation="relu"), nn.Dense(10)])
    >>> model.compile("adam", nn.losses.SparseCategoricalCrossentropy(from_logits=True),
    ...               metrics=["accuracy"])                        # doctest: +SKIP
    >>> history = model.fit(x, y, epochs=5, validation_split=0.1)  # doctest: +SKIP
    """

    if TYPE_CHECKING:  # what a Model is mixed into provides these (e.g. nn.Layer)
        name: str
        built: bool

        @property
        def weights(self) -> list[Variable]: ...

        @property
        def trainable_variables(self) -> list[Variable]: ...

        def __call__(self, x: Any, training: bool = False) -> Tensor: ...

    # --- compile ------------------------------------------------------------------------------
    def compile(self, optimizer: Any = "rmsprop", loss: Any = None,
                metrics: list[Any] | tuple[Any, ...] | None = None) -> Model:
        """Set the optimizer ("sgd", "rmsprop", "adam" or an instance, possibly a
        LossScaleOptimizer), the loss (a name such as "sparse_categorical_crossentropy", a
        ``nn.losses.Loss`` or a callable ``(y_true, y_pred) -> Tensor``) and the metrics
        (e.g. ``["accuracy"]``). Returns the model, so calls chain."""
        if loss is None:
            raise ValueError("compile() needs a loss, e.g. loss='sparse_categorical_crossentropy'")
        if isinstance(optimizer, LossScaleOptimizer):
            self.optimizer: Any = optimizer
        else:
            self.optimizer = nn_optimizers.get(optimizer)
        self.loss = nn_losses.get(loss)
        if isinstance(metrics, (str, nn_metrics.Accuracy)):
            metrics = [metrics]
        self.metrics = [nn_metrics.get(m) for m in (metrics or [])]
        self._scaler: LossScaleOptimizer | None = None
        self._scaler_key: Any = None
        return self

    def _require_compiled(self, what: str) -> None:
        if getattr(self, "loss", None) is None:
            raise RuntimeError(f"{what} needs a compiled model: call model.compile(optimizer, "
                               "loss, metrics) first")

    @property
    def epochs_trained(self) -> int:
        """Epochs run by ``fit`` so far (the index the next epoch's shuffle seed uses)."""
        return getattr(self, "_epochs_trained", 0)

    @property
    def inner_optimizer(self) -> nn_optimizers.Optimizer:
        """The optimizer that updates the variables (unwrapped from any loss scaling)."""
        self._require_compiled("inner_optimizer")
        opt = self.optimizer
        return opt.inner_optimizer if isinstance(opt, LossScaleOptimizer) else opt

    # --- loss scaling -----------------------------------------------------------------------
    def _resolve_scaler(self, loss_scale: LossScaleArg) -> LossScaleOptimizer | None:
        """The LossScaleOptimizer ``fit`` steps through, or None (see the module docstring).

        The same setting in a later ``fit`` call keeps the same scaler (its scale and counter
        carry on), so training can continue across calls and checkpoints.
        """
        if isinstance(self.optimizer, LossScaleOptimizer):
            if loss_scale is not None:
                raise ValueError("the compiled optimizer is already a LossScaleOptimizer; "
                                 "leave fit(loss_scale=None) or compile a plain optimizer")
            return self.optimizer
        if loss_scale is None:
            key: Any = "dynamic" if is_mixed_float16(self) else "none"
        elif isinstance(loss_scale, str):
            key = loss_scale.strip().lower()
            if key not in ("dynamic", "none"):
                raise ValueError(f"loss_scale must be None, 'dynamic', 'none' or a positive "
                                 f"number, got {loss_scale!r}")
        elif isinstance(loss_scale, (int, float, np.integer, np.floating)):
            value = float(loss_scale)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"a fixed loss_scale must be a finite number >= 0 (0: no "
                                 f"scaling), got {loss_scale!r}")
            key = "none" if value == 0 else value
        else:
            raise TypeError(f"loss_scale must be None, a string or a number, got "
                            f"{type(loss_scale).__name__}")
        if key == "none":
            return None
        if self._scaler is None or self._scaler_key != key:
            if key == "dynamic":
                self._scaler = LossScaleOptimizer(self.optimizer)
            else:
                self._scaler = LossScaleOptimizer(self.optimizer, initial_scale=key,
                                                  dynamic=False)
            self._scaler_key = key
        return self._scaler

    @property
    def loss_scale_optimizer(self) -> LossScaleOptimizer | None:
        """The LossScaleOptimizer the last ``fit`` used, or None."""
        if isinstance(getattr(self, "optimizer", None), LossScaleOptimizer):
            return self.optimizer
        return getattr(self, "_scaler", None)

    # --- forward --------------------------------------------------------------------------------
    # --- fit --------------------------------------------------------------------------------------
    def fit(self, x: Any, y: Any, batch_size: int = 32, epochs: int = 1,
            validation_split: float = 0.0, validation_data: tuple[Any, Any] | None = None,
            shuffle: bool = True, seed: int | None = None, verbose: int = 1,
            loss_scale: LossScaleArg = None, telemetry: bool = True,
            allow_nonfinite: bool = False) -> History:
        """Train for ``epochs`` more epochs; returns a ``History`` (also ``model.history``).

        - ``validation_split``: the last fraction of (x, y), taken before shuffling (Keras);
          ``validation_data=(x_val, y_val)`` takes precedence.
        - Shuffling: epoch k (counted over every ``fit`` call and checkpoint, see
          ``epochs_trained``) uses the permutation of ``numpy.random.default_rng([seed, k])``,
          so a run resumed from a checkpoint with the same seed continues bit-identically.
          ``seed=None`` draws fresh randomness.
        - ``loss_scale``: see the module docstring.
        - ``telemetry``: count gradient underflow/subnormal/overflow per layer with
          ``fpsim.monitor`` during each backward pass and histogram the gradients' exponents
          (costs time: every rounding of the backward pass then goes through fpsim's counting
          kernels).
        - ``verbose``: 0 silent, 1 a tqdm bar per epoch (loss, metrics, loss scale), 2 a line
          per epoch.
        - ``allow_nonfinite``: by default a NaN or inf in x, y or the validation data raises
          ValueError naming the array and the first bad index (one would turn every weight
          NaN); True lets it through, for demonstrations of what it does.
        """
        self._require_compiled("fit()")
        if not isinstance(allow_nonfinite, (bool, np.bool_)):
            raise TypeError(f"allow_nonfinite must be True or False, got {allow_nonfinite!r}")
        finite = not allow_nonfinite
        x, y = as_arrays(x, y, "fit", finite=finite)
        batch_size = count("batch_size", batch_size, minimum=1)
        epochs = count("epochs", epochs, minimum=1)
        if not (isinstance(validation_split, (int, float)) and 0 <= validation_split < 1):
            raise ValueError(f"validation_split must be a number in [0, 1), got "
                             f"{validation_split!r}")
        x_val: np.ndarray | None
        y_val: np.ndarray | None
        if validation_data is not None:
            if not (isinstance(validation_data, (tuple, list)) and len(validation_data) == 2):
                raise ValueError("validation_data must be a pair (x_val, y_val)")
            x_val, y_val = as_arrays(*validation_data, "fit(validation_data)", finite=finite)
        elif validation_split > 0:
            n_val = int(len(x) * validation_split)
            if n_val == 0 or n_val == len(x):
                raise ValueError(f"validation_split={validation_split} leaves "
                                 f"{len(x) - n_val} training and {n_val} validation samples")
            x, y, x_val, y_val = x[:-n_val], y[:-n_val], x[-n_val:], y[-n_val:]
        else:
            x_val = y_val = None

        scaler = self._resolve_scaler(loss_scale)
        inner = self.inner_optimizer
        history = History()
        history.params = {"batch_size": batch_size, "epochs": epochs, "samples": len(x),
                          "steps": math.ceil(len(x) / batch_size),
                          "loss_scale": None if scaler is None else
                          ("dynamic" if scaler.dynamic else scaler.loss_scale)}
        self.history = history
        start = time.perf_counter()
        for _ in range(epochs):
            epoch = self.epochs_trained
            monitor = fpsim.monitor() if telemetry else None
            swamped_before = inner.swamped_updates
            with serial_numba(telemetry):
                logs = train_epoch(self, x, y, batch_size, epoch, epochs, shuffle, seed,
                                         verbose, scaler, history, monitor)
            if monitor is not None:  # the sites exist once the first step has built the layers
                history.record_events(monitor.counts, telemetry_sites(self))
            history.swamped_updates.append(inner.swamped_updates - swamped_before)
            if x_val is not None:
                val = self.evaluate(x_val, y_val, batch_size=batch_size, return_dict=True)
                assert isinstance(val, dict)
                logs.update({f"val_{k}": v for k, v in val.items()})
            history.record_epoch(epoch, logs)
            self._epochs_trained = epoch + 1
            if verbose == 2:
                print(f"epoch {epoch + 1}: " + ", ".join(f"{k}={v:.4g}" for k, v in logs.items()))
        history.wall_time = time.perf_counter() - start
        return history

    # --- evaluate and predict ---------------------------------------------------------------
    def predict(self, x: Any, batch_size: int = 32, verbose: int = 0) -> np.ndarray:
        """The model's outputs (in their float32 carrier) for every row of ``x``, batch by batch,
        without recording a graph (inference mode: Dropout off)."""
        xa = np.asarray(x.data if isinstance(x, Tensor) else x)
        if xa.ndim < 1 or len(xa) == 0:
            raise ValueError(f"predict: x must be a non-empty batch, got shape {xa.shape}")
        batch_size = count("batch_size", batch_size, minimum=1)
        outs = []
        with no_grad():
            for i in range(0, len(xa), batch_size):
                outs.append(self(xa[i:i + batch_size], training=False).data.copy())
        return np.concatenate(outs, axis=0)

    def evaluate(self, x: Any, y: Any, batch_size: int = 32, verbose: int = 0,
                 return_dict: bool = False) -> float | list[float] | dict[str, float]:
        """The loss (sample-weighted mean over batches) and metrics on (x, y), as Keras:
        a float without metrics, else ``[loss, metric, ...]``, or a dict with
        ``return_dict=True``."""
        self._require_compiled("evaluate()")
        x, y = as_arrays(x, y, "evaluate")
        batch_size = count("batch_size", batch_size, minimum=1)
        metrics = [type(m).from_config(m.get_config()) for m in self.metrics]
        total = 0.0
        with no_grad():
            for i in range(0, len(x), batch_size):
                xb, yb = x[i:i + batch_size], y[i:i + batch_size]
                pred = self(xb, training=False)
                total += float(self.loss(yb, pred).item()) * len(xb)
                for m in metrics:
                    m.update_state(yb, pred.data)
        result = {"loss": total / len(x)}
        result.update({m.name: m.result() for m in metrics})
        if return_dict:
            return result
        return result["loss"] if not metrics else list(result.values())

    # --- description ------------------------------------------------------------------------
    def summary(self, print_fn: Callable[[str], Any] | None = print) -> str | None:
        """A table of the layers: name and type, output shape, parameters, compute and variable
        formats. Printed with ``print_fn`` (returning None, as Keras does); with
        ``print_fn=None`` the text is returned instead."""
        layers: list[Any] = list(iter_layers(self)) if getattr(self, "layers", None) else [self]
        shapes = self._output_shapes(layers)
        rows = [("layer (type)", "output shape", "params", "compute", "variables")]
        total = 0
        for layer, shape in zip(layers, shapes, strict=True):
            params = sum(v.size for v in layer.weights)
            total += params
            policy = layer.policy
            rows.append((f"{layer.name} ({type(layer).__name__})", shape, f"{params:,}",
                         format_name(policy.compute_format), format_name(policy.variable_format)))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        lines = [f'Model "{getattr(self, "name", type(self).__name__)}"']
        for k, r in enumerate(rows):
            lines.append("  ".join(c.ljust(w) if i in (0, 1) else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(r, widths, strict=True))))
            if k == 0:
                lines.append("-" * len(lines[-1]))
        trainable = sum(v.size for v in self.trainable_variables)
        lines.append(f"total params: {total:,} (trainable: {trainable:,})")
        text = "\n".join(lines)
        if print_fn is None:
            return text
        print_fn(text)
        return None

    def _output_shapes(self, layers: list[Any]) -> list[str]:
        """Output shapes as "(None, d)" from a one-sample forward, or "?" before building."""
        first = layers[0] if layers else None
        input_dim = getattr(first, "input_dim", None)
        if not getattr(first, "built", False) or input_dim is None:
            return ["?" if not getattr(layer, "units", None) else f"(None, {layer.units})"
                    for layer in layers]
        shapes = []
        with no_grad():
            h: Any = np.zeros((1, input_dim), np.float32)
            for layer in layers:
                h = layer(h)
                shapes.append(str((None, *h.shape[1:])))
        return shapes

    # --- checkpoints ------------------------------------------------------------------------
    def save(self, path: Any) -> None:
        """Write one .npz checkpoint (weights, optimizer slots, loss-scale state and a JSON
        config); ``nn.load_model(path)`` restores it. See ``nn.checkpoint``."""
        from nn.checkpoint import save_model

        save_model(self, path)
