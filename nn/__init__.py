"""nn: a small autograd library whose every op rounds to its emulated fpsim format.

Tensors carry float32 data plus the ``fpsim.Format`` their values lie in; every op rounds its
output to its format and every gradient to the format of the tensor it belongs to. Layers
follow Keras dtype policies ("float32", "mixed_float16", "mixed_bfloat16", "float16", ...).

The public API, grouped below; where each part lives:

- ``nn.engine``: tensors, autograd, rounding, format algebra, sites, dtypes, registry, checks
- ``nn.functions``: one Function per op; ``nn.fp8``: recipes and quantized matmuls
- ``nn.precision``: policies, autocast, loss scaling (Keras's and PyTorch's scalers)
- ``nn.layers``, ``nn.models``: Layer and its one tree, the layers; Model, Sequential, Functional
- ``nn.training``, ``nn.saving``: the fit loop, History, GradientTape; checkpoints
- ``nn.optimizers``, ``nn.losses``, ``nn.metrics``, ``nn.datasets``, ``nn.utils``
- ``nn.faces``: framework names without another home (PyTorch's loss modules)
- ``nn.experiments``, ``nn.plot``, ``nn.cli``: the course's experiments, pictures, commands
"""

import sys as _sys

from fpsim._version import __version__  # one home: the distribution's metadata (it ships nn)
from nn import datasets, fp8, functions, layers, losses, metrics, optimizers, utils

# --- engine ---------------------------------------------------------------------------------
from nn.engine import dtypes, memory, registry
from nn.engine.autograd import Function, is_grad_enabled, no_grad
from nn.engine.dtypes import DType
from nn.engine.tensor import Tensor, Variable

# --- faces: PyTorch's names ---------------------------------------------------------------
from nn.faces.torch_losses import CrossEntropyLoss, MSELoss
from nn.fp8 import fp8_autocast

# --- layers (Keras's names, PyTorch's Linear / Conv2d / LayerNorm beside them) -------------
from nn.layers import (
    Activation,
    AveragePooling2D,
    BatchNormalization,
    Conv2D,
    Conv2d,
    Dense,
    Dropout,
    Embedding,
    Flatten,
    GlobalAveragePooling2D,
    Input,
    Layer,
    LayerNorm,
    LayerNormalization,
    Linear,
    MaxPooling2D,
    MultiHeadAttention,
    ReLU,
    Sequential,
    set_random_seed,
)

# --- models, training, saving ----------------------------------------------------------------
from nn.models.model import Model, WeightedLoss
from nn.optimizers import SGD, Adam, RMSprop

# --- precision: policies and autocast; loss scaling (Keras's and PyTorch's faces) ----------
from nn.precision import mixed_precision
from nn.precision.autocast import autocast
from nn.precision.grad_scaler import GradScaler
from nn.precision.loss_scale import DynamicLossScale, LossScaleOptimizer
from nn.precision.policy import Policy, global_policy, policy_scope, set_global_policy
from nn.saving.checkpoint import load_model
from nn.training.gradient_tape import GradientTape
from nn.training.history import History

__all__ = [
    # engine
    "DType", "Function", "Tensor", "Variable", "dtypes", "is_grad_enabled", "no_grad",
    "registry",
    # precision
    "DynamicLossScale", "GradScaler", "LossScaleOptimizer", "Policy", "autocast",
    "global_policy", "mixed_precision", "policy_scope", "set_global_policy",
    # layers
    "Activation", "AveragePooling2D", "BatchNormalization", "Conv2D", "Conv2d", "Dense",
    "Dropout", "Embedding", "Flatten", "GlobalAveragePooling2D", "Input", "Layer", "LayerNorm",
    "LayerNormalization", "Linear", "MaxPooling2D", "MultiHeadAttention", "ReLU", "Sequential",
    "set_random_seed",
    # models, training, saving, optimizers, losses
    "SGD", "Adam", "CrossEntropyLoss", "GradientTape", "History", "MSELoss", "Model",
    "RMSprop", "WeightedLoss", "load_model",
    # fp8
    "fp8_autocast",
    # subpackages
    "datasets", "fp8", "functions", "layers", "losses", "metrics", "optimizers", "utils",
]

memory.apply_default()  # keep freed memory for the next step (nn.engine.memory)

# The modules users import by their old top-level names (Keras's ``keras.mixed_precision``
# spelling among them) are the same module objects under both names.
for _name, _module in (("mixed_precision", mixed_precision), ("registry", registry),
                       ("dtypes", dtypes)):
    _sys.modules.setdefault(f"nn.{_name}", _module)
del _name, _module
