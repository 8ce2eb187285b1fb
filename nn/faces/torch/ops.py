"""``torch.relu``, ``exp``, ``log``, ``sqrt``, ``tanh``, ``sigmoid``, ``matmul``: nn's ops
under PyTorch's top-level names (each rounds to its format; autocast applies)."""

from __future__ import annotations

from nn.functions import exp, log, matmul, relu, sigmoid, sqrt, tanh

__all__ = ["exp", "log", "matmul", "relu", "sigmoid", "sqrt", "tanh"]
