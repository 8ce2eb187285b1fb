"""``keras.layers``: nn's layers under Keras 3's names, with Keras 3's policy rules and
Keras 3's ``Dense``.

Every layer here derives from this face's ``Layer`` (``nn.faces.keras.base_layer``: the one
home of the rules): its ``dtype_policy`` is a ``keras.DTypePolicy`` (never equal to a
string), a ``DTypePolicyMap`` is looked up by the layer's ``path``, names are Keras's
("conv2d"). Besides that, every name but ``Dense`` and ``Conv2D`` computes as nn's own
layer (``nn.layers``), which already follows Keras (names, argument order, channels-last).
``Dense`` and ``Conv2D`` here round as Keras 3 does:

- ``keras.layers.Dense``: ``y = x @ kernel`` rounded to the compute format, then ``y + bias``
  rounded again (two roundings, Keras 3's ``ops.matmul`` then ``ops.add``), then the
  activation; ``keras.layers.Conv2D`` the same with the convolution (``BaseConv.call``);
- ``nn.Dense`` and ``nn.Conv2D``: the products and the bias summed in fp32 and rounded once (a
  GPU's fused bias epilogue).

Under "mixed_float16" the two differ by one fp16 ulp on some outputs; under "float32" they
agree. ``Dense.quantize("float8")`` (or ``dtype="float8_from_<policy>"``) switches the layer
to Keras 3's float8 training, its steps and roundings (``nn.faces.keras.float8``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fpsim import BF16, FP32
from nn import functions as F
from nn import layers as _nn
from nn.engine.registry import LAYERS
from nn.engine.tensor import Tensor, Variable
from nn.faces.keras.base_layer import Layer
from nn.faces.keras.dtype_policies import (
    DTypePolicy,
    QuantizedFloat8DTypePolicy,
    deserialize,
    get,
    serialize,
)
from nn.faces.keras.float8 import (
    QuantizeDequantizeInputs,
    QuantizeDequantizeOutputsGrad,
    float8_variables,
)
from nn.functions.conv import conv2d
from nn.layers.symbolic import SymbolicTensor

_UNSUPPORTED = ("kernel_regularizer", "bias_regularizer", "activity_regularizer",
                "kernel_constraint", "bias_constraint", "lora_rank")


@LAYERS.register
class KerasDense(Layer, _nn.Dense):
    """Keras 3's ``Dense(units, activation=None, use_bias=True,
    kernel_initializer="glorot_uniform", bias_initializer="zeros", ...)``.

    Numerics (Keras 3's): x and kernel in the compute format, products summed in fp32 and
    rounded to the compute format; the bias added in a second op, rounded again; then the
    activation. Under a ``QuantizedFloat8DTypePolicy`` the matmul is Keras 3's float8 one
    (``nn.faces.keras.float8``): the layer then also holds Keras's six float32 scaling
    variables (``inputs_scale``, ``inputs_amax_history``, ``kernel_scale``, ...). Regularizers,
    constraints and LoRA are not emulated: a non-None value raises.
    The class is registered as ``KerasDense`` (its checkpoint name); layers are named
    "dense", "dense_1", ... as Keras names them.
    """

    supports_quantization = ("float8",)
    # Keras's float8 scaling state (float32), there once quantize("float8") or a float8 policy
    inputs_scale: Variable
    inputs_amax_history: Variable
    kernel_scale: Variable
    kernel_amax_history: Variable
    outputs_grad_scale: Variable
    outputs_grad_amax_history: Variable

    def __init__(self, units: int, activation: str | Callable | None = None,
                 use_bias: bool = True, kernel_initializer: str | Callable = "glorot_uniform",
                 bias_initializer: str | Callable = "zeros", kernel_regularizer: Any = None,
                 bias_regularizer: Any = None, activity_regularizer: Any = None,
                 kernel_constraint: Any = None, bias_constraint: Any = None,
                 lora_rank: int | None = None, *, dtype: Any = None, name: str | None = None,
                 **kwargs: Any) -> None:
        given = dict(zip(_UNSUPPORTED, (kernel_regularizer, bias_regularizer,
                                        activity_regularizer, kernel_constraint,
                                        bias_constraint, lora_rank), strict=True))
        for arg, value in given.items():
            if value is not None:
                raise ValueError(f"Dense: {arg}={value!r} is not emulated by nn; add a penalty "
                                 "to the loss yourself, or leave it None")
        if isinstance(dtype, str) or dtype is None:
            dtype = get(dtype)  # Keras 3: the layer holds a DTypePolicy
        super().__init__(units, activation, use_bias, kernel_initializer, bias_initializer,
                         dtype=dtype, name=name, **kwargs)

    @property
    def _float8(self) -> bool:
        return getattr(self.policy, "quantization_mode", None) == "float8"

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        super().build(input_shape)
        if self._float8:  # after kernel and bias, as quantize() adds them (checkpoint order)
            self._add_float8_variables()

    def _add_float8_variables(self) -> None:
        length = getattr(self.policy, "amax_history_length",
                         QuantizedFloat8DTypePolicy.default_amax_history_length)
        for key, var in float8_variables(self, length).items():
            var.trainable = var.requires_grad = self.trainable
            self._weights.append(var)
            self._weight_keys[id(var)] = key
            setattr(self, key, var)

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        assert self.kernel is not None  # built by __call__
        lead = x.shape[:-1]
        x2 = x if x.ndim == 2 else F.reshape(x, (-1, self.input_dim))
        if self._float8:
            y = self._float8_matmul(x2, training)
        else:
            y = F.linear(x2, self.read(self.kernel))  # rounding 1: the matmul
        if self.bias is not None:
            bias = self.read(self.bias)
            if self._float8 and self.compute_dtype == "float32":
                bias = F.cast(F.cast(bias, BF16), FP32)  # Keras: bf16 first (bias-add fusion)
            y = y + bias  # rounding 2: the bias add
        if self.activation is not None:
            y = self.activation(y)
        return y if x.ndim == 2 else F.reshape(y, (*lead, self.units))

    def _float8_matmul(self, x: Tensor, training: bool) -> Tensor:
        """Keras's ``_float8_call`` up to the bias: inputs and kernel quantized-dequantized
        (E4M3), their matmul, the output's gradient quantized-dequantized (E5M2)."""
        qdq = QuantizeDequantizeInputs.apply
        xq = qdq(x, self.inputs_scale, self.inputs_amax_history, training=training)
        assert self.kernel is not None  # built by __call__
        kq = qdq(self.read(self.kernel), self.kernel_scale, self.kernel_amax_history,
                 training=training)
        y = F.linear(xq, kq)
        return QuantizeDequantizeOutputsGrad.apply(y, self.outputs_grad_scale,
                                                  self.outputs_grad_amax_history)

    def quantize(self, mode: str, type_check: bool = True, config: Any = None) -> None:
        """Keras 3's ``layer.quantize("float8")``: float8 training of this layer's matmul
        (``QuantizedFloat8DTypePolicy("float8", <its policy>)``, amax history 1024; Keras's
        six scaling variables join the layer's weights after kernel and bias). Other modes, a
        ``config`` and an unbuilt layer raise."""
        if mode not in self.supports_quantization:
            raise ValueError(f"Dense.quantize: mode {mode!r} is not emulated by nn; float8 "
                             "training is quantize('float8'), other narrow formats are "
                             "nn.fp8's recipe policies (e.g. dtype='mxfp8')")
        if config is not None:
            raise ValueError("Dense.quantize: config= is not supported by nn; float8 "
                             "training uses QuantizedFloat8DTypePolicy's delayed scaling")
        if not self.built:
            raise ValueError(f"Cannot quantize layer '{self.name}': it isn't built yet; call "
                             "it on a batch (nn layers build on their first call) or "
                             "build(input_shape) first")
        if self.policy.recipe is not None or self.policy.quantization_mode is not None:
            raise ValueError(f"Dense.quantize: layer '{self.name}' already runs under "
                             f"{self.policy.name!r}")
        self.dtype_policy = QuantizedFloat8DTypePolicy(mode, self.policy.name)

    def _quantized_by_policy(self) -> None:
        if "inputs_scale" not in self.__dict__:
            self._add_float8_variables()

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        if isinstance(self.policy, DTypePolicy) and self.policy.quantization_mode is not None:
            config["dtype"] = serialize(self.policy)
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> KerasDense:
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = deserialize(config["dtype"])
        return cls(**config)


Dense = KerasDense


# nn's other layers with Keras 3's policy rules (``Layer``): one subclass each, registered
# under its own name for checkpoints, exported under Keras's
@LAYERS.register
class KerasActivation(Layer, _nn.Activation):
    """Keras 3's ``Activation``: ``nn.layers.Activation`` with Keras's policies."""


@LAYERS.register
class KerasAdd(Layer, _nn.Add):
    """Keras 3's ``Add``: ``nn.layers.Add`` with Keras's policies."""


@LAYERS.register
class KerasAveragePooling2D(Layer, _nn.AveragePooling2D):
    """Keras 3's ``AveragePooling2D``: ``nn.layers.AveragePooling2D`` with Keras's policies."""


@LAYERS.register
class KerasBatchNormalization(Layer, _nn.BatchNormalization):
    """Keras 3's ``BatchNormalization``: ``nn.layers.BatchNormalization`` with Keras's
    policies."""


@LAYERS.register
class KerasConv2D(Layer, _nn.Conv2D):
    """Keras 3's ``Conv2D``: ``nn.layers.Conv2D`` with Keras's policies, rounding as Keras 3's
    ``BaseConv.call``: the convolution rounded to the compute format, then the bias added in a
    second op, rounded again, then the activation (``nn.Conv2D`` adds the bias inside the
    convolution's fp32 sum and rounds once, as a GPU's fused epilogue does)."""

    def call(self, x: Tensor, training: bool = False) -> Tensor:
        assert self.kernel is not None  # built by __call__
        y = conv2d(x, self.read(self.kernel), None, self.strides, self.padding,
                   accumulator=self.accumulator)  # rounding 1: the convolution
        if self.bias is not None:
            y = y + self.read(self.bias)  # rounding 2: the bias add
        return y if self.activation is None else self.activation(y)


@LAYERS.register
class KerasDropout(Layer, _nn.Dropout):
    """Keras 3's ``Dropout``: ``nn.layers.Dropout`` with Keras's policies."""


@LAYERS.register
class KerasEmbedding(Layer, _nn.Embedding):
    """Keras 3's ``Embedding``: ``nn.layers.Embedding`` with Keras's policies."""


@LAYERS.register
class KerasFlatten(Layer, _nn.Flatten):
    """Keras 3's ``Flatten``: ``nn.layers.Flatten`` with Keras's policies."""


@LAYERS.register
class KerasGlobalAveragePooling2D(Layer, _nn.GlobalAveragePooling2D):
    """Keras 3's ``GlobalAveragePooling2D``: ``nn.layers.GlobalAveragePooling2D`` with Keras's
    policies."""


@LAYERS.register
class KerasInputLayer(Layer, _nn.InputLayer):
    """Keras 3's ``InputLayer``: ``nn.layers.InputLayer`` with Keras's policies."""


@LAYERS.register
class KerasLayerNormalization(Layer, _nn.LayerNormalization):
    """Keras 3's ``LayerNormalization``: ``nn.layers.LayerNormalization`` with Keras's
    policies."""


@LAYERS.register
class KerasMaxPooling2D(Layer, _nn.MaxPooling2D):
    """Keras 3's ``MaxPooling2D``: ``nn.layers.MaxPooling2D`` with Keras's policies."""


@LAYERS.register
class KerasMultiHeadAttention(Layer, _nn.MultiHeadAttention):
    """Keras 3's ``MultiHeadAttention``: ``nn.layers.MultiHeadAttention`` with Keras's
    policies."""


@LAYERS.register
class KerasReLU(Layer, _nn.ReLU):
    """Keras 3's ``ReLU``: ``nn.layers.ReLU`` with Keras's policies."""


def Input(shape: Any = None, batch_size: int | None = None, dtype: str | None = None,  # noqa: N802
          sparse: Any = None, ragged: Any = None, batch_shape: Any = None,
          name: str | None = None, tensor: Any = None, optional: bool = False
          ) -> SymbolicTensor:
    """Keras 3's ``keras.Input(shape=None, batch_size=None, dtype=None, sparse=None,
    ragged=None, batch_shape=None, name=None, tensor=None, optional=False)``: Keras's argument
    order (``nn.Input`` has ``name`` before ``dtype``), a ``keras.layers.InputLayer`` behind
    it ("input_layer", with a Keras ``DTypePolicy``). ``sparse``, ``ragged``, ``tensor`` and
    ``optional`` are not emulated: a value other than their default raises."""
    given = {"sparse": sparse, "ragged": ragged, "tensor": tensor,
             "optional": optional or None}
    for arg, value in given.items():
        if value is not None:
            raise ValueError(f"Input: {arg}={value!r} is not emulated by nn; nn's inputs are "
                             "dense float tensors")
    if batch_shape is not None:
        if shape is not None or batch_size is not None:
            raise ValueError("Input: pass either shape (and batch_size) or batch_shape, "
                             f"got shape={shape!r}, batch_size={batch_size!r}, "
                             f"batch_shape={batch_shape!r}")
        batch_size, shape = batch_shape[0], tuple(batch_shape[1:])
    if shape is None:
        raise ValueError("Input: shape (or batch_shape) is required, e.g. "
                         "keras.Input(shape=(784,))")
    layer = KerasInputLayer(shape, batch_size=batch_size, dtype=dtype, name=name)
    return layer.output


Activation, Add, AveragePooling2D = KerasActivation, KerasAdd, KerasAveragePooling2D
BatchNormalization, Conv2D, Dropout = KerasBatchNormalization, KerasConv2D, KerasDropout
Embedding, Flatten = KerasEmbedding, KerasFlatten
GlobalAveragePooling2D, InputLayer = KerasGlobalAveragePooling2D, KerasInputLayer
LayerNormalization, MaxPooling2D = KerasLayerNormalization, KerasMaxPooling2D
MultiHeadAttention, ReLU = KerasMultiHeadAttention, KerasReLU

__all__ = [
    "Activation", "Add", "AveragePooling2D", "BatchNormalization", "Conv2D", "Dense",
    "Dropout", "Embedding", "Flatten", "GlobalAveragePooling2D", "Input", "InputLayer", "Layer",
    "LayerNormalization", "MaxPooling2D", "MultiHeadAttention", "ReLU",
]
