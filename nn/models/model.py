"""``Model``: Keras's training API (compile, fit, evaluate, predict, summary, save) for nn layers.

``Model`` is a ``Layer`` (as in Keras), so ``nn.Sequential`` is one and a custom model is a
subclass: Keras's way, ``class Net(nn.Model)`` with its layers as attributes in ``__init__``
and ``call(x, training=False)``; PyTorch's way, the same with ``forward(x)``. The layers it
holds are found by the layer tree (``nn.layers.module``); ``class Net(nn.Layer, nn.Model)``
means the same. ``nn.Model(inputs=..., outputs=...)`` makes a functional model
(``nn.layers.functional.Functional``), as ``keras.Model`` does.

The loop itself and its numerics are in ``nn.training.loop``; the progress lines in
``nn.training.progress``.

Loss scaling, as Keras: ``compile`` under a "mixed_float16" policy wraps the optimizer in a
dynamic ``nn.LossScaleOptimizer`` (Keras 3's rules, ``nn.precision.loss_scale_keras3``, when
the layers hold the Keras 3 face's policies) with Keras's defaults
(``nn.precision.loss_scale.KERAS_INITIAL_SCALE`` and ``KERAS_GROWTH_STEPS``), so
``model.optimizer`` is the LossScaleOptimizer and ``model.optimizer.inner_optimizer`` the one
given; under other policies ``model.optimizer`` is the optimizer given. A LossScaleOptimizer
passed to ``compile`` is used as it is. ``fit(loss_scale=...)`` changes the scaling for that
call and the later ones (``model.optimizer`` shows the result): ``"dynamic"``, a number (a
fixed scale, ``nn.engine.checks.loss_scale``'s rule) or ``"none"`` (no scaling); None keeps what
``compile`` set up.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import fpsim
from nn import losses as nn_losses
from nn import metrics as nn_metrics
from nn import optimizers as nn_optimizers
from nn.engine import checks
from nn.engine.autograd import no_grad
from nn.engine.checks import count
from nn.engine.registry import LOSSES
from nn.engine.tensor import Tensor
from nn.fp8.scope import epoch_telemetry as fp8_epoch_telemetry
from nn.layers.base import Layer
from nn.models.summary import summary_text
from nn.precision.loss_scale import LossScaleOptimizer
from nn.precision.loss_scale_keras3 import Keras3LossScaleOptimizer
from nn.saving.checkpoint import save_model
from nn.training.history import History
from nn.training.loop import (
    DEFAULT_BATCH_SIZE,
    Batches,
    batch_source,
    is_mixed_float16,
    serial_numba,
    shuffle_seed,
    takes_integer_ids,
    telemetry_sites,
    train_epoch,
    train_note,
)
from nn.training.progress import Progbar, check_verbose

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


def _automatic_scaler(model: Any) -> type[LossScaleOptimizer]:
    """The loss-scale optimizer ``compile`` wraps in: Keras 3's when a layer holds a Keras 3
    face policy (its ``loss_scale_rules`` is "keras3": ``nn.faces.keras``), else tf.keras's."""
    rules = {getattr(layer.policy, "loss_scale_rules", "tf.keras") for layer in model.modules()
             if hasattr(layer, "policy")}
    return Keras3LossScaleOptimizer if "keras3" in rules else LossScaleOptimizer


def check_build_shape(model: Any, input_shape: Any) -> tuple[int | None, ...]:
    """``input_shape`` (batch first, which may be None) as a tuple, else a ValueError naming
    the model and showing the spelling."""
    if not (isinstance(input_shape, (tuple, list)) and len(input_shape) >= 2 and all(
            d is None or (isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d > 0)
            for d in input_shape)):
        raise ValueError(f"build() of model '{model.name}' needs the input shape with the batch "
                         f"axis first, e.g. model.build((None, 784)); got {input_shape!r}")
    return tuple(None if d is None else int(d) for d in input_shape)


