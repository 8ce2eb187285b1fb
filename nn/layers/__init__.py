"""Keras-style layers under dtype policies: Layer, Dense, Activation, ReLU, Flatten, Dropout,
Sequential.

Every layer has a policy (``dtype=``: a Policy or policy name; default: the global policy when
the layer is created). Calling a layer casts its input to the policy's compute format (a Cast
op, so the gradient is cast back), creates the weights on the first call from the input's
shape, and reads each variable (stored in the variable format, e.g. fp32 master weights under
"mixed_float16") through a Cast into the compute format.

The package: ``base`` (Layer, the layer registry, serialize/deserialize), ``initializers``
(random generator, initializers, activations by name), ``core`` (the layers), ``sequential``,
``symbolic`` and ``functional`` (Keras's functional API: ``Input``, ``nn.Model(inputs=,
outputs=)``).
A new layer registers itself with ``@nn.layers.register``; ``names()`` lists the registered.

>>> with nn.policy_scope("mixed_float16"):
...     model = Sequential([Dense(64, activation="relu"), Dense(10),
...                         Activation("softmax", dtype="float32")])
>>> model(np.ones((2, 8), np.float32)).fmt.name   # the last layer computes in fp32
'float32'
"""

from __future__ import annotations

from nn.engine.registry import LAYERS
from nn.layers.attention import MultiHeadAttention
from nn.layers.base import Layer, deserialize, register, serialize
from nn.layers.blocks import TokenAndPositionEmbedding, TransformerBlock
from nn.layers.conv import Conv2D, Conv2d
from nn.layers.core import Activation, Dense, Dropout, Flatten, Linear, ReLU
from nn.layers.embedding import Embedding
from nn.layers.functional import Functional, Input, InputLayer
from nn.layers.initializers import (
    INITIALIZERS,
    get_activation,
    get_initializer,
    set_random_seed,
)
from nn.layers.merge import Add
from nn.layers.normalization import (
    BatchNormalization,
    LayerNorm,
    LayerNormalization,
)
from nn.layers.pooling import (
    AveragePooling2D,
    GlobalAveragePooling2D,
    MaxPooling2D,
)
from nn.layers.sequential import Sequential


def get(name: str) -> type[Layer]:
    """The layer class registered under ``name`` (e.g. "Dense")."""
    cls: type[Layer] = LAYERS.get_class(name)
    return cls


def names() -> list[str]:
    """The registered layer class names, sorted."""
    return LAYERS.names()


__all__ = [
    "INITIALIZERS", "Activation", "Dense", "Dropout", "Flatten", "Functional", "Input",
    "InputLayer", "Layer", "Linear", "ReLU", "Sequential",
    "deserialize", "get", "get_activation", "get_initializer", "names", "register", "serialize",
    "set_random_seed",
    "Add", "AveragePooling2D", "BatchNormalization", "Conv2D", "Conv2d", "Embedding",
    "GlobalAveragePooling2D", "LayerNorm", "LayerNormalization", "MaxPooling2D",
    "MultiHeadAttention", "TokenAndPositionEmbedding", "TransformerBlock",
]
