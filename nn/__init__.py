"""nn: a small autograd library whose every op rounds to its emulated fpsim format.

Tensors carry float32 data plus the ``fpsim.Format`` their values lie in; every op rounds its
output to its format and every gradient to the format of the tensor it belongs to. Layers
follow Keras dtype policies ("float32", "mixed_float16", "mixed_bfloat16", "float16", ...).
"""

from nn import functions, layers, losses, memory, metrics, registry
from nn.autograd import Function, is_grad_enabled, no_grad
from nn.layers import (
    Activation,
    Dense,
    Dropout,
    Flatten,
    Input,
    Layer,
    ReLU,
    Sequential,
    set_random_seed,
)
from nn.policy import Policy, global_policy, policy_scope, set_global_policy
from nn.tensor import Tensor, Variable

__all__ = [
    "Activation", "Dense", "Dropout", "Flatten", "Function", "Input", "Layer", "Policy", "ReLU",
    "Sequential", "Tensor", "Variable", "functions", "global_policy", "is_grad_enabled",
    "layers", "losses", "metrics", "no_grad", "registry", "policy_scope", "set_global_policy",
    "set_random_seed",
]

# --- training, optimizers, loss scaling, datasets: import lines below this marker ---
from nn import datasets, optimizers
from nn.grad_scaler import GradScaler
from nn.loss_scale import DynamicLossScale, LossScaleOptimizer
from nn.optimizers import SGD, Adam, RMSprop

__all__ += [
    "SGD", "Adam", "DynamicLossScale", "GradScaler", "LossScaleOptimizer", "RMSprop",
    "datasets", "optimizers",
]

# --- Model, History, checkpoints ---
from nn.checkpoint import load_model  # noqa: E402
from nn.history import History  # noqa: E402
from nn.model import Model, WeightedLoss  # noqa: E402

__all__ += ["History", "Model", "WeightedLoss", "load_model"]

# --- the PyTorch face: autocast, Linear, losses in PyTorch's order, utils ---
from nn import utils  # noqa: E402
from nn.autocast import autocast  # noqa: E402
from nn.layers import Linear  # noqa: E402
from nn.torch_losses import CrossEntropyLoss, MSELoss  # noqa: E402

__all__ += ["CrossEntropyLoss", "Linear", "MSELoss", "autocast", "utils"]

# --- Keras face: dtypes, mixed_precision, GradientTape ---
from nn import dtypes, mixed_precision  # noqa: E402
from nn.dtypes import DType  # noqa: E402
from nn.gradient_tape import GradientTape  # noqa: E402

__all__ += ["DType", "GradientTape", "dtypes", "mixed_precision"]

# --- convolution, pooling, normalization, embedding, attention, merge layers ---
from nn.layers import (  # noqa: E402
    AveragePooling2D,
    BatchNormalization,
    Conv2D,
    Conv2d,
    Embedding,
    GlobalAveragePooling2D,
    LayerNorm,
    LayerNormalization,
    MaxPooling2D,
    MultiHeadAttention,
)

__all__ += [
    "AveragePooling2D", "BatchNormalization", "Conv2D", "Conv2d", "Embedding",
    "GlobalAveragePooling2D", "LayerNorm", "LayerNormalization", "MaxPooling2D",
    "MultiHeadAttention",
]

# --- version: one home, the fpsim distribution's metadata (it ships nn too) ---
from fpsim._version import __version__  # noqa: E402

# --- fp8 and block-scaled training recipes ---
from nn import fp8  # noqa: E402
from nn.fp8 import fp8_autocast  # noqa: E402

__all__ += ["fp8", "fp8_autocast"]

memory.apply_default()  # keep freed memory for the next step (nn.memory; NN_RETAIN_FREED_MEMORY=0)
