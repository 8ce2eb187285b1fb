"""nn's ops: one ``Function`` subclass per op, forward and backward side by side, plus a
functional wrapper for each (``nn.functions.add(a, b)``, ``nn.functions.softmax(x)``, ...).

Importing this package registers the wrappers behind Tensor's operators (``a + b`` is
``add(a, b)``): Tensor sits below the ops and never imports them.
"""

from typing import Any

from nn.engine.autograd import backward as _backward
from nn.engine.tensor import register_ops
from nn.functions._common import autocast_fp32, autocast_lower
from nn.functions.accumulate import accumulated_linear, accumulated_matmul
from nn.functions.activations import (
    GELU,
    Dropout,
    LeakyReLU,
    LogSoftmax,
    ReLU,
    ReLUGrad,
    Sigmoid,
    Softmax,
    Tanh,
    dropout,
    gelu,
    leaky_relu,
    log_softmax,
    relu,
    relu_grad,
    sigmoid,
    softmax,
    tanh,
)
from nn.functions.attention import attention
from nn.functions.cast import Cast, cast
from nn.functions.conv import conv2d, patches
from nn.functions.elementwise import (
    Add,
    Clip,
    Div,
    Erf,
    Exp,
    Log,
    Mul,
    Neg,
    Pow,
    Sqrt,
    Sub,
    add,
    clip,
    div,
    erf,
    exp,
    log,
    mul,
    neg,
    pow,
    sqrt,
    sub,
)
from nn.functions.embedding import embedding
from nn.functions.linalg import Linear, MatMul, linear, matmul
from nn.functions.losses import SparseSoftmaxCrossEntropy, sparse_softmax_cross_entropy
from nn.functions.norm import layer_norm, moments, normalize
from nn.functions.pooling import max_pool2d
from nn.functions.reductions import Max, Mean, Sum, max, mean, sum
from nn.functions.shape import (
    BroadcastTo,
    GetItem,
    Reshape,
    Transpose,
    broadcast_to,
    getitem,
    reshape,
    transpose,
)
from nn.precision import autocast as _autocast

__all__ = [
    "GELU", "Add", "BroadcastTo", "Cast", "Clip", "Div", "Dropout", "Erf", "Exp", "GetItem",
    "LeakyReLU", "Linear", "Log", "LogSoftmax", "MatMul", "Max", "Mean", "Mul", "Neg", "Pow",
    "ReLU", "ReLUGrad", "Reshape", "Sigmoid", "Softmax", "SparseSoftmaxCrossEntropy", "Sqrt",
    "Sub", "Sum", "Tanh", "autocast_fp32", "autocast_lower",
    "Transpose", "add", "broadcast_to", "cast", "clip", "div", "dropout", "erf", "exp",
    "gelu", "getitem", "leaky_relu", "linear", "log", "log_softmax", "matmul", "max", "mean",
    "mul", "neg", "pow", "relu", "relu_grad", "reshape", "sigmoid", "softmax", "sqrt", "sub",
    "sparse_softmax_cross_entropy", "sum", "tanh", "transpose",
]
# the layers' ops: convolution, normalization, embedding, attention, chosen accumulators
__all__ += ["accumulated_linear", "accumulated_matmul", "attention", "conv2d", "embedding",
            "layer_norm", "max_pool2d", "moments", "normalize", "patches"]



def _backward_without_autocast(root: Any, grad: Any = None, retain_graph: bool = True,
                               create_graph: bool = False) -> None:
    """``Tensor.backward``: the engine's backward with autocast off (PyTorch's rule: a
    backward runs each op in the formats its forward chose, even inside an autocast block)."""
    with _autocast.disabled():
        _backward(root, grad, retain_graph=retain_graph, create_graph=create_graph)


register_ops(
    backward=_backward_without_autocast,
    add=add, sub=sub, mul=mul, div=div, neg=neg, pow=pow, matmul=matmul, getitem=getitem,
    sum=sum, mean=mean, max=max, reshape=reshape, transpose=transpose, exp=exp, log=log,
    sqrt=sqrt, relu=relu, sigmoid=sigmoid, tanh=tanh, cast=cast,
)
