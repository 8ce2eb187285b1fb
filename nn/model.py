"""``Model``: Keras's training API (compile, fit, evaluate, predict, summary, save) for nn layers.

``Model`` is a mixin over anything that is called on a batch and has ``weights`` and
``trainable_variables``; ``nn.Sequential`` is a ``Model`` (write a custom model as
``class Net(nn.Layer, nn.Model)``).

Numerics of one training step (``fit``):

- forward in each layer's compute format; the loss in fp32 (``nn.losses``);
- with loss scaling: backward from ``loss * S`` (S a float32 power of two); every gradient is
  rounded to its tensor's format at its monitor site, so an fp16 activation gradient below
  2**-24 / S flushes to zero there; the fp32 master-weight gradients are multiplied by
  ``float32(1 / S)`` and the ``LossScaleOptimizer`` skips the update (weights and slots
  bit-identical) and halves S on inf/NaN;
- without: backward from the loss itself and the optimizer's update of the variables.

Under a "mixed_float16" policy ``fit`` wraps the optimizer in ``nn.LossScaleOptimizer``
(initial scale 2**15, doubling after 2000 finite steps) as Keras does; ``loss_scale=``
overrides: None (the policy's default), ``"dynamic"``, a number (a fixed scale) or
``"none"``/0/False (no scaling).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import fpsim
from nn import losses as nn_losses
from nn import metrics as nn_metrics
from nn import optimizers as nn_optimizers
from nn.autograd import no_grad
from nn.history import History
from nn.loss_scale import LossScaleOptimizer
from nn.policy import format_name
from nn.tensor import Tensor

LossScaleArg = float | int | str | None


def iter_layers(model: Any) -> Iterator[Any]:
    """The leaf layers of ``model`` in call order (nested containers flattened)."""
    for layer in getattr(model, "layers", []):
        if getattr(layer, "layers", None) is not None:
            yield from iter_layers(layer)
        else:
            yield layer


def _is_mixed_float16(model: Any) -> bool:
    """True if any layer computes in fp16 on fp32 variables (Keras's "mixed_float16")."""
    layers = list(iter_layers(model)) or [model]
    for layer in layers:
        policy = getattr(layer, "policy", None)
        if policy is not None and policy.is_mixed and policy.compute_format == fpsim.FP16:
            return True
    return False


def _check_positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def _as_arrays(x: Any, y: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    xa = np.asarray(x.data if isinstance(x, Tensor) else x)
    ya = np.asarray(y.data if isinstance(y, Tensor) else y)
    if xa.ndim < 1 or ya.ndim < 1:
        raise ValueError(f"{what}: x and y must be batched arrays, got shapes {xa.shape} and "
                         f"{ya.shape}")
    if len(xa) != len(ya):
        raise ValueError(f"{what}: x and y must have the same number of samples, got "
                         f"{len(xa)} and {len(ya)}")
    if len(xa) == 0:
        raise ValueError(f"{what}: no samples (x has shape {xa.shape})")
    if xa.dtype.kind != "f":
        raise TypeError(f"{what}: x must be floating point, got dtype {xa.dtype}; convert it "
                        "first, e.g. x.astype('float32')")
    return xa, ya


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
        return {"inner": {"class_name": type(self.inner).__name__,
                          "config": self.inner.get_config()}, "weight": self.weight}


@contextlib.contextmanager
def _serial_numba(enabled: bool) -> Iterator[None]:
    """Run numba's parallel kernels on one thread inside the block.

    While a monitor counts, every rounding goes through fpsim's parallel counting kernels; on
    the small arrays of a training step (a few thousand values) starting the threads costs more
    than the work (measured on 2 cores: ~1.2 ms vs ~0.03 ms per 2,000-value call).
    """
    if not enabled:
        yield
        return
    import numba

    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(before)


class Model:
    """Training and inference for a callable model with ``weights``/``trainable_variables``.

    >>> model = nn.Sequential([nn.Dense(32, activation="relu"), nn.Dense(10)])
    >>> model.compile("adam", nn.losses.SparseCategoricalCrossentropy(from_logits=True),
    ...               metrics=["accuracy"])                        # doctest: +SKIP
    >>> history = model.fit(x, y, epochs=5, validation_split=0.1)  # doctest: +SKIP
    """

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
            key: Any = "dynamic" if _is_mixed_float16(self) else "none"
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
    def _forward(self, x: np.ndarray, training: bool, keep: bool) -> tuple[Tensor, list[Tensor]]:
        """The model's output and, if ``keep``, each leaf layer's output (for telemetry)."""
        if not keep or not getattr(self, "layers", None):
            return self(x, training=training), []
        outs = []
        h: Any = x
        for layer in self.layers:
            h = layer(h, training=training)
            outs.append(h)
        self.built = True
        return h, outs

    # --- fit --------------------------------------------------------------------------------------
    def fit(self, x: Any, y: Any, batch_size: int = 32, epochs: int = 1,
            validation_split: float = 0.0, validation_data: tuple[Any, Any] | None = None,
            shuffle: bool = True, seed: int | None = None, verbose: int = 1,
            loss_scale: LossScaleArg = None, telemetry: bool = True) -> History:
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
        """
        self._require_compiled("fit()")
        x, y = _as_arrays(x, y, "fit")
        batch_size = _check_positive_int("batch_size", batch_size)
        epochs = _check_positive_int("epochs", epochs)
        if not (isinstance(validation_split, (int, float)) and 0 <= validation_split < 1):
            raise ValueError(f"validation_split must be a number in [0, 1), got "
                             f"{validation_split!r}")
        if validation_data is not None:
            if not (isinstance(validation_data, (tuple, list)) and len(validation_data) == 2):
                raise ValueError("validation_data must be a pair (x_val, y_val)")
            x_val, y_val = _as_arrays(*validation_data, "fit(validation_data)")
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
            with _serial_numba(telemetry):
                logs = self._train_epoch(x, y, batch_size, epoch, epochs, shuffle, seed,
                                         verbose, scaler, history, monitor)
            if monitor is not None:  # the sites exist once the first step has built the layers
                history.record_events(monitor.counts, self._telemetry_sites())
            history.swamped_updates.append(inner.swamped_updates - swamped_before)
            if x_val is not None:
                val = self.evaluate(x_val, y_val, batch_size=batch_size, return_dict=True)
                logs.update({f"val_{k}": v for k, v in val.items()})
            history.record_epoch(epoch, logs)
            self._epochs_trained = epoch + 1
            if verbose == 2:
                print(f"epoch {epoch + 1}: " + ", ".join(f"{k}={v:.4g}" for k, v in logs.items()))
        history.wall_time = time.perf_counter() - start
        return history

    def _telemetry_sites(self) -> dict[str, dict[str, list[str]]]:
        """Monitor site names of each leaf layer's activation and weight gradients."""
        sites: dict[str, dict[str, list[str]]] = {}
        for layer in iter_layers(self) if getattr(self, "layers", None) else [self]:
            weight_sites = []
            for var in getattr(layer, "trainable_variables", []):
                if var.name:
                    weight_sites.append(var.name.replace("/", "/grad_", 1))  # read through Cast
                    weight_sites.append(f"{var.name}/grad")                  # the variable itself
            sites[layer.name] = {"activation": [f"{layer.name}/grad_activation"],
                                 "weight": weight_sites}
        return sites

    def _train_epoch(self, x: np.ndarray, y: np.ndarray, batch_size: int, epoch: int,
                     epochs: int, shuffle: bool, seed: int | None, verbose: int,
                     scaler: LossScaleOptimizer | None, history: History,
                     monitor: Any) -> dict[str, float]:
        n = len(x)
        if shuffle:
            rng = np.random.default_rng(None if seed is None else [int(seed), epoch])
            order = rng.permutation(n)
        else:
            order = None
        for m in self.metrics:
            m.reset_state()
        variables = self.trainable_variables
        if not variables and self.weights:
            raise ValueError("the model has no trainable variables")
        total_loss = 0.0
        steps = math.ceil(n / batch_size)
        bar = None
        if verbose == 1:
            from tqdm.auto import tqdm

            bar = tqdm(total=steps, desc=f"epoch {epoch + 1}", unit="step", leave=True,
                       dynamic_ncols=True)
        try:
            for i in range(steps):
                idx = slice(i * batch_size, (i + 1) * batch_size)
                if order is not None:
                    idx = order[idx]
                xb, yb = x[idx], y[idx]
                loss_value, skipped, scale = self._train_step(xb, yb, scaler, history, monitor)
                total_loss += loss_value * len(xb)
                history.record_step(loss_value, scale, skipped)
                if bar is not None:
                    post = {"loss": f"{total_loss / min(n, (i + 1) * batch_size):.4f}"}
                    post.update({m.name: f"{m.result():.4f}" for m in self.metrics})
                    if scaler is not None:
                        post["scale"] = f"{scaler.loss_scale:g}"
                    bar.set_postfix(post, refresh=False)
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        logs = {"loss": total_loss / n}
        logs.update({m.name: m.result() for m in self.metrics})
        return logs

    def _train_step(self, xb: np.ndarray, yb: np.ndarray, scaler: LossScaleOptimizer | None,
                    history: History, monitor: Any) -> tuple[float, bool, float]:
        """One step; returns (unscaled loss, skipped?, the loss scale the step used).

        ``monitor`` (or None) counts the roundings of the backward pass only: the gradients.
        """
        telemetry = monitor is not None
        pred, outs = self._forward(xb, training=True, keep=telemetry)
        loss = self.loss(yb, pred)
        for m in self.metrics:
            m.update_state(yb, pred.data)
        variables = self.trainable_variables
        for v in variables:
            v.zero_grad()
        # a scaled backward may overflow to inf (then inf - inf = NaN in sums): IEEE results the
        # loss scaler is there to catch, not warnings
        scale, skipped = 1.0, False
        root = loss if scaler is None else scaler.get_scaled_loss(loss)
        if scaler is not None:
            scale = scaler.loss_scale
        if monitor is not None:
            monitor.start()
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                root.backward()
        finally:
            if monitor is not None:
                monitor.stop()
        grads = [v.grad for v in variables]
        if telemetry:  # one histogram call per kind and step
            acts = [t.grad.data.ravel() for t in outs if t.grad is not None]
            if acts:
                history.record_gradients("activation", np.concatenate(acts))
            weights = [g.data.ravel() for g in grads if g is not None]
            if weights:
                history.record_gradients("weight", np.concatenate(weights))
        if scaler is None:
            self.optimizer.apply_gradients(
                [(g, v) for g, v in zip(grads, variables, strict=True) if g is not None])
        else:
            # fp32 gradients go in as arrays (no Tensor round trip); others keep their format
            # so that the unscaled values are rounded back into it
            unscaled = scaler.get_unscaled_gradients(
                [g.data if g is not None and g.fmt == fpsim.FP32 else g for g in grads])
            scaler.apply_gradients(
                [(g, v) for g, v in zip(unscaled, variables, strict=True) if g is not None])
            skipped = scaler.last_step_skipped
        for v in variables:
            v.zero_grad()
        return float(loss.item()), skipped, scale

    # --- evaluate and predict ---------------------------------------------------------------
    def predict(self, x: Any, batch_size: int = 32, verbose: int = 0) -> np.ndarray:
        """The model's outputs (in their float32 carrier) for every row of ``x``, batch by batch,
        without recording a graph (inference mode: Dropout off)."""
        xa = np.asarray(x.data if isinstance(x, Tensor) else x)
        if xa.ndim < 1 or len(xa) == 0:
            raise ValueError(f"predict: x must be a non-empty batch, got shape {xa.shape}")
        batch_size = _check_positive_int("batch_size", batch_size)
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
        x, y = _as_arrays(x, y, "evaluate")
        batch_size = _check_positive_int("batch_size", batch_size)
        metrics = [type(m)(name=m.name) for m in self.metrics]
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
    def summary(self, print_fn: Callable[[str], Any] | None = print) -> str:
        """A table of the layers: name and type, output shape, parameters, compute and variable
        formats; printed with ``print_fn`` (None: only returned)."""
        layers = list(iter_layers(self)) if getattr(self, "layers", None) else [self]
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
        if print_fn is not None:
            print_fn(text)
        return text

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
