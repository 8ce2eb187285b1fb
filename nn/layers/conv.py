"""Convolution layers: ``Conv2D`` (Keras face, channels-last) and ``Conv2d`` (PyTorch face, NCHW).

Numerics (as Dense): the input windows (im2col, exact) and the kernel in the compute format,
products and bias accumulated in fp32, one rounding to the compute format (relu fused into
it); ``accumulator="float16"`` (any format name, or an ``fpsim.accumulators`` model or preset
name) accumulates that way instead, to show swamping. The gradients of input and kernel are
products of the same kind; the input's gradient sums the overlapping windows in fp32 and is
rounded once to the input's format.
Padding "same" follows TensorFlow (the odd pixel at the bottom/right).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from nn import functions as F
from nn.engine import checks
from nn.engine.tensor import Tensor, Variable
from nn.functions.accumulate import accumulator_format, accumulator_name
from nn.functions.conv import PADDINGS, conv2d, conv_output_shape, pair
from nn.layers.base import Layer, _unique_name, register
from nn.layers.initializers import activation_name, get_activation, get_initializer
from nn.precision.policy import Policy


def keras_name(name: str | None, base: str) -> str | None:
    """``name``, or for None a unique name from Keras's spelling (``conv2d``, not the
    ``conv2_d`` the class-name rule would give)."""
    return name if name is not None else _unique_name(base)


def unsupported(layer: str, name: str, value: Any, allowed: tuple[Any, ...], hint: str) -> None:
    """Raise for a framework argument value nn does not support, naming the nn spelling."""
    if value not in allowed:
        raise ValueError(f"{layer}: {name}={value!r} is not supported ({hint})")


@register
class Conv2D(Layer):
    """2-D convolution over ``(batch, height, width, channels)`` with a kernel of shape
    ``(kh, kw, in_channels, filters)`` and a bias of shape ``(filters,)`` (Keras).

    >>> Conv2D(8, 3, padding="same")(np.ones((2, 5, 5, 1), np.float32)).shape
    (2, 5, 5, 8)
    """

    def __init__(
        self, filters: int, kernel_size: int | tuple[int, int], strides: int | tuple[int, int]
        = (1, 1), padding: str = "valid", data_format: str | None = None,
        dilation_rate: int | tuple[int, int] = (1, 1), groups: int = 1,
        activation: str | Callable | None = None, use_bias: bool = True,
        kernel_initializer: str | Callable = "glorot_uniform",
        bias_initializer: str | Callable = "zeros", accumulator: str | None = None,
        dtype: Policy | str | None = None, name: str | None = None, seed: int | None = None,
    ) -> None:
        super().__init__(name=keras_name(name, type(self).__name__.lower()), dtype=dtype)
        cls = type(self).__name__
        self.filters = checks.count(f"{cls}: filters", filters, minimum=1)
        self.kernel_size = pair(f"{cls}: kernel_size", kernel_size)
        self.strides = pair(f"{cls}: strides", strides)
        self.padding = self._check_padding(padding)
        unsupported(cls, "data_format", data_format, (None, "channels_last"),
                    "nn's Conv2D is channels-last; for NCHW use nn.layers.Conv2d")
        unsupported(cls, "dilation_rate", pair(f"{cls}: dilation_rate", dilation_rate), ((1, 1),),
                    "only dilation_rate=1")
        unsupported(cls, "groups", groups, (1,), "only groups=1")
        if not isinstance(use_bias, (bool, np.bool_)):
            raise TypeError(f"{cls}: use_bias must be True or False, got {use_bias!r}")
        self.use_bias = bool(use_bias)
        self.activation_name = activation
        self.activation = get_activation(activation)
        self.kernel_initializer = get_initializer(kernel_initializer)
        self.bias_initializer = get_initializer(bias_initializer)
        self.accumulator = accumulator_format(accumulator, f"{cls}: accumulator")
        self.seed = checks.seed(f"{cls}: seed", seed)
        self._rng = np.random.default_rng(seed) if seed is not None else None
        self.kernel: Variable | None = None
        self.bias: Variable | None = None

    def _check_padding(self, padding: Any) -> str | int:
        if isinstance(padding, str) and padding.lower() in PADDINGS:  # Keras: any case
            return padding.lower()
        raise ValueError(f"{type(self).__name__}: padding must be one of {PADDINGS}, got "
                         f"{padding!r}")

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        if len(input_shape) != 4 or input_shape[-1] is None:
            raise ValueError(f"layer '{self.name}' expects input of shape (batch, height, width, "
                             f"channels), got shape {input_shape}")
        self.input_channels = int(input_shape[-1])
        shape = (*self.kernel_size, self.input_channels, self.filters)
        self.kernel = self.add_weight("kernel", shape, self.kernel_initializer, rng=self._rng)
        if self.use_bias:
            self.bias = self.add_weight("bias", (self.filters,), self.bias_initializer,
                                        rng=self._rng)

    def check_input(self, x: Tensor) -> None:
        if x.ndim != 4 or x.shape[-1] != self.input_channels:
            raise ValueError(f"layer '{self.name}' expects input of shape (batch, height, width, "
                             f"{self.input_channels}), got shape {x.shape}")

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        assert self.kernel is not None  # built by __call__
        fused = "relu" if self.activation is F.relu else None
        b = self.read(self.bias) if self.bias is not None else None
        y = conv2d(x, self.read(self.kernel), b, self.strides, self.padding, activation=fused,
                   accumulator=self.accumulator)
        if self.activation is not None and fused is None:
            y = self.activation(y)
        return y

    def compute_output_shape(self, input_shape: tuple[int | None, ...]) -> tuple[int | None, ...]:
        return conv_output_shape(input_shape, self.kernel_size, self.strides, self.padding,
                                 self.filters)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "filters": self.filters,
                "kernel_size": list(self.kernel_size), "strides": list(self.strides),
                "padding": self.padding, "activation": activation_name(self.activation_name),
                "use_bias": self.use_bias, "accumulator": accumulator_name(self.accumulator),
                "seed": self.seed}


@register
class Conv2d(Conv2D):
    """PyTorch face: ``Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0)`` on
    NCHW input, a thin wrapper over Conv2D (the same op, transposed in and out).

    ``padding`` is an int (both sides), "valid" or "same". The weights are PyTorch's, made at
    construction (``in_channels`` is known): ``weight`` of shape ``(out, in, kh, kw)`` and
    ``bias`` ``(out,)``, uniform in +-1/sqrt(in_channels * kh * kw) (PyTorch's default), under
    the state-dict keys ``"weight"`` and ``"bias"``, so a torch ``Conv2d``'s ``state_dict()``
    loads as it is, and ours into torch. The call reads the weight transposed to Conv2D's
    ``(kh, kw, in, out)`` (exact); ``in_channels`` is checked against the input.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, int],
                 stride: int | tuple[int, int] = 1, padding: int | str = 0, bias: bool = True,
                 accumulator: str | None = None, dtype: Policy | str | None = None,
                 name: str | None = None, seed: int | None = None) -> None:
        super().__init__(out_channels, kernel_size, strides=stride, padding="valid",
                         use_bias=bias, accumulator=accumulator, dtype=dtype, name=name,
                         seed=seed)
        self.in_channels = checks.count("Conv2d: in_channels", in_channels, minimum=1)
        if isinstance(padding, (int, np.integer)) and not isinstance(padding, bool) \
                and padding >= 0:
            self.padding = int(padding)
        elif padding in PADDINGS:
            self.padding = str(padding)
        else:
            raise ValueError(f"Conv2d: padding must be an integer >= 0, 'valid' or 'same', got "
                             f"{padding!r}")
        kh, kw = self.kernel_size
        bound = 1.0 / math.sqrt(self.in_channels * kh * kw)
        self.kernel_initializer = self.bias_initializer = (
            lambda shape, rng: rng.uniform(-bound, bound, shape))
        self.weight: Variable = self.add_weight(
            "weight", (self.filters, self.in_channels, kh, kw), self.kernel_initializer,
            rng=self._rng)
        if self.use_bias:
            self.bias = self.add_weight("bias", (self.filters,), self.bias_initializer,
                                        rng=self._rng)
        self._build_once((None, self.in_channels, None, None))

    def _nhwc(self, x: Tensor) -> Tensor:
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"layer '{self.name}' expects input of shape (batch, "
                             f"{self.in_channels}, height, width) (NCHW), got shape {x.shape}")
        return F.transpose(x, (0, 2, 3, 1))

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        if len(input_shape) != 4 or input_shape[1] != self.in_channels:
            raise ValueError(f"layer '{self.name}' expects input of shape (batch, "
                             f"{self.in_channels}, height, width) (NCHW), got shape {input_shape}")
        self.input_channels = self.in_channels  # the weights exist from the constructor

    def check_input(self, x: Tensor) -> None:
        self._nhwc(x)

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        kernel = F.transpose(self.read(self.weight), (2, 3, 1, 0))  # (kh, kw, in, out)
        fused = "relu" if self.activation is F.relu else None
        b = self.read(self.bias) if self.bias is not None else None
        y = conv2d(self._nhwc(x), kernel, b, self.strides, self.padding, activation=fused,
                   accumulator=self.accumulator)
        return F.transpose(y, (0, 3, 1, 2))

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.policy.name, "in_channels": self.in_channels,
                "out_channels": self.filters, "kernel_size": list(self.kernel_size),
                "stride": list(self.strides), "padding": self.padding, "bias": self.use_bias,
                "accumulator": accumulator_name(self.accumulator), "seed": self.seed}
