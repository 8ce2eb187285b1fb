"""PyTorch's names over nn: ``import nn.faces.torch as torch`` ports a script by its import line.

Covered (names, argument order, defaults and meaning are PyTorch's; the arithmetic is nn's, so
every op rounds to its emulated format):

- ops: ``torch.relu``, ``exp``, ``log``, ``sqrt``, ``tanh``, ``sigmoid``, ``matmul``;
- tensors: ``torch.tensor``, ``zeros``, ``ones``, ``randn``, ``manual_seed``, ``Tensor``, the
  dtypes ``float16``/``half``, ``bfloat16``, ``float32``/``float``, ``float64``/``double``;
  ``no_grad``, ``enable_grad``, ``is_grad_enabled``; ``save``/``load`` (state dicts);
- ``torch.nn``: ``Module``, ``Linear``, ``Conv2d``, ``LayerNorm``, ``ReLU``, ``Sequential``,
  ``CrossEntropyLoss``, ``MSELoss``, ``functional``, ``utils.clip_grad_norm_``;
- ``torch.optim``: ``SGD``, ``Adam`` (param groups, ``add_param_group``),
  ``lr_scheduler.{StepLR, LambdaLR, CosineAnnealingLR}`` (``last_epoch=``);
- ``torch.amp``: ``GradScaler``, ``autocast``, ``custom_fwd``, ``custom_bwd``;
  ``torch.autocast``, ``is_autocast_enabled``;
- ``torch.autograd``: ``grad`` (several outputs, ``grad_outputs``, ``allow_unused``,
  ``create_graph``, ``retain_graph``), ``backward``, ``Function`` (``ctx.save_for_backward``,
  ``ctx.mark_non_differentiable``);
- tensor methods: ``size()`` / ``size(dim)`` (the shape; ``x.size`` uncalled stays nn's element
  count), ``dim()``, ``numel()``, ``pow``, ``mm``, ``t()``, ``to(dtype)``, ``half()``, ...

Not PyTorch: tensors have no device (``.cuda()``/``.to("cuda")`` raise; ``autocast("cuda")``
and ``GradScaler("cuda")`` follow CUDA's rules, emulated on the CPU); ``randn`` draws from
numpy's generator, not torch's. An idiom outside this list raises AttributeError naming the
face (``torch.fft`` is not covered) rather than running with another meaning. See
docs/from-pytorch.md.
"""

from __future__ import annotations

from typing import Any

from nn.engine.autograd import enable_grad, is_grad_enabled, no_grad
from nn.faces.torch import amp, autograd, nn, optim
from nn.faces.torch.ops import exp, log, matmul, relu, sigmoid, sqrt, tanh
from nn.faces.torch.serialization import load, save
from nn.faces.torch.tensors import (
    Tensor,
    bfloat16,
    double,
    dtype,
    float,
    float16,
    float32,
    float64,
    half,
    manual_seed,
    ones,
    randn,
    tensor,
    zeros,
)
from nn.precision.autocast import autocast, is_autocast_enabled

__all__ = [
    "Tensor", "amp", "autocast", "autograd", "bfloat16", "double", "dtype", "enable_grad",
    "exp", "float", "float16", "float32", "float64", "half", "is_autocast_enabled",
    "is_grad_enabled", "load", "log", "manual_seed", "matmul", "nn", "no_grad", "ones", "optim",
    "randn", "relu", "save", "sigmoid", "sqrt", "tanh", "tensor", "zeros",
]


def __getattr__(name: str) -> Any:
    raise AttributeError(f"nn.faces.torch has no {name!r}: the PyTorch face covers "
                         f"{', '.join(sorted(__all__))} (see its docstring and "
                         "docs/from-pytorch.md)")
