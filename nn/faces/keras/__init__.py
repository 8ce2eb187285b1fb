"""Keras 3's names over nn: ``from nn.faces import keras`` and a Keras 3 script runs with
Keras 3's names, argument order, defaults and semantics.

Covered: ``keras.layers`` (nn's layers; ``Dense`` rounds as Keras 3: matmul, then bias add),
``keras.Input``, ``keras.Model``, ``keras.Sequential``, ``keras.mixed_precision``,
``keras.config`` (``set_dtype_policy``, ``dtype_policy``), ``keras.DTypePolicy``,
``keras.dtype_policies`` (``DTypePolicy``, ``FloatDTypePolicy``, ``DTypePolicyMap``,
``QuantizedDTypePolicy``, ``QuantizedFloat8DTypePolicy``), ``keras.optimizers`` (SGD,
RMSprop, Adam, Keras 3's ``LossScaleOptimizer``, ``schedules``), ``keras.losses``,
``keras.metrics``.

``keras.Model`` and ``keras.Sequential`` are nn's (``Sequential`` runs its layers inside its
name scope, so their paths are Keras's: ``nn.faces.keras.models``); every layer of
``keras.layers`` holds Keras 3's policies (``nn.faces.keras.base_layer``: a ``DTypePolicy``
never equal to a string, a ``DTypePolicyMap`` looked up by the layer's path);
``compile(auto_scale_loss=True)`` wraps the
optimizer in Keras 3's ``LossScaleOptimizer`` when the model computes in float16 and its
layers hold this face's policies (``keras.config.set_dtype_policy``, ``dtype=`` strings of
``keras.layers.Dense``), as Keras 3 does. What the face does not emulate raises an error
naming nn's spelling. The top-level ``nn`` names stay tf.keras-flavoured.

>>> from nn.faces import keras
>>> keras.config.set_dtype_policy("mixed_float16")
>>> keras.layers.Dense(4).compute_dtype, keras.layers.Dense(4).variable_dtype
('float16', 'float32')
>>> keras.config.set_dtype_policy("float32")
"""

from typing import Any

from nn import losses, metrics
from nn.faces.keras import config, dtype_policies, layers, mixed_precision, optimizers
from nn.faces.keras.dtype_policies import DTypePolicy, FloatDTypePolicy
from nn.faces.keras.layers import Input
from nn.faces.keras.models import Model, Sequential

NOT_EMULATED = {  # Keras 3's other top-level names -> what nn offers instead
    "ops": "nn.functions (one Function per op) and nn.Tensor's methods",
    "backend": "nothing: nn is its own backend (numpy, every op rounded to its format)",
    "callbacks": "nothing yet: fit(callbacks=...) raises; read the returned nn.History",
    "random": "nn.set_random_seed and numpy Generators",
    "saving": "model.save(path) and nn.load_model(path)",
    "initializers": "initializer names as strings (nn.layers.INITIALIZERS)",
    "activations": "activation names as strings (activation='relu', 'gelu', ...)",
    "regularizers": "a penalty added to the loss yourself",
    "constraints": "nothing: nn has no weight constraints",
    "quantizers": "nn.faces.keras.float8 (Keras's float8 quantize_and_dequantize, "
                  "compute_float8_scale, compute_float8_amax_history, on numpy arrays) and "
                  "nn.fp8's recipes (DelayedScaling, CurrentScaling, BlockScaling)",
    "datasets": "nn.datasets (load_digits, mnist.load_data, Dataset)",
    "utils": "nn.utils",
}


def __getattr__(name: str) -> Any:
    hint = NOT_EMULATED.get(name)
    if hint is None:
        raise AttributeError(f"module 'nn.faces.keras' has no attribute {name!r}")
    raise AttributeError(f"keras.{name} is not part of nn's Keras 3 face; nn's spelling: {hint}")

__all__ = ["DTypePolicy", "FloatDTypePolicy", "Input", "Model", "Sequential", "config",
           "dtype_policies", "layers", "losses", "metrics", "mixed_precision", "optimizers"]
