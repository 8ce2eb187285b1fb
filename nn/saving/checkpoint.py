"""Checkpoints: ``model.save(path)`` and ``nn.load_model(path)``, one .npz file.

The file is an uncompressed numpy ``.npz`` (a zip whose members carry CRC-32 checksums) with:

- ``config``: UTF-8 JSON (stored as a uint8 array, so loading never unpickles) holding the
  format tag and version, the architecture (``nn.layers.serialize``: each layer's registered
  class name and ``get_config``), each layer's build config (the input shape of its first call)
  and state (e.g. a Dropout generator's state), keyed by the layer's path in the layer tree
  (``"0"``, ``"body"``, ``"blocks.1.ff1"``; by name up to version 3, which a subclassed
  model's automatic names could not match), the name, state-dict key, format and shape of
  every weight, the
  compile settings (loss and metrics, serialized through their registries), the optimizer's
  class, config and counters, the loss-scale optimizer's config and state, the training
  position (``epochs_trained``: the next epoch's shuffle seed) and the state of every fp8
  recipe of the layers' policies (``fp8``: amax histories, scales, steps; ``nn.fp8.persist``);
- ``weight_<i>``: the weights in ``model.weights`` order, in their float32 carrier (their values
  lie in the variable format, so nothing is rounded on the way back);
- ``slot_<i>_<name>``: the optimizer's slots, per variable in the optimizer's order.

Nothing here names a concrete layer, optimizer, loss or metric: classes come from
``nn.engine.registry``, so a new registered class saves and loads with no edit to this file.

Resuming is bit-identical: weights, slots, ``iterations`` (Adam's bias correction), the loss
scale and its growth counter, every Dropout's generator, every fp8 recipe's amax histories and
scales, and the epoch count are all restored. The recipe of an explicit ``nn.fp8_autocast``
belongs to the caller and is not saved (``recipe.state_dict()``: see ``nn.fp8.persist``).

``save`` refuses (ValueError, nothing written) what ``load_model`` could not rebuild: a loss,
metric or layer whose class is not registered (e.g. a plain function as the loss: the optimizer
state would be lost with it). ``load_model`` reads and checks everything before it builds
anything: a truncated, corrupt or foreign file, one whose pieces disagree, a field out of its
range (e.g. ``iterations = -1``) or a weight holding a value outside its variable's format (an
fp16 weight edited to 0.1) raises ``ValueError`` naming it and returns nothing.

Version 3 (this one) added the fp8 recipe states; version 2 build configs, layer states and
registry-serialized metrics. Older files are upgraded on load; a version 1 or 2 file of a model
with a delayed-scaling recipe loads with empty amax histories and a warning saying so.
"""

from __future__ import annotations

import json
import os
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from fpsim.atomic import write_atomic
from nn.engine.checks import count
from nn.engine.formats import format_name
from nn.engine.random import restoring
from nn.engine.registry import LAYERS, LOSSES, METRICS, OPTIMIZERS
from nn.engine.rounding import round_array
from nn.fp8.persist import fp8_entries, restore_fp8, stateful_layers
from nn.layers.base import Layer
from nn.precision.loss_scale import LossScaleOptimizer
from nn.training.loop import iter_layers

FORMAT = "fpsim.nn.checkpoint"
VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)


def _layers(model: Any, by_path: bool) -> dict[str, Any]:
    """The model's layers by path in the layer tree (version 4 on), or by name (1 to 3)."""
    if by_path:
        return dict(model.named_modules())
    return {layer.name: layer for layer in model.modules()}


# --- saving -------------------------------------------------------------------------------------
def _serialize(registry: Any, obj: Any, what: str) -> dict[str, Any]:
    try:
        out: dict[str, Any] = registry.serialize(obj)
    except ValueError as e:
        raise ValueError(f"save() cannot write this model: its {what} {obj!r:.60} cannot be "
                         f"restored by load_model ({e}). Nothing was written; saving without "
                         "it would lose the compile settings and the optimizer's state "
                         "(slots, iterations, loss scale).") from None
    return out


def _is_model(obj: object) -> bool:
    """A Layer with Keras's training API (an ``nn.Model``, read through its public API: this
    module sits below ``nn.models``, whose ``Model.save`` calls it)."""
    return isinstance(obj, Layer) and callable(getattr(obj, "compile", None))