class Model(Layer):
    """A layer with Keras's training API: compile, fit, evaluate, predict, summary, save.

    >>> model = nn.Sequential([nn.Dense(32, activation="relu"), nn.Dense(10)])
    >>> model.compile("adam", nn.losses.SparseCategoricalCrossentropy(from_logits=True),
    ...               metrics=["accuracy"])                        # doctest: +SKIP
    >>> history = model.fit(x, y, epochs=5, validation_split=0.1)  # doctest: +SKIP
    """

    functional: type[Model] | None = None
    """What ``nn.Model(inputs=..., outputs=...)`` makes: ``nn.layers.functional.Functional``,
    which registers itself here (it is a Model: this module cannot import it)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Model:
        """``nn.Model(inputs=..., outputs=..., name=...)`` is a functional model (Keras)."""
        if cls is Model and (args or kwargs) and Model.functional is not None:
            return object.__new__(Model.functional)  # Python then runs its __init__
        return object.__new__(cls)

    # --- building ---------------------------------------------------------------------------
    @property
    def is_built(self) -> bool:
        """True once every layer has its weights."""
        return bool(getattr(self, "built", False))

    def require_built(self, what: str) -> None:
        """Raise a ValueError, saying how to build it, if the model has no weights yet."""
        if not self.is_built:
            raise ValueError(
                f"{what}: model '{self.name}' is not built yet, so it has no weights. Build it "
                "by calling it on a batch (model(x), or fit), with model.build(input_shape), "
                "e.g. model.build((None, 784)), or make it from nn.Input: "
                "nn.Model(inputs=nn.Input(shape=(784,)), outputs=...)")

    # --- compile ------------------------------------------------------------------------------
    def compile(self, optimizer: Any = "rmsprop", loss: Any = None,
                metrics: list[Any] | tuple[Any, ...] | None = None, *,
                auto_scale_loss: bool = True) -> Model:
        """Set the optimizer ("sgd", "rmsprop", "adam" or an instance, possibly a
        LossScaleOptimizer), the loss (a name such as "sparse_categorical_crossentropy", a
        ``nn.losses.Loss`` or a callable ``(y_true, y_pred) -> Tensor``) and the metrics
        (e.g. ``["accuracy"]``). Returns the model, so calls chain.

        Under "mixed_float16" the optimizer is wrapped in a dynamic LossScaleOptimizer (see
        the module docstring), unless ``auto_scale_loss=False`` (Keras 3's argument, default
        True: then ``fit`` does not scale the loss). Compiling also restarts the shuffling
        stream: ``fit`` after ``compile`` shuffles as the first ``fit`` after the previous
        ``compile`` did.
        """
        if loss is None:
            raise ValueError("compile() needs a loss, e.g. loss='sparse_categorical_crossentropy'")
        if not isinstance(auto_scale_loss, (bool, np.bool_)):
            raise TypeError(f"compile: auto_scale_loss must be True or False, got "
                            f"{auto_scale_loss!r}")
        self._loss_scale_key: Any
        if isinstance(optimizer, LossScaleOptimizer):
            self.optimizer: Any = optimizer
            self._loss_scale_key = "compiled"
        elif auto_scale_loss and is_mixed_float16(self):
            self.optimizer = _automatic_scaler(self)(nn_optimizers.get(optimizer))
            self._loss_scale_key = "dynamic"
        else:
            self.optimizer = nn_optimizers.get(optimizer)
            self._loss_scale_key = "none"
        self.loss = nn_losses.get(loss)
        if isinstance(metrics, (str, nn_metrics.Metric)):
            metrics = [metrics]
        self.metrics = [nn_metrics.get(m) for m in (metrics or [])]
        self._epochs_trained = 0
        return self

    def _require_compiled(self, what: str) -> None:
        if getattr(self, "loss", None) is None:
            raise RuntimeError(f"{what} needs a compiled model: call model.compile(optimizer, "
                               "loss, metrics) first")

    @property
    def epochs_trained(self) -> int:
        """Epochs run by ``fit`` since ``compile`` (the position in the shuffling stream; it
        is saved in checkpoints, so a resumed run shuffles on as the straight run did)."""
        return getattr(self, "_epochs_trained", 0)

    @epochs_trained.setter
    def epochs_trained(self, value: int) -> None:
        self._epochs_trained = count("epochs_trained", value)

    @property
    def inner_optimizer(self) -> nn_optimizers.Optimizer:
        """The optimizer that updates the variables (``model.optimizer`` unwrapped)."""
        self._require_compiled("inner_optimizer")
        opt = self.optimizer
        return opt.inner_optimizer if isinstance(opt, LossScaleOptimizer) else opt

    # --- loss scaling -----------------------------------------------------------------------
    def _resolve_scaler(self, loss_scale: LossScaleArg) -> LossScaleOptimizer | None:
        """The LossScaleOptimizer ``fit`` steps through, or None (see the module docstring).

        The same setting in a later ``fit`` call keeps the same scaler (its scale and counter
        carry on), so training can continue across calls and checkpoints.
        """
        if loss_scale is None:
            return self.loss_scale_optimizer
        if self._loss_scale_key == "compiled":
            raise ValueError("the compiled optimizer is already a LossScaleOptimizer; "
                             "leave fit(loss_scale=None) or compile a plain optimizer")
        key: Any
        if isinstance(loss_scale, str):
            key = loss_scale.strip().lower()
            if key not in ("dynamic", "none"):
                raise ValueError(f"loss_scale must be None, 'dynamic', 'none' or a positive "
                                 f"number, got {loss_scale!r}")
        elif isinstance(loss_scale, (int, float, np.integer, np.floating)) \
                and not isinstance(loss_scale, bool):
            key = checks.loss_scale("loss_scale", loss_scale)
        else:
            raise TypeError(f"loss_scale must be None, a string or a number, got "
                            f"{type(loss_scale).__name__}")
        if key != self._loss_scale_key:
            inner = self.inner_optimizer
            if key == "none":
                self.optimizer = inner
            elif key == "dynamic":
                self.optimizer = LossScaleOptimizer(inner)
            else:
                self.optimizer = LossScaleOptimizer(inner, initial_scale=key, dynamic=False)
            self._loss_scale_key = key
        return self.loss_scale_optimizer

    @property
    def loss_scale_setting(self) -> str | float:
        """How training is loss-scaled: ``"compiled"`` (a LossScaleOptimizer given to
        ``compile``), ``"dynamic"``, a fixed scale, or ``"none"``."""
        self._require_compiled("loss_scale_setting")
        setting: str | float = self._loss_scale_key
        return setting

    def use_loss_scaler(self, scaler: LossScaleOptimizer | None, setting: str | float) -> None:
        """Train through ``scaler`` (None: no scaling) under ``setting`` (what
        ``loss_scale_setting`` returned when it was saved): a checkpoint's restore."""
        self._require_compiled("use_loss_scaler")
        if scaler is None:
            if setting != "none":
                raise ValueError(f"without a scaler the setting must be 'none', got {setting!r}")
            self.optimizer, self._loss_scale_key = self.inner_optimizer, "none"
            return
        if not (setting in ("compiled", "dynamic") or (isinstance(setting, (int, float))
                                                       and not isinstance(setting, bool))):
            raise ValueError(f"a loss-scale setting is 'compiled', 'dynamic' or a fixed scale, "
                             f"got {setting!r}")
        if isinstance(setting, (int, float)):
            checks.loss_scale("loss_scale", setting)
        self.optimizer, self._loss_scale_key = scaler, setting

    @property
    def loss_scale_optimizer(self) -> LossScaleOptimizer | None:
        """``model.optimizer`` if it is a LossScaleOptimizer (training is loss-scaled), else
        None."""
        opt = getattr(self, "optimizer", None)
        return opt if isinstance(opt, LossScaleOptimizer) else None

    # --- fit --------------------------------------------------------------------------------------
    def fit(self, x: Any = None, y: Any = None, batch_size: int | None = None, epochs: int = 1,
            verbose: int | str = "auto", callbacks: Any = None, validation_split: float = 0.0,
            validation_data: Any = None, shuffle: bool = True, initial_epoch: int = 0, *,
            seed: int | None = None, loss_scale: LossScaleArg = None, telemetry: bool = True,
            allow_nonfinite: bool = False) -> History:
        """Train epochs ``initial_epoch + 1`` to ``epochs`` (Keras's numbering: ``epochs`` is
        the index to stop at; ``fit(epochs=5, initial_epoch=2)`` runs 3 epochs, printed as
        ``Epoch 3/5`` to ``Epoch 5/5``). Returns a ``History`` (also ``model.history``).

        - ``x``, ``y``: arrays (``batch_size`` defaults to 32), or ``x`` a re-iterable dataset
          of ``(x, y)`` batches (e.g. ``nn.datasets.Dataset``) with ``y=None`` and no
          ``batch_size``: each epoch iterates it again. An epoch with no batch raises.
        - ``validation_split``: the last fraction of (x, y), taken before shuffling (Keras);
          ``validation_data=(x_val, y_val)`` (or a dataset) takes precedence.
        - Shuffling (arrays): the n-th epoch since ``compile`` (``epochs_trained``) uses the
          permutation of ``numpy.random.default_rng([seed, n])``; ``seed=None`` takes the seed
          of ``nn.set_random_seed``. So after ``set_weights(initial)`` and ``compile``, a
          second ``fit`` repeats the first bit for bit (unless a layer draws random numbers
          of its own, e.g. Dropout's masks, which continue their stream), and a run resumed
          from a checkpoint continues as the straight run. A dataset shuffles itself, on its
          own stream: build it again to repeat a run.
        - ``verbose``: 0 silent; 1 (``"auto"``) ``Epoch k/N`` and a progress bar with the
          time per step and the metrics; 2 ``Epoch k/N`` and one line when the epoch ends
          (stdout, as Keras; the bar adds ``loss_scale`` when training is loss-scaled).
        - ``loss_scale``: see the module docstring.
        - ``telemetry``: count gradient underflow/subnormal/overflow per layer with
          ``fpsim.monitor`` during each backward pass and histogram the gradients' exponents
          (costs time: every rounding of the backward pass then goes through fpsim's counting
          kernels).
        - ``allow_nonfinite``: by default a NaN or inf in x, y or the validation data raises
          ValueError naming the array and the first bad index (one would turn every weight
          NaN); True lets it through, for demonstrations of what it does.
        """
        self._require_compiled("fit()")
        if len(getattr(self, "inputs", [x])) != 1 or len(getattr(self, "outputs", [y])) != 1:
            raise NotImplementedError("fit() of a model with several inputs or outputs is not "
                                      "supported yet; call it, or predict(), on a list")
        if callbacks:
            raise NotImplementedError("fit(callbacks=...) is not supported; read "
                                      "model.history (a History) after fit instead")
        if not isinstance(allow_nonfinite, (bool, np.bool_)):
            raise TypeError(f"allow_nonfinite must be True or False, got {allow_nonfinite!r}")
        verbose = check_verbose(verbose)
        epochs = count("epochs", epochs, minimum=1)
        initial_epoch = count("initial_epoch", initial_epoch)
        finite = not allow_nonfinite
        train, val = batch_source(x, y, batch_size, "fit", validation_split=validation_split,
                                  validation_data=validation_data, shuffle=shuffle,
                                  finite=finite, integer_x=takes_integer_ids(self))
        seed = shuffle_seed(seed)
        scaler = self._resolve_scaler(loss_scale)
        inner = self.inner_optimizer
        history = History()
        history.params = {"batch_size": train.batch_size, "epochs": epochs,
                          "samples": train.samples, "steps": train.steps,
                          "loss_scale": None if scaler is None else
                          ("dynamic" if scaler.dynamic else scaler.loss_scale)}
        self.history = history
        start = time.perf_counter()
        for epoch in range(initial_epoch, epochs):
            if verbose:
                print(f"Epoch {epoch + 1}/{epochs}", flush=True)
            bar = Progbar(train.steps, verbose)
            monitor = fpsim.monitor() if telemetry else None
            swamped_before = inner.swamped_updates
            with serial_numba(telemetry), fp8_epoch_telemetry(self, history):
                logs, steps = train_epoch(self, train.epoch(self.epochs_trained, seed), scaler,
                                          history, monitor, bar)
            if monitor is not None:  # the sites exist once the first step has built the layers
                history.record_events(monitor.counts, telemetry_sites(self))
            history.swamped_updates.append(inner.swamped_updates - swamped_before)
            if val is not None:
                scores = self._evaluate_batches(val)
                logs.update({f"val_{k}": v for k, v in scores.items()})
            history.record_epoch(epoch, logs)
            self._epochs_trained = self.epochs_trained + 1
            bar.finish(steps, logs, note=train_note(scaler))
        history.wall_time = time.perf_counter() - start
        return history

    # --- evaluate and predict ---------------------------------------------------------------
    def predict(self, x: Any, batch_size: int | None = None, verbose: int | str = "auto"
                ) -> np.ndarray:
        """The model's outputs (in their float32 carrier) for every row of ``x`` (or every
        batch of a dataset), batch by batch (32 rows by default), without recording a graph
        (inference mode: Dropout off)."""
        verbose = check_verbose(verbose)
        inputs = getattr(self, "inputs", None) or []
        if len(inputs) > 1:  # several inputs: a list (or dict by input name) of arrays
            if isinstance(x, dict):
                x = [x[t.name] for t in inputs]
            arrays = [np.asarray(v) for v in x]
            size = batch_size or DEFAULT_BATCH_SIZE
            n = len(arrays[0])
            if any(len(a) != n for a in arrays):
                raise ValueError(f"predict: the inputs have different numbers of samples: "
                                 f"{[len(a) for a in arrays]}")
            batches: Any = (([a[i:i + size] for a in arrays], None) for i in range(0, n, size))
            steps: int | None = math.ceil(n / size)
        else:
            source = batch_source(x, None, batch_size, "predict")[0]
            batches, steps = source.epoch(0, None), source.steps
        bar = Progbar(steps, verbose)
        outs = []
        with no_grad():
            for xb, _ in batches:
                outs.append(self(xb, training=False).data.copy())
                bar.update(len(outs), {})
        bar.finish(len(outs), {})
        return np.concatenate(outs, axis=0)

    def evaluate(self, x: Any = None, y: Any = None, batch_size: int | None = None,
                 verbose: int | str = "auto", return_dict: bool = False
                 ) -> float | list[float] | dict[str, float]:
        """The loss (sample-weighted mean over batches) and metrics on (x, y) or a dataset of
        (x, y) batches, as Keras: a float without metrics, else ``[loss, metric, ...]``, or a
        dict with ``return_dict=True``. ``verbose`` 1 or 2 prints its line (stdout)."""
        self._require_compiled("evaluate()")
        verbose = check_verbose(verbose)
        source = batch_source(x, y, batch_size, "evaluate",
                              integer_x=takes_integer_ids(self))[0]
        result = self._evaluate_batches(source, Progbar(source.steps, verbose))
        if return_dict:
            return result
        return result["loss"] if not self.metrics else list(result.values())

    def _evaluate_batches(self, source: Batches, bar: Progbar | None = None) -> dict[str, float]:
        metrics = [type(m).from_config(m.get_config()) for m in self.metrics]
        total, n, steps = 0.0, 0, 0
        with no_grad():
            for xb, yb in source.epoch(0, None):
                pred = self(xb, training=False)
                total += float(self.loss(yb, pred).item()) * len(xb)
                n += len(xb)
                steps += 1
                for m in metrics:
                    m.update_state(yb, pred.data)
                if bar is not None:
                    bar.update(steps, {"loss": total / n, **{m.name: m.result() for m in metrics}})
        if n == 0:
            raise ValueError("evaluate: the data yielded no batches")
        result = {"loss": total / n}
        result.update({m.name: m.result() for m in metrics})
        if bar is not None:
            bar.finish(steps, result)
        return result

    # --- description ------------------------------------------------------------------------
    def quantize(self, mode: str, **kwargs: Any) -> None:
        """Keras 3's ``model.quantize(mode)``: ``layer.quantize(mode)`` for every layer inside
        that supports the mode (its class lists it in ``supports_quantization``; in nn that is
        ``nn.faces.keras.layers.Dense`` with "float8"), the others skipped; none: a
        ValueError."""
        if kwargs:
            raise ValueError(f"quantize: arguments {sorted(kwargs)} are not supported by nn "
                             "(its float8 training takes the mode only)")
        self.require_built("quantize")
        targets = [layer for layer in self.modules()
                   if mode in getattr(layer, "supports_quantization", ())]
        if not targets:
            raise ValueError(f"quantize({mode!r}): no layer of model '{self.name}' supports "
                             "it; nn's float8 training is keras.layers.Dense from "
                             "nn.faces.keras (quantize('float8')), or an nn.fp8 recipe policy "
                             "(dtype='fp8_hybrid_delayed')")
        for layer in targets:
            layer.quantize(mode)  # type: ignore[attr-defined]

    def summary(self, print_fn: Callable[[str], Any] | None = print) -> str | None:
        """A table of the layers: name and type, output shape, parameters, compute and variable
        formats. Printed with ``print_fn`` (returning None, as Keras does); with
        ``print_fn=None`` the text is returned instead."""
        text = summary_text(self)
        if print_fn is None:
            return text
        print_fn(text)
        return None

    # --- checkpoints ------------------------------------------------------------------------
    def save(self, path: Any) -> None:
        """Write one .npz checkpoint (weights, optimizer slots, loss-scale state and a JSON
        config); ``nn.load_model(path)`` restores it. See ``nn.saving.checkpoint``."""
        save_model(self, path)
