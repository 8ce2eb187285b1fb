"""The training loop behind ``Model.fit``: one epoch, one step, and the gradient telemetry.

Numerics of one training step (``fit``):

- forward in each layer's compute format; the loss in fp32 (``nn.losses``);
- with loss scaling: backward from ``loss * S`` (S a float32 power of two); every gradient is
  rounded to its tensor's format at its monitor site, so an fp16 activation gradient g with
  |g * S| <= 2**-25 (half of fp16's smallest subnormal) flushes to zero there; the fp32
  master-weight gradients are multiplied by ``float32(1 / S)`` and the
  ``LossScaleOptimizer`` skips the update (weights and slots bit-identical) and halves S on
  inf/NaN;
- without: backward from the loss itself and the optimizer's update of the variables.

Telemetry: an ``fpsim.monitor`` counts the roundings of each backward pass at the sites
``"<layer>/grad_activation"`` and ``"<layer>/grad_<weight>"`` (``"<layer>/<weight>/grad"`` when
the weight is not read through a cast), and every gradient's exponent is histogrammed.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

import fpsim
from nn.datasets.dataset import DEFAULT_BATCH_SIZE
from nn.engine import sites
from nn.engine.checks import count
from nn.engine.random import global_seed
from nn.engine.tensor import Tensor
from nn.precision.loss_scale import LossScaleOptimizer
from nn.training.history import History
from nn.training.progress import Progbar


def walk_layers(layer: Any) -> Iterator[Any]:
    """``layer`` itself and every layer inside it, containers included (depth first): the
    layer tree's walk (``Module.modules``)."""
    yield from layer.modules()


def iter_layers(model: Any) -> Iterator[Any]:
    """The layers of ``model`` that compute with weights of their own or hold no other layer
    (the leaves of the tree, plus any layer with its own weights), depth first; ``model``
    itself when it holds no layer."""
    for layer in model.modules():
        if layer._weights or next(layer.children(), None) is None:
            yield layer


def is_mixed_float16(model: Any) -> bool:
    """True if any layer computes in fp16 on fp32 variables (Keras's "mixed_float16")."""
    for layer in walk_layers(model):
        policy = getattr(layer, "policy", None)
        if policy is not None and policy.is_mixed and policy.compute_format == fpsim.FP16:
            return True
    return False


def _check_finite(arr: np.ndarray, name: str, what: str) -> None:
    if arr.dtype.kind in "fc":
        bad = ~np.isfinite(arr)
        if bad.any():
            index = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), arr.shape))
            raise ValueError(
                f"{what}: {name} holds a non-finite value ({arr[index]!r}) at index "
                f"{index if len(index) > 1 else index[0]}; it would turn the weights into NaN. "
                "Clean the data, or pass fit(..., allow_nonfinite=True) to train on it anyway")


def takes_integer_ids(model: Any) -> bool:
    """True when ``model``'s first layer looks integer ids up (an Embedding-like layer with
    ``integer_input``): then fit and evaluate accept integer ``x``, as Keras does."""
    layers = getattr(model, "layers", None) or []
    return bool(layers) and bool(getattr(layers[0], "integer_input", False))


def single_input(x: Any) -> Any:
    """``x`` itself, or ``x[0]`` when ``x`` is a one-element list or tuple of an array or
    Tensor: Keras reads ``[x]`` as the one input of a one-input model (its inputs are a
    structure), not as a batch of one sample with an extra leading axis. (A list of rows,
    ``[[1.0, 2.0]]``, is data and stays as it is.)"""
    if isinstance(x, (list, tuple)) and len(x) == 1 and isinstance(x[0], (np.ndarray, Tensor)):
        return x[0]
    return x


