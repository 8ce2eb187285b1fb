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
from collections.abc import Iterator
from typing import Any

import numpy as np

import fpsim
from nn import sites
from nn.history import History
from nn.loss_scale import LossScaleOptimizer
from nn.tensor import Tensor


def iter_layers(model: Any) -> Iterator[Any]:
    """The leaf layers of ``model`` in call order (nested containers flattened)."""
    for layer in getattr(model, "layers", []):
        if getattr(layer, "layers", None) is not None:
            yield from iter_layers(layer)
        else:
            yield layer


def walk_layers(layer: Any) -> Iterator[Any]:
    """``layer`` itself and every layer inside it, containers included (depth first)."""
    yield layer
    for inner in getattr(layer, "layers", None) or []:
        yield from walk_layers(inner)


def is_mixed_float16(model: Any) -> bool:
    """True if any layer computes in fp16 on fp32 variables (Keras's "mixed_float16")."""
    layers = list(iter_layers(model)) or [model]
    for layer in layers:
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


def as_arrays(x: Any, y: Any, what: str, *, finite: bool = False
              ) -> tuple[np.ndarray, np.ndarray]:
    """``x`` and ``y`` as arrays with matching sample counts and floating-point ``x``; with
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
    if xa.dtype.kind != "f":
        raise TypeError(f"{what}: x must be floating point, got dtype {xa.dtype}; convert it "
                        "first, e.g. x.astype('float32')")
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
    for layer in iter_layers(model) if getattr(model, "layers", None) else [model]:
        names = [v.name for v in getattr(layer, "trainable_variables", []) if v.name]
        out[layer.name] = sites.layer_sites(layer.name, names)
    return out


def train_epoch(model: Any, x: np.ndarray, y: np.ndarray, batch_size: int, epoch: int,
                 epochs: int, shuffle: bool, seed: int | None, verbose: int,
                 scaler: LossScaleOptimizer | None, history: History,
                 monitor: Any) -> dict[str, float]:
    n = len(x)
    if shuffle:
        rng = np.random.default_rng(None if seed is None else [int(seed), epoch])
        order = rng.permutation(n)
    else:
        order = None
    for m in model.metrics:
        m.reset_state()
    variables = model.trainable_variables
    if not variables and model.weights:
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
            idx: slice | np.ndarray = slice(i * batch_size, (i + 1) * batch_size)
            if order is not None:
                idx = order[idx]
            xb, yb = x[idx], y[idx]
            loss_value, skipped, scale = train_step(model, xb, yb, scaler, history, monitor)
            total_loss += loss_value * len(xb)
            history.record_step(loss_value, scale, skipped)
            if bar is not None:
                post = {"loss": f"{total_loss / min(n, (i + 1) * batch_size):.4f}"}
                post.update({m.name: f"{m.result():.4f}" for m in model.metrics})
                if scaler is not None:
                    post["scale"] = f"{scaler.loss_scale:g}"
                bar.set_postfix(post, refresh=False)
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    logs = {"loss": total_loss / n}
    logs.update({m.name: m.result() for m in model.metrics})
    return logs


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
        model.optimizer.apply_gradients(
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
