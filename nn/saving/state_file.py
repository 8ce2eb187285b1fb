"""``torch.save(obj, f)`` / ``torch.load(f)`` for state dicts: a nested dict (or list) of
arrays, numbers, strings, bools and None, such as ``{"model": model.state_dict(),
"optimizer": opt.state_dict(), "scaler": scaler.state_dict(), "epoch": 3}``.

The file is an ``.npz`` archive written atomically (``fpsim.atomic``: a failed write leaves the
previous file intact): the arrays as ``.npy`` members, the structure as a JSON member that
names them. Loading never unpickles (``allow_pickle=False``), the safety PyTorch's
``weights_only=True`` gives; anything else (a model object, a function) is refused on save,
naming its path in the structure. Arrays come back as float32/float64/integer numpy arrays, as
``state_dict`` gives them.
"""

from __future__ import annotations

import io
import json
import os
from typing import Any

import numpy as np

from fpsim.atomic import write_atomic

_KIND = "nn.state_file/1"


def _encode(obj: Any, path: str, arrays: dict[str, np.ndarray]) -> Any:
    """``obj`` as JSON-able data; arrays moved to ``arrays`` under a key the data names."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)) and not isinstance(obj, (bool, np.bool_)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return {"float": repr(float(obj))}  # repr: exact, and keeps inf and nan
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "biuf":
            raise TypeError(f"save: {path} is an array of dtype {obj.dtype}; only numeric arrays "
                            "can be saved")
        key = f"a{len(arrays)}"
        arrays[key] = obj
        return {"array": key}
    if hasattr(obj, "data") and isinstance(getattr(obj, "data", None), np.ndarray):
        return _encode(obj.data, path, arrays)  # an nn.Tensor: its values
    if isinstance(obj, dict):
        for k in obj:
            if not isinstance(k, str):
                raise TypeError(f"save: {path} has a key {k!r} that is not a string")
        return {"dict": {k: _encode(v, f"{path}[{k!r}]", arrays) for k, v in obj.items()}}
    if isinstance(obj, (list, tuple)):
        kind = "list" if isinstance(obj, list) else "tuple"
        return {kind: [_encode(v, f"{path}[{i}]", arrays) for i, v in enumerate(obj)]}
    raise TypeError(f"save: {path} is a {type(obj).__name__}; nn's torch.save stores state "
                    "dicts only (dicts and lists of arrays, numbers, strings): save "
                    "model.state_dict(), not the model")


def _decode(data: Any, arrays: Any) -> Any:
    if data is None or isinstance(data, (bool, str, int)):
        return data
    (kind, value), = data.items()
    if kind == "float":
        return float(value)
    if kind == "array":
        return np.array(arrays[value])
    if kind == "dict":
        return {k: _decode(v, arrays) for k, v in value.items()}
    if kind in ("list", "tuple"):
        items = [_decode(v, arrays) for v in value]
        return items if kind == "list" else tuple(items)
    raise ValueError(f"load: unknown entry {kind!r} in the file's structure")


def save(obj: Any, f: str | os.PathLike[str]) -> None:
    """Write the state dict ``obj`` to the file ``f`` (see the module docstring)."""
    if not isinstance(f, (str, os.PathLike)):
        raise TypeError(f"save: f must be a file path (str or os.PathLike), got a "
                        f"{type(f).__name__}; nn's torch.save writes to paths only")
    arrays: dict[str, np.ndarray] = {}
    structure = json.dumps({"kind": _KIND, "obj": _encode(obj, "obj", arrays)})
    buffer = io.BytesIO()
    members: dict[str, Any] = {"__structure__": np.frombuffer(structure.encode(), np.uint8),
                               **arrays}
    np.savez(buffer, **members)
    write_atomic(f, lambda out: out.write(buffer.getvalue()), what="state file")


def load(f: str | os.PathLike[str], map_location: Any = None, weights_only: bool = True
         ) -> Any:
    """Read what ``save`` wrote. ``map_location`` may only be None or "cpu";
    ``weights_only=False`` (unpickling arbitrary objects) is refused."""
    if map_location not in (None, "cpu"):
        raise ValueError(f"load: map_location={map_location!r}; nn tensors live on the CPU "
                         "(pass None or 'cpu')")
    if weights_only is not True:
        raise ValueError("load: weights_only=False would unpickle arbitrary objects; nn's "
                         "files hold state dicts only, read with weights_only=True")
    try:
        with np.load(f, allow_pickle=False) as archive:
            raw = bytes(archive["__structure__"])
            structure = json.loads(raw.decode())
            if structure.get("kind") != _KIND:
                raise ValueError
            return _decode(structure["obj"], archive)
    except (ValueError, KeyError, OSError) as err:
        if isinstance(err, FileNotFoundError):
            raise
        raise ValueError(f"load: {os.fspath(f)!r} is not a state file written by nn's "
                         f"torch.save ({type(err).__name__}: {err})") from None


__all__ = ["load", "save"]