def as_arrays(x: Any, y: Any, what: str, *, finite: bool = False, integer_x: bool = False
              ) -> tuple[np.ndarray, np.ndarray]:
    """``x`` and ``y`` as arrays with matching sample counts and floating-point ``x`` (or
    integer ``x`` with ``integer_x=True``: token ids for an Embedding-like first layer); with
    ``finite=True`` a NaN or inf in either raises ValueError naming it and its first index."""
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
    if xa.dtype.kind != "f" and not (integer_x and xa.dtype.kind in "iu"):
        raise TypeError(f"{what}: x must be floating point (integer ids only when the first "
                        f"layer is an Embedding), got dtype {xa.dtype}; convert it first, e.g. "
                        "x.astype('float32')")
    if finite:
        _check_finite(xa, "x", what)
        _check_finite(ya, "y", what)
    return xa, ya


@contextlib.contextmanager
def serial_numba(enabled: bool) -> Iterator[None]:
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


def forward_keeping_outputs(model: Any, x: np.ndarray, training: bool, keep: bool
                            ) -> tuple[Tensor, list[Tensor]]:
    """The model's output and, if ``keep``, each leaf layer's output (for telemetry)."""
    if keep and hasattr(model, "forward_with_outputs"):  # a graph (functional model)
        out, outs = model.forward_with_outputs(x, training=training)
        return out, outs
    if not keep or not getattr(model, "layers", None):
        return model(x, training=training), []
    outs = []
    h: Any = x
    for layer in model.layers:
        h = layer(h, training=training)
        outs.append(h)
    model.built = True
    return h, outs


def telemetry_sites(model: Any) -> dict[str, dict[str, list[str]]]:
    """Monitor site names of each leaf layer's activation and weight gradients."""
    out: dict[str, dict[str, list[str]]] = {}
    for layer in iter_layers(model):
        if getattr(layer, "is_input_layer", False):
            continue  # nn.Input: no op, no gradient of its own
        names = [v.name for v in layer._weights if v.name and v.trainable and layer.trainable]
        out[layer.name] = sites.layer_sites(layer.name, names)
    return out


def train_note(scaler: LossScaleOptimizer | None) -> str:
    """What the progress line adds to Keras's: the loss scale, when there is one."""
    return "" if scaler is None else f"loss_scale: {scaler.loss_scale:g}"


def train_epoch(model: Any, batches: Iterable[tuple[np.ndarray, np.ndarray]],
                scaler: LossScaleOptimizer | None, history: History, monitor: Any,
                bar: Progbar) -> tuple[dict[str, float], int]:
    """One epoch over ``batches``; returns (Keras's logs: loss and metrics, steps run).

    Raises ValueError if the epoch runs no step (an exhausted one-shot iterator)."""
    for m in model.metrics:
        m.reset_state()
    variables = model.trainable_variables
    if not variables and model.weights:
        raise ValueError("the model has no trainable variables")
    total_loss, samples, steps = 0.0, 0, 0
    for xb, yb in batches:
        loss_value, skipped, scale = train_step(model, xb, yb, scaler, history, monitor)
        total_loss += loss_value * len(xb)
        samples += len(xb)
        steps += 1
        history.record_step(loss_value, scale, skipped)
        if bar.interactive and bar.verbose == 1:
            logs = {"loss": total_loss / samples, **{m.name: m.result() for m in model.metrics}}
            bar.update(steps, logs, note=train_note(scaler))
    if steps == 0:
        raise ValueError(
            "fit: an epoch ran no steps, the data yielded no batches. A one-shot iterator "
            "(a generator, nn.datasets.batches(...)) is exhausted after its first epoch: pass "
            "arrays, or a re-iterable dataset that yields (x, y) batches on every pass")
    logs = {"loss": total_loss / samples}
    logs.update({m.name: m.result() for m in model.metrics})
    return logs, steps


