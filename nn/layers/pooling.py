"""Pooling layers (Keras face, channels-last): MaxPooling2D, AveragePooling2D,
GlobalAveragePooling2D.

Numerics: average windows are gathered exactly (nn.functions.conv.patches); max pooling reads
them as strided views (nn.functions.pooling.max_pool2d, the same results without the copy).
The maximum is exact; its gradient goes to the window's maximum (shared equally between tied
maxima, where TensorFlow and PyTorch pick one). Averages are summed in fp32 and rounded once
to the compute format; with ``padding="same"`` an average counts only the real (unpadded)
cells, as TensorFlow does. Max pooling pads with -inf, so padding never wins.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from nn import functions as F
from nn.engine.tensor import Tensor
from nn.functions._common import constant
from nn.functions.conv import PADDINGS, pair, patches
from nn.functions.pooling import max_pool2d
from nn.layers.base import Layer, register
from nn.layers.conv import keras_name, unsupported
from nn.precision.policy import Policy


class _Pooling2D(Layer):
    """Shared arguments: ``pool_size``, ``strides`` (default: ``pool_size``), ``padding``."""

    def __init__(self, pool_size: int | tuple[int, int] = (2, 2),
                 strides: int | tuple[int, int] | None = None, padding: str = "valid",
                 data_format: str | None = None, dtype: Policy | str | None = None,
                 name: str | None = None) -> None:
        cls = type(self).__name__
        base = re.sub(r"(?<!^)(?=[A-Z])", "_", cls[:-2]).lower() + "2d"
        super().__init__(name=keras_name(name, base), dtype=dtype)
        self.pool_size = pair(f"{cls}: pool_size", pool_size)
        self.strides = self.pool_size if strides is None else pair(f"{cls}: strides", strides)
        if not (isinstance(padding, str) and padding.lower() in PADDINGS):  # Keras: any case
            raise ValueError(f"{cls}: padding must be one of {PADDINGS}, got {padding!r}")
        self.padding = padding.lower()
        unsupported(cls, "data_format", data_format, (None, "channels_last"),
                    "nn's pooling layers are channels-last")

    def check_input(self, x: Tensor) -> None:
        if x.ndim != 4:
            raise ValueError(f"layer '{self.name}' expects input of shape (batch, height, width, "
                             f"channels), got shape {x.shape}")

    def windows(self, x: Tensor, fill: float = 0.0) -> Tensor:
        return patches(x, self.pool_size, self.strides, self.padding, fill=fill)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "pool_size": list(self.pool_size),
                "strides": list(self.strides), "padding": self.padding}


@register
class MaxPooling2D(_Pooling2D):
    """The maximum of each ``pool_size`` window (exact)."""

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        y = max_pool2d(x, self.pool_size, self.strides, self.padding)
        return F.cast(y, self.compute_format)


@register
class AveragePooling2D(_Pooling2D):
    """The mean of each window's real cells, summed in fp32, rounded once."""

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        w = self.windows(x)
        if self.padding == "valid":
            return F.cast(F.mean(w, axis=(3, 4)), self.compute_format)
        ones = Tensor._make(np.ones((1, *x.shape[1:3], 1), dtype=x.data.dtype), x.fmt)
        counts = F.sum(self.windows(ones), axis=(3, 4))
        total = F.sum(w, axis=(3, 4))
        return F.cast(total / constant(counts.data, total), self.compute_format)


@register
class GlobalAveragePooling2D(Layer):
    """(batch, h, w, c) -> (batch, c) (or (batch, 1, 1, c) with ``keepdims``): the mean over
    the pixels, in fp32, rounded once."""

    def __init__(self, data_format: str | None = None, keepdims: bool = False,
                 dtype: Policy | str | None = None, name: str | None = None) -> None:
        super().__init__(name=keras_name(name, "global_average_pooling2d"), dtype=dtype)
        unsupported(type(self).__name__, "data_format", data_format, (None, "channels_last"),
                    "nn's pooling layers are channels-last")
        if not isinstance(keepdims, (bool, np.bool_)):
            raise TypeError(f"GlobalAveragePooling2D: keepdims must be True or False, got "
                            f"{keepdims!r}")
        self.keepdims = bool(keepdims)

    def check_input(self, x: Tensor) -> None:
        if x.ndim != 4:
            raise ValueError(f"layer '{self.name}' expects input of shape (batch, height, width, "
                             f"channels), got shape {x.shape}")

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        return F.cast(F.mean(x, axis=(1, 2), keepdims=self.keepdims), self.compute_format)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "keepdims": self.keepdims}