def save_model(model: Any, path: str | os.PathLike) -> None:
    """Write ``model`` to ``path`` (exactly that name) through ``fpsim.atomic.write_atomic``: a
    temporary file beside it, fsynced and renamed, so a failed or interrupted save leaves the
    previous checkpoint intact and raises ``fpsim.atomic.WriteError`` naming the file. A new file
    gets the permissions of the user's umask, as ``np.save`` gives; a replaced one keeps its own."""
    if not _is_model(model):
        raise TypeError(f"save() supports nn models built from layers (e.g. nn.Sequential), "
                        f"got {type(model).__name__}")
    if not all(layer.built or type(layer).build is Layer.build for layer in iter_layers(model)):
        raise ValueError("save() needs a built model: call it on a batch (or fit) first")
    arrays: dict[str, np.ndarray] = {}
    keyed = list(model.named_variables(require_built=False))
    weights = [var for _, var in keyed]
    for i, var in enumerate(weights):
        arrays[f"weight_{i}"] = np.array(var.data, order="C")  # (0-d stays 0-d)
    layers = _layers(model, by_path=True)
    config: dict[str, Any] = {
        "format": FORMAT, "version": VERSION,
        "architecture": _serialize(LAYERS, model, "model"),
        "built": bool(model.built),
        "build": {path: layer.get_build_config() for path, layer in layers.items()
                  if layer.get_build_config() is not None},
        "layer_state": {path: layer.state() for path, layer in layers.items()
                        if layer.state() is not None},
        "weights": [{"name": v.name, "key": key, "format": format_name(v.fmt),
                     "shape": list(v.shape)} for key, v in keyed],
        "compile": None, "optimizer": None, "loss_scale": None,
        "training": {"epochs_trained": model.epochs_trained},
        "fp8": fp8_entries(model),
    }
    if getattr(model, "loss", None) is not None:
        config["compile"] = {"loss": _serialize(LOSSES, model.loss, "loss"),
                             "metrics": [_serialize(METRICS, m, "metric")
                                         for m in model.metrics]}
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
            **_serialize(OPTIMIZERS, inner, "optimizer"),
            "iterations": inner.iterations, "variables": [index[id(v)] for v in opt_vars],
            "slots": [sorted(s) for s in state["slots"]],
            "swamped_updates": inner.swamped_updates, "swamped_counts": inner.swamped_counts,
        }
        scaler = model.loss_scale_optimizer
        config["compile"]["loss_scaled"] = scaler is not None
        if scaler is not None:  # the optimizer's own config and state, less the inner one's
            config["loss_scale"] = {
                "setting": model.loss_scale_setting,
                "config": {k: v for k, v in scaler.get_config().items()
                           if k != "inner_optimizer"},
                "state": {k: v for k, v in scaler.state_dict().items() if k != "optimizer"},
            }
    arrays["config"] = np.frombuffer(json.dumps(config).encode("utf-8"), dtype=np.uint8)
    write_atomic(path, lambda f: np.savez(f, **arrays),  # type: ignore[arg-type]
                 what="checkpoint")


# --- loading ------------------------------------------------------------------------------------
class _Bad(ValueError):
    pass


def _count(field: str, value: Any) -> int:
    """``value`` if it is an integer >= 0 (nn.engine.checks.count), else _Bad naming the field."""
    try:
        return count(field, value)
    except ValueError as e:
        raise _Bad(str(e)) from None