def train_step(model: Any, xb: np.ndarray, yb: np.ndarray, scaler: LossScaleOptimizer | None,
                history: History, monitor: Any) -> tuple[float, bool, float]:
    """One step; returns (unscaled loss, skipped?, the loss scale the step used).

    ``monitor`` (or None) counts the roundings of the backward pass only: the gradients.
    """
    telemetry = monitor is not None
    # an fp8 or overflowing run may carry inf/NaN into the loss: IEEE results that the loss
    # scaler and the History report, not warnings
    with np.errstate(over="ignore", invalid="ignore"):
        pred, outs = forward_keeping_outputs(model, xb, training=True, keep=telemetry)
        loss = model.loss(yb, pred)
    for m in model.metrics:
        m.update_state(yb, pred.data)
    variables = model.trainable_variables
    for v in variables:
        v.zero_grad()
    # a scaled backward may overflow to inf (then inf - inf = NaN in sums): IEEE results the
    # loss scaler is there to catch, not warnings
    scale, skipped = 1.0, False
    root = loss if scaler is None else scaler.scale_loss_for_fit(loss)
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
        model.optimizer.apply_gradients(
            [(g, v) for g, v in zip(grads, variables, strict=True) if g is not None])
    else:
        # fp32 gradients go in as arrays (no Tensor round trip); others keep their format
        # so that the unscaled values are rounded back into it
        # (each face's scaler unscales by its own rules: nn.precision.loss_scale)
        scaler.apply_scaled_gradients(
            [(g.data if g.fmt == fpsim.FP32 else g, v)
             for g, v in zip(grads, variables, strict=True) if g is not None])
        skipped = scaler.last_step_skipped
    for v in variables:
        v.zero_grad()
    return float(loss.item()), skipped, scale


# --- where the batches come from -----------------------------------------------------------------
def _is_dataset(x: Any) -> bool:
    return (not isinstance(x, (np.ndarray, Tensor, list, tuple, str, bytes, dict))
            and hasattr(x, "__iter__") and not hasattr(x, "__array__"))


class Batches:
    """An epoch's batches: from arrays (sliced; shuffled per epoch) or from a re-iterable
    dataset of ``(x, y)`` batches (iterated again each epoch; it shuffles itself). With
    ``inputs_only`` (``predict``) the batches are ``(x, None)`` and a dataset may yield x alone.

    ``samples`` and ``steps`` are None when a dataset does not know its length.
    """

    def __init__(self, x: Any, y: Any, batch_size: int | None, shuffle: bool, *,
                 dataset: bool, finite: bool, what: str, inputs_only: bool = False,
                 integer_x: bool = False) -> None:
        self.x, self.y, self.shuffle, self.dataset = x, y, shuffle, dataset
        self.integer_x = integer_x
        self.finite, self.what, self.inputs_only = finite, what, inputs_only
        self.batch_size = batch_size
        self.samples: int | None = None
        self.steps: int | None = None
        if dataset:
            length = getattr(x, "__len__", None)
            self.steps = int(length()) if callable(length) else None
        else:
            assert batch_size is not None
            self.samples = len(x)
            self.steps = math.ceil(len(x) / batch_size)

    def _dataset_batches(self) -> Iterator[tuple[np.ndarray, Any]]:
        for item in self.x:
            pair = isinstance(item, (tuple, list)) and len(item) == 2
            if pair and isinstance(item[0], (tuple, Mapping)):
                raise TypeError(f"{self.what}: the dataset's x is a nested structure "
                                f"({_describe(item[0])}), as for a model with several inputs; "
                                f"{self.what} feeds one input array per batch")
            if self.inputs_only:
                yield _inputs(item[0] if pair else item, self.what), None
            elif not pair:
                raise TypeError(f"{self.what}: a dataset must yield (x, y) batches, got "
                                f"{_describe(item)}")
            else:
                yield as_arrays(item[0], item[1], self.what, finite=self.finite,
                                integer_x=self.integer_x)

    def epoch(self, index: int, seed: int | None) -> Iterator[tuple[np.ndarray, Any]]:
        """The batches of the epoch whose shuffle is ``default_rng([seed, index])``."""
        if self.dataset:
            yield from self._dataset_batches()
            return
        n = len(self.x)
        order = None
        if self.shuffle:
            order = np.random.default_rng([int(seed or 0), index]).permutation(n)
        assert self.batch_size is not None
        for i in range(0, n, self.batch_size):
            idx: slice | np.ndarray = slice(i, i + self.batch_size)
            if order is not None:
                idx = order[idx]
            yield self.x[idx], (None if self.y is None else self.y[idx])


