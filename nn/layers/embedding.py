"""``Embedding(input_dim, output_dim)``: integer indices -> rows of a trainable table.

The same class is the Keras and the PyTorch face (``Embedding(num_embeddings,
embedding_dim)`` has the same argument order). Input: integers, or floats holding whole numbers
(Keras casts them); they are never rounded to the compute format (fp16 cannot hold every index
above 2048). The output is the table read in the compute format (a Cast of the fp32 master
table under mixed policies). The gradient of the table is dense, zeros where no index looked,
and each row's gradient is summed over its repeated indices in float64 and rounded once to
fp32 (nn.functions.embedding).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nn.engine import checks, sites
from nn.engine.sites import name_scope
from nn.engine.tensor import Tensor, Variable
from nn.functions.embedding import embedding, integer_indices
from nn.layers.base import Layer, register
from nn.layers.initializers import get_initializer
from nn.precision.policy import Policy


def keras_uniform(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Keras's Embedding default, RandomUniform(-0.05, 0.05)."""
    return rng.uniform(-0.05, 0.05, shape)


@register
class Embedding(Layer):
    """A ``(input_dim, output_dim)`` table; ``layer(indices)`` has shape ``(*indices.shape,
    output_dim)``.

    >>> Embedding(10, 4)(np.array([[1, 2, 2]])).shape
    (1, 3, 4)
    """

    integer_input = True  # Sequential passes integer ids through to it

    def __init__(self, input_dim: int, output_dim: int,
                 embeddings_initializer: str | Callable = "uniform",
                 mask_zero: bool = False, dtype: Policy | str | None = None,
                 name: str | None = None, seed: int | None = None) -> None:
        super().__init__(name=name, dtype=dtype)
        self.input_dim = checks.count("Embedding: input_dim", input_dim, minimum=1)
        self.output_dim = checks.count("Embedding: output_dim", output_dim, minimum=1)
        if mask_zero:
            raise ValueError("Embedding: mask_zero=True is not supported (nn has no masks); "
                             "pass attention_mask= to MultiHeadAttention instead")
        self.embeddings_initializer = (keras_uniform if embeddings_initializer == "uniform"
                                       else get_initializer(embeddings_initializer))
        self.seed = checks.seed("Embedding: seed", seed)
        self._rng = np.random.default_rng(seed) if seed is not None else None
        self.embeddings: Variable | None = None

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        self.embeddings = self.add_weight("embeddings", (self.input_dim, self.output_dim),
                                          self.embeddings_initializer, rng=self._rng)

    def __call__(self, x: Any, training: bool | None = None) -> Tensor:
        """Look up ``x`` (integers in [0, input_dim)); nothing is cast to the compute format."""
        training = self.resolve_training(training)
        idx = integer_indices(x, self.input_dim, f"layer '{self.name}': indices")
        if not self.built:
            if idx.ndim < 1:
                raise ValueError(f"layer '{self.name}' needs batched input, got a scalar")
            self._build_once(idx.shape)
        assert self.embeddings is not None
        with name_scope(self.name):
            y = embedding(self.read(self.embeddings), idx)
        y.grad_site = sites.activation_grad(self.name)
        return y

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "input_dim": self.input_dim,
                "output_dim": self.output_dim, "seed": self.seed}