def _flag(field: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise _Bad(f"{field} must be true or false, got {value!r}")


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
    if config.get("version") not in READABLE_VERSIONS:
        raise _Bad(f"checkpoint version {config.get('version')!r}; this nn reads versions "
                   f"{', '.join(map(str, READABLE_VERSIONS))}")
    if config["version"] == 1:
        config = _upgrade_v1(config)
    if config["version"] == 2:
        config = dict(config, version=3, fp8=None)  # None: the file recorded no recipe state
    if config["version"] == 3 and config.get("loss_scale") is not None:
        config = dict(config, loss_scale=_loss_scale_from_v3(config["loss_scale"]))
    return config, arrays


def _loss_scale_from_v3(ls: dict[str, Any]) -> dict[str, Any]:
    """Version 1 to 3's flat loss-scale entry in version 4's layout (the LossScaleOptimizer's
    own ``get_config`` and ``state_dict``)."""
    dynamic = _flag("loss_scale.dynamic", ls["dynamic"])
    return {"setting": "compiled" if _flag("loss_scale.compiled", ls["compiled"]) else ls["key"],
            "config": {"initial_scale": ls["initial_scale"], "dynamic": dynamic,
                       "dynamic_growth_steps": ls["dynamic_growth_steps"] if dynamic else None},
            "state": {"loss_scale": ls["scale"], "dynamic_counter": ls["counter"],
                      "skipped_steps": ls["skipped_steps"],
                      "last_step_skipped": ls["last_step_skipped"]}}


def _upgrade_v1(config: dict[str, Any]) -> dict[str, Any]:
    """A version 1 config in version 2's layout. Version 1 models were saved built, and their
    only layers with weights kept a 2-D ``<layer>/kernel`` whose rows are the input width."""
    config = dict(config)
    build: dict[str, Any] = {}
    for meta in config["weights"]:
        layer, _, weight = meta["name"].rpartition("/")
        if weight == "kernel":
            build[layer] = {"input_shape": [None, int(meta["shape"][0])]}
    config["build"] = build
    config["built"] = True
    training = dict(config["training"])
    config["layer_state"] = {name: {"rng": state}
                             for name, state in training.pop("dropout_rng", {}).items()}
    config["training"] = training
    comp = config.get("compile")
    if comp is not None:
        loss = comp["loss"]
        if loss is not None and loss["class_name"] == "WeightedLoss":
            loss = {"class_name": "WeightedLoss",
                    "config": {"inner": loss["inner"], "weight": loss["weight"]}}
        metrics = [METRICS.serialize(METRICS.get(m)) for m in comp["metrics"]]
        config["compile"] = {"loss": loss, "metrics": metrics}
    config["version"] = 2
    return config


def _build(config: dict[str, Any]) -> Any:
    """The model from its serialized architecture, each layer built from its build config
    (drawing no random numbers: the weights come from the file)."""
    with restoring():
        model = LAYERS.deserialize(config["architecture"])
        builds = config["build"]
        if not isinstance(builds, dict):
            raise _Bad(f"build must be a mapping of layer names to build configs, got {builds!r}")
        layers = _layers(model, by_path=config["version"] >= 4)
        unknown = sorted(set(builds) - set(layers))
        if unknown:
            raise _Bad(f"build configs name layers the architecture lacks: {unknown}")
        for name, build in builds.items():
            layers[name].build_from_config(build)
    if _flag("built", config["built"]):
        for layer in iter_layers(model):
            layer.built = True  # layers without weights (Dropout, Flatten, ...) need no shape
        model.built = True
    return model


def _require_in_format(what: str, arr: np.ndarray, fmt: Any) -> None:
    """Raise ``_Bad`` if a stored value is not a number of ``fmt`` (``save`` writes values that
    lie in their variable's format, so such a file was edited or corrupted; loading would round
    it silently). NaN passes where ``fmt`` has a NaN (a diverged model saves and loads as
    is); in a format without NaN it is refused."""
    if fmt is None:  # float64: every float64 is in it
        return
    rounded = round_array(np.array(arr, copy=True), fmt)
    nan_ok = fmt.has_nan  # a NaN in a format without one (e2m1) is outside it too
    same = (rounded == arr) | (np.isnan(rounded) & np.isnan(arr) & nan_ok)
    if np.all(same):
        return
    where = tuple(int(i) for i in np.argwhere(~same)[0])
    name = format_name(fmt)
    raise _Bad(f"{what} holds {int((~same).sum())} value(s) outside its format {name}, e.g. "
               f"{float(arr[where])!r} at index {where} ({name} would hold "
               f"{float(rounded[where])!r}); the file was edited or corrupted")


def _assemble(config: dict[str, Any], arrays: dict[str, np.ndarray]) -> Any:
    model = _build(config)
    if not _is_model(model):
        raise _Bad(f"the architecture is a {type(model).__name__}, not a model")
    by_path = config["version"] >= 4
    keyed = list(model.named_variables(require_built=False))
    weights = [var for _, var in keyed]
    saved = config["weights"]
    if len(saved) != len(weights) or any(f"weight_{i}" not in arrays for i in range(len(saved))):
        raise _Bad(f"the architecture has {len(weights)} weights, the file describes "
                   f"{len(saved)} and holds {sum(k.startswith('weight_') for k in arrays)}")
    for i, ((key, var), meta) in enumerate(zip(keyed, saved, strict=True)):
        arr = arrays[f"weight_{i}"]
        if ((meta["key"] != key if by_path else var.name != meta["name"])
                or list(arr.shape) != list(var.shape)
                or meta["format"] != format_name(var.fmt) or arr.dtype != var.data.dtype):
            raise _Bad(f"weight {i} is {meta['name']!r} {arr.dtype}{arr.shape} in "
                       f"{meta['format']}, the architecture expects {var.name!r} "
                       f"{var.data.dtype}{var.shape} in {format_name(var.fmt)}")
        _require_in_format(f"weight {key!r}", arr, var.fmt)
        var.assign(arr)
    layers = _layers(model, by_path)
    for name, state in config["layer_state"].items():
        if name not in layers:
            raise _Bad(f"layer_state names a layer the architecture lacks: {name!r}")
        layers[name].set_state(state)
    epochs_trained = _count("training.epochs_trained", config["training"]["epochs_trained"])
    _restore_fp8(model, layers, config["fp8"])

    comp = config["compile"]
    if comp is None:
        return model
    opt_cfg = config["optimizer"]
    inner = OPTIMIZERS.deserialize(opt_cfg)
    variables = [weights[_count("optimizer.variables[]", i)] for i in opt_cfg["variables"]]
    slots = []
    for i, names in enumerate(opt_cfg["slots"]):
        try:
            slots.append({n: arrays[f"slot_{i}_{n}"] for n in names})
        except KeyError as e:
            raise _Bad(f"optimizer slot {e} is missing") from None
    inner.load_state_dict({"iterations": _count("optimizer.iterations", opt_cfg["iterations"]),
                           "slots": slots}, variables)
    inner.swamped_updates = _count("optimizer.swamped_updates", opt_cfg["swamped_updates"])
    inner.swamped_counts = {str(k): _count(f"optimizer.swamped_counts[{k!r}]", v)
                            for k, v in opt_cfg["swamped_counts"].items()}

    ls = config["loss_scale"]
    scaler = None
    if ls is not None:
        if not (isinstance(ls, dict) and sorted(ls) == ["config", "setting", "state"]):
            raise _Bad(f"loss_scale must be a mapping of setting, config and state, got "
                       f"{ls!r:.80}")
        scaler = LossScaleOptimizer.from_config(ls["config"], inner)
        scaler.load_state_dict({**ls["state"], "optimizer": inner.state_dict()})
    loss = LOSSES.deserialize(comp["loss"])
    model.compile(inner, loss, metrics=[METRICS.deserialize(m) for m in comp["metrics"]])
    if scaler is not None:
        model.use_loss_scaler(scaler, ls["setting"])
    elif not _flag("compile.loss_scaled", comp.get("loss_scaled", model.loss_scale_optimizer
                                                   is not None)):
        model.use_loss_scaler(None, "none")
    model.epochs_trained = epochs_trained  # compile restarted it
    return model


def _restore_fp8(model: Any, layers: dict[str, Any], entries: Any) -> None:
    if entries is None:  # a version 1 or 2 file
        lost = stateful_layers(model)
        if lost:
            warnings.warn(f"this checkpoint predates fp8 recipe states (version 3): the delayed "
                          f"scaling of layers {lost} restarts from empty amax histories (scale "
                          "1), so training resumed from it is not bit-identical to an "
                          "uninterrupted run", stacklevel=4)
        return
    try:
        restore_fp8(layers, entries)
    except ValueError as e:
        raise _Bad(str(e)) from None


def load_model(path: str | os.PathLike) -> Any:
    """The model saved at ``path``: architecture, weights, layer states, and (if it was
    compiled) the loss, metrics, optimizer with its slots and counters, and the loss-scale state.

    Raises ``FileNotFoundError`` if there is no file and ``ValueError`` (with the reason) for a
    truncated, corrupt, foreign or inconsistent one or a field out of range; nothing is
    returned half-loaded.
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
