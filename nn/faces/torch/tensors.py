"""``torch.tensor`` and friends, and PyTorch's dtype names, over ``nn.Tensor``.

A dtype is an ``nn.DType`` (``torch.float16 == x.dtype`` for an fp16 tensor); a tensor made
here is an ``nn.Tensor`` whose values are rounded to its dtype (nearest-even). ``randn`` draws
from nn's seeded numpy generator (``manual_seed``), so its numbers are not torch's.
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from nn.engine import random as _random
from nn.engine.dtypes import DType
from nn.engine.tensor import Tensor

dtype = DType
float16 = half = DType.of("float16")
bfloat16 = DType.of("bfloat16")
float32 = float = DType.of("float32")  # noqa: A001 (PyTorch's name)
float64 = double = DType.of("float64")


def _dtype(value: Any) -> Any:
    """``value`` (a DType, a name or None) as the ``fmt`` of nn.Tensor ("auto" for None)."""
    if value is None:
        return "auto"
    if isinstance(value, (DType, builtins.str)):
        return value
    raise TypeError(f"dtype must be a torch dtype such as torch.float16 (or a format name), "
                    f"got {value!r}")


def _check_device(device: Any) -> None:
    if device is not None and not (isinstance(device, builtins.str) and device.split(":")[0]
                                   == "cpu"):
        raise ValueError(f"device={device!r}: nn tensors live on the CPU (every format is "
                         "emulated there); leave device out or pass 'cpu'")


def tensor(data: Any, dtype: Any = None, device: Any = None,
           requires_grad: builtins.bool = False) -> Tensor:
    """A new tensor holding ``data`` rounded to ``dtype`` (default float32)."""
    _check_device(device)
    if isinstance(data, Tensor):
        data = data.data
    return Tensor(data, fmt=_dtype(dtype), requires_grad=requires_grad)


def _shape(size: tuple[Any, ...]) -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    return tuple(int(n) for n in size)


def zeros(*size: Any, dtype: Any = None, device: Any = None,
          requires_grad: builtins.bool = False) -> Tensor:
    """A tensor of zeros of shape ``size``."""
    _check_device(device)
    return Tensor(np.zeros(_shape(size)), fmt=_dtype(dtype), requires_grad=requires_grad)


def ones(*size: Any, dtype: Any = None, device: Any = None,
         requires_grad: builtins.bool = False) -> Tensor:
    """A tensor of ones of shape ``size``."""
    _check_device(device)
    return Tensor(np.ones(_shape(size)), fmt=_dtype(dtype), requires_grad=requires_grad)


def randn(*size: Any, dtype: Any = None, device: Any = None,
          requires_grad: builtins.bool = False) -> Tensor:
    """Standard normal draws of shape ``size`` from nn's seeded generator (not torch's
    numbers), rounded to ``dtype``."""
    _check_device(device)
    values = _random.global_generator().standard_normal(_shape(size))
    return Tensor(values, fmt=_dtype(dtype), requires_grad=requires_grad)


def manual_seed(seed: int) -> None:
    """Seed nn's generator (weights' initialisation, ``randn``, dropout): ``nn.set_random_seed``."""
    _random.set_random_seed(seed)


__all__ = ["Tensor", "bfloat16", "double", "dtype", "float", "float16", "float32", "float64",
           "half", "manual_seed", "ones", "randn", "tensor", "zeros"]
