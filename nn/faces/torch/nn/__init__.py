"""``torch.nn``: ``Module``, ``Linear``, ``Conv2d``, ``LayerNorm``, ``ReLU``, ``Sequential``,
``CrossEntropyLoss``, ``MSELoss``, ``functional`` and ``utils`` (``clip_grad_norm_``).

These are nn's own layers (``nn.Linear`` is PyTorch's ``Linear``: ``weight`` of shape
(out_features, in_features), ``state_dict`` keys ``"0.weight"``; ``Conv2d``'s ``weight`` is
PyTorch's (out, in, kh, kw), so torch's state dicts load as they are); ``Module`` is ``nn.Layer``,
whose subclasses write ``__init__`` + ``forward`` as in PyTorch. Parameters are fp32 master
weights; each op rounds to its format (inside ``autocast`` the eligible ops run low).
"""

from __future__ import annotations

from typing import Any

from nn.faces.torch.nn import functional, utils
from nn.faces.torch_losses import CrossEntropyLoss, MSELoss
from nn.layers import Conv2d, Layer, LayerNorm, Linear, ReLU, Sequential

Module = Layer

__all__ = ["Conv2d", "CrossEntropyLoss", "LayerNorm", "Linear", "MSELoss", "Module", "ReLU",
           "Sequential", "functional", "utils"]


def __getattr__(name: str) -> Any:
    raise AttributeError(f"nn.faces.torch.nn has no {name!r}: the face covers "
                         f"{', '.join(__all__)}; nn's other layers are nn.layers' (Keras names)")