def _describe(item: Any) -> str:
    """A dataset element's structure in words: ``a tuple of 3``, ``a dict with keys ['a']``."""
    if isinstance(item, Mapping):
        return f"a dict with keys {list(item)}"
    if isinstance(item, (tuple, list)):
        return f"a {type(item).__name__} of {len(item)}"
    return type(item).__name__


def _inputs(x: Any, what: str) -> np.ndarray:
    x = single_input(x)
    xa = np.asarray(x.data if isinstance(x, Tensor) else x)
    if xa.ndim < 1 or len(xa) == 0:
        raise ValueError(f"{what}: x must be a non-empty batch, got shape {xa.shape}")
    return xa


def batch_source(x: Any, y: Any, batch_size: int | None, what: str, *,
                 validation_split: float = 0.0, validation_data: Any = None,
                 shuffle: bool = False, finite: bool = False, integer_x: bool = False
                 ) -> tuple[Batches, Batches | None]:
    """The batches and the validation batches (or None) of ``what`` ("fit", "evaluate",
    "predict": inputs only) on ``x`` and ``y``. Every argument is checked here."""
    inputs_only = what == "predict"
    if not isinstance(shuffle, (bool, np.bool_)):
        raise TypeError(f"shuffle must be True or False, got {shuffle!r}")
    if not (isinstance(validation_split, (int, float)) and 0 <= validation_split < 1):
        raise ValueError(f"validation_split must be a number in [0, 1), got "
                         f"{validation_split!r}")
    if _is_dataset(x):
        if y is not None:
            raise ValueError(f"{what}: y must be None when x is a dataset (it yields (x, y) "
                             f"batches), got y of type {type(y).__name__}")
        if batch_size is not None:
            raise ValueError(f"{what}: batch_size must be None when x is a dataset (the "
                             f"dataset batches), got batch_size={batch_size!r}")
        if validation_split:
            raise ValueError(f"{what}: validation_split needs arrays; with a dataset pass "
                             "validation_data=")
        train = Batches(x, None, None, False, dataset=True, finite=finite, what=what,
                        inputs_only=inputs_only, integer_x=integer_x)
    else:
        batch_size = (DEFAULT_BATCH_SIZE if batch_size is None
                      else count("batch_size", batch_size, minimum=1))
        if inputs_only:
            return Batches(_inputs(x, what), None, batch_size, False, dataset=False,
                           finite=False, what=what, inputs_only=True), None
        if x is None or y is None:
            raise ValueError(f"{what}: pass x and y arrays, or x a dataset of (x, y) batches")
        xa, ya = as_arrays(x, y, what, finite=finite, integer_x=integer_x)
        if validation_split > 0 and validation_data is None:
            n_val = int(len(xa) * validation_split)
            if n_val == 0 or n_val == len(xa):
                raise ValueError(f"validation_split={validation_split} leaves "
                                 f"{len(xa) - n_val} training and {n_val} validation samples")
            validation_data = (xa[-n_val:], ya[-n_val:])
            xa, ya = xa[:-n_val], ya[:-n_val]
        train = Batches(xa, ya, batch_size, shuffle, dataset=False, finite=finite, what=what,
                        integer_x=integer_x)
    if validation_data is None:
        return train, None
    val_what = f"{what}(validation_data)"
    if _is_dataset(validation_data):
        return train, batch_source(validation_data, None, None, val_what, finite=finite,
                                   integer_x=integer_x)[0]
    if not (isinstance(validation_data, (tuple, list)) and len(validation_data) == 2):
        raise ValueError("validation_data must be a pair (x_val, y_val) or a dataset")
    x_val, y_val = validation_data
    return train, batch_source(x_val, y_val, train.batch_size or DEFAULT_BATCH_SIZE, val_what,
                               finite=finite, integer_x=integer_x)[0]


def shuffle_seed(seed: Any) -> int:
    """``fit``'s shuffling seed: ``seed``, or the seed of ``nn.set_random_seed`` (the global
    generator's entropy, random per process if it was never set)."""
    if seed is not None:
        return count("seed", seed)

    return global_seed()
