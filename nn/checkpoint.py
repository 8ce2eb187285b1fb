"""Checkpoints: ``model.save(path)`` and ``nn.load_model(path)``, one .npz file.

The file is an uncompressed numpy ``.npz`` (a zip whose members carry CRC-32 checksums) with:

- ``config``: UTF-8 JSON (stored as a uint8 array, so loading never unpickles) holding the
  format tag and version, the architecture (layer classes, names, policies, sizes), the name,
  format and shape of every weight, the compile settings (loss, metrics), the optimizer's class,
  config and counters, the loss-scale optimizer's config and state, and the training position
  (``epochs_trained``: the next epoch's shuffle seed; the state of each seeded Dropout's
  generator);
- ``weight_<i>``: the weights in ``model.weights`` order, in their float32 carrier (their values
  lie in the variable format, so nothing is rounded on the way back);
- ``slot_<i>_<name>``: the optimizer's slots, per variable in the optimizer's order.

Resuming is bit-identical: weights, slots, ``iterations`` (Adam's bias correction), the loss
scale and its growth counter, and the epoch count are all restored exactly.

``load_model`` reads and checks everything before it builds anything: a truncated, corrupt or
foreign file, or one whose pieces disagree, raises ``ValueError`` and returns nothing.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from nn import layers as nn_layers
from nn import losses as nn_losses
from nn import metrics as nn_metrics
from nn import optimizers as nn_optimizers
from nn.loss_scale import LossScaleOptimizer
from nn.model import Model, WeightedLoss
from nn.policy import format_name
from nn.training import iter_layers

FORMAT = "fpsim.nn.checkpoint"
VERSION = 1

_OPTIMIZERS = {"SGD": nn_optimizers.SGD, "RMSprop": nn_optimizers.RMSprop,
               "Adam": nn_optimizers.Adam}
_LOSSES = {"SparseCategoricalCrossentropy": nn_losses.SparseCategoricalCrossentropy,
           "CategoricalCrossentropy": nn_losses.CategoricalCrossentropy,
           "MeanSquaredError": nn_losses.MeanSquaredError}


# --- saving -------------------------------------------------------------------------------------
def _loss_config(loss: Any) -> dict[str, Any] | None:
    if isinstance(loss, WeightedLoss):
        inner = _loss_config(loss.inner)
        return None if inner is None else {"class_name": "WeightedLoss", "inner": inner,
                                           "weight": loss.weight}
    if type(loss).__name__ in _LOSSES and type(loss) is _LOSSES[type(loss).__name__]:
        cfg = {k: v for k, v in loss.get_config().items() if k != "name"}
        return {"class_name": type(loss).__name__, "config": cfg}
    return None  # a plain callable: the loaded model has to be compiled again


def save_model(model: Model, path: str | os.PathLike) -> None:
    """Write ``model`` to ``path`` (exactly that name; written to a temporary file first and
    renamed, so an interrupted save never leaves a half-written checkpoint)."""
    if not isinstance(model, nn_layers.Sequential):
        raise TypeError(f"save() supports nn.Sequential models, got {type(model).__name__}")
    if model.layers and not all(layer.built for layer in iter_layers(model)):
        raise ValueError("save() needs a built model: call it on a batch (or fit) first")
    arrays: dict[str, np.ndarray] = {}
    weights = model.weights
    for i, var in enumerate(weights):
        arrays[f"weight_{i}"] = np.ascontiguousarray(var.data)
    config: dict[str, Any] = {
        "format": FORMAT, "version": VERSION,
        "architecture": nn_layers.serialize(model),
        "weights": [{"name": v.name, "format": format_name(v.fmt), "shape": list(v.shape)}
                    for v in weights],
        "compile": None, "optimizer": None, "loss_scale": None,
        "training": {"epochs_trained": model.epochs_trained,
                     "dropout_rng": {layer.name: layer._rng.bit_generator.state
                                     for layer in iter_layers(model)
                                     if isinstance(layer, nn_layers.Dropout)
                                     and layer._rng is not None}},
    }
    if getattr(model, "loss", None) is not None:
        config["compile"] = {"loss": _loss_config(model.loss),
                             "metrics": [m.name for m in model.metrics]}
        inner = model.inner_optimizer
        index = {id(v): i for i, v in enumerate(weights)}
        opt_vars = inner.variables
        missing = [v.name for v in opt_vars if id(v) not in index]
        if missing:
            raise ValueError(f"the optimizer holds variables that are not the model's: {missing}")
        state = inner.state_dict()
        for i, slots in enumerate(state["slots"]):
            for name, arr in slots.items():
                arrays[f"slot_{i}_{name}"] = arr
        config["optimizer"] = {
            "class_name": type(inner).__name__, "config": inner.get_config(),
            "iterations": inner.iterations, "variables": [index[id(v)] for v in opt_vars],
            "slots": [sorted(s) for s in state["slots"]],
            "swamped_updates": inner.swamped_updates, "swamped_counts": inner.swamped_counts,
        }
        scaler = model.loss_scale_optimizer
        if scaler is not None:
            st = scaler.state_dict()
            config["loss_scale"] = {
                "compiled": isinstance(model.optimizer, LossScaleOptimizer),
                "key": getattr(model, "_scaler_key", None),
                "initial_scale": scaler.initial_scale,
                "dynamic_growth_steps": scaler.dynamic_growth_steps, "dynamic": scaler.dynamic,
                "scale": st["loss_scale"], "counter": st["dynamic_counter"],
                "skipped_steps": st["skipped_steps"],
                "last_step_skipped": scaler.last_step_skipped,
            }
    arrays["config"] = np.frombuffer(json.dumps(config).encode("utf-8"), dtype=np.uint8)
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --- loading ------------------------------------------------------------------------------------
class _Bad(ValueError):
    pass


def _read(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Every member of the file, read and checksummed, plus the parsed config."""
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        # our own file handle: np.load(path) leaks it when the zip directory is unreadable
        with open(path, "rb") as f, np.load(f, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as e:
        raise _Bad(f"cannot read it as an .npz archive ({type(e).__name__}: {e}); the file is "
                   "truncated, corrupt or not a checkpoint") from None
    raw = arrays.pop("config", None)
    if raw is None or raw.dtype != np.uint8 or raw.ndim != 1:
        raise _Bad("it has no 'config' member: it is not an fpsim nn checkpoint")
    try:
        config = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _Bad(f"its config is not valid JSON ({e})") from None
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise _Bad(f"its config does not carry the format tag {FORMAT!r}")
    if config.get("version") != VERSION:
        raise _Bad(f"checkpoint version {config.get('version')!r}; this nn reads version "
                   f"{VERSION}")
    return config, arrays


def _build(config: dict[str, Any], weights_meta: list[dict[str, Any]]) -> Any:
    """The model from its serialized architecture, with every Dense built from the saved kernel
    shapes (drawing no random numbers: the weights come from the file)."""
    model = nn_layers.deserialize(config)
    shapes = {m["name"]: m["shape"] for m in weights_meta}
    for layer in iter_layers(model):
        if isinstance(layer, nn_layers.Dense):
            kernel = shapes.get(f"{layer.name}/kernel")
            if kernel is None:
                continue  # saved before it was ever called: stays unbuilt
            rng = layer._rng
            layer._rng = np.random.default_rng(0)  # not the global generator
            layer.build((None, int(kernel[0])))
            layer.built = True
            layer._rng = rng
    return model


def _build_loss(cfg: dict[str, Any] | None) -> Any:
    if cfg is None:
        return None
    if cfg["class_name"] == "WeightedLoss":
        inner = _build_loss(cfg["inner"])
        return None if inner is None else WeightedLoss(inner, cfg["weight"])
    if cfg["class_name"] not in _LOSSES:
        raise _Bad(f"unknown loss class {cfg['class_name']!r}")
    return _LOSSES[cfg["class_name"]](**cfg["config"])


def _assemble(config: dict[str, Any], arrays: dict[str, np.ndarray]) -> Model:
    model = _build(config["architecture"], config["weights"])
    if not isinstance(model, nn_layers.Sequential):
        raise _Bad("the architecture is not a Sequential model")
    weights = model.weights
    saved = config["weights"]
    if len(saved) != len(weights) or any(f"weight_{i}" not in arrays for i in range(len(saved))):
        raise _Bad(f"the architecture has {len(weights)} weights, the file describes "
                   f"{len(saved)} and holds {sum(k.startswith('weight_') for k in arrays)}")
    for i, (var, meta) in enumerate(zip(weights, saved, strict=True)):
        arr = arrays[f"weight_{i}"]
        if (var.name != meta["name"] or list(arr.shape) != list(var.shape)
                or meta["format"] != format_name(var.fmt) or arr.dtype != var.data.dtype):
            raise _Bad(f"weight {i} is {meta['name']!r} {arr.dtype}{arr.shape} in "
                       f"{meta['format']}, the architecture expects {var.name!r} "
                       f"{var.data.dtype}{var.shape} in {format_name(var.fmt)}")
        var.assign(arr)
    for layer in iter_layers(model):
        state = config["training"]["dropout_rng"].get(layer.name)
        if state is not None and isinstance(layer, nn_layers.Dropout) and layer._rng is not None:
            layer._rng.bit_generator.state = state
    model._epochs_trained = int(config["training"]["epochs_trained"])

    comp = config["compile"]
    if comp is None:
        return model
    opt_cfg = config["optimizer"]
    if opt_cfg["class_name"] not in _OPTIMIZERS:
        raise _Bad(f"unknown optimizer class {opt_cfg['class_name']!r}")
    inner = _OPTIMIZERS[opt_cfg["class_name"]].from_config(opt_cfg["config"])
    variables = [weights[i] for i in opt_cfg["variables"]]
    slots = []
    for i, names in enumerate(opt_cfg["slots"]):
        try:
            slots.append({n: arrays[f"slot_{i}_{n}"] for n in names})
        except KeyError as e:
            raise _Bad(f"optimizer slot {e} is missing") from None
    inner.load_state_dict({"iterations": opt_cfg["iterations"], "slots": slots}, variables)
    inner.swamped_updates = int(opt_cfg["swamped_updates"])
    inner.swamped_counts = {str(k): int(v) for k, v in opt_cfg["swamped_counts"].items()}

    ls = config["loss_scale"]
    scaler = None
    if ls is not None:
        scaler = LossScaleOptimizer(inner, initial_scale=ls["initial_scale"],
                                    dynamic_growth_steps=ls["dynamic_growth_steps"],
                                    dynamic=ls["dynamic"])
        scaler.load_state_dict({"loss_scale": ls["scale"], "dynamic_counter": ls["counter"],
                                "skipped_steps": ls["skipped_steps"],
                                "optimizer": inner.state_dict()})
        scaler.last_step_skipped = bool(ls["last_step_skipped"])
    loss = _build_loss(comp["loss"])
    if loss is None:
        return model  # the loss was a plain callable: compile again before fit
    model.compile(scaler if scaler is not None and ls["compiled"] else inner, loss,
                  metrics=[nn_metrics.get(m) for m in comp["metrics"]])
    if scaler is not None and not ls["compiled"]:
        key = ls["key"]
        model._scaler, model._scaler_key = scaler, key
    return model


def load_model(path: str | os.PathLike) -> Model:
    """The model saved at ``path``: architecture, weights, and (if it was compiled) the loss,
    metrics, optimizer with its slots and counters, and the loss-scale state.

    Raises ``FileNotFoundError`` if there is no file and ``ValueError`` (with the reason) for a
    truncated, corrupt, foreign or inconsistent one; nothing is returned half-loaded.
    """
    path = Path(path)
    try:
        config, arrays = _read(path)
        return _assemble(config, arrays)
    except _Bad as e:
        raise ValueError(f"{path} is not a usable fpsim nn checkpoint: {e}") from None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        raise ValueError(f"{path} is not a usable fpsim nn checkpoint: its config is "
                         f"inconsistent ({type(e).__name__}: {e})") from None
