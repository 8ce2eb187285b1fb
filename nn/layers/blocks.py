"""Composite layers for the small transformer language model: ``TokenAndPositionEmbedding``
and ``TransformerBlock`` (the names of Keras's transformer examples), so that a one-block LM is

>>> lm = nn.Sequential([TokenAndPositionEmbedding(50, 8, 16),
...                     TransformerBlock(16, num_heads=2, ff_dim=32), nn.Dense(50)])
>>> lm(np.zeros((2, 8))).shape
(2, 8, 50)

Each composite holds its sub-layers as attributes (named ``<block>_<part>``); the layer tree
(``nn.layers.module``) finds them, so telemetry, ``summary`` and checkpoints see the
sub-layers themselves and ``weights`` is theirs, in assignment order.
Every sub-layer keeps its own precision rule (attention and LayerNormalization compute their
softmax and statistics in fp32 under mixed policies).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nn import functions as F
from nn.engine import checks
from nn.engine.sites import name_scope
from nn.engine.tensor import Tensor
from nn.functions.embedding import integer_indices
from nn.layers.attention import MultiHeadAttention
from nn.layers.base import Layer, register
from nn.layers.core import Dense
from nn.layers.embedding import Embedding
from nn.layers.normalization import LayerNormalization
from nn.precision.policy import Policy


class _Composite(Layer):
    """A layer made of sub-layers (its attributes); its weights are theirs, in order."""

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.policy.name}


@register
class TokenAndPositionEmbedding(_Composite):
    """token_embedding(ids) + position_embedding(0..T-1): ``(batch, T)`` integer ids ->
    ``(batch, T, embedding_dim)``, the sum rounded once to the compute format."""

    integer_input = True  # Sequential passes integer ids through to it

    def __init__(self, vocabulary_size: int, sequence_length: int, embedding_dim: int,
                 dtype: Policy | str | None = None, name: str | None = None) -> None:
        super().__init__(name=name, dtype=dtype)
        self.vocabulary_size = checks.count("TokenAndPositionEmbedding: vocabulary_size",
                                            vocabulary_size, minimum=1)
        self.sequence_length = checks.count("TokenAndPositionEmbedding: sequence_length",
                                            sequence_length, minimum=1)
        self.embedding_dim = checks.count("TokenAndPositionEmbedding: embedding_dim",
                                          embedding_dim, minimum=1)
        policy = self.policy
        self.token = Embedding(vocabulary_size, embedding_dim, dtype=policy,
                               name=f"{self.name}_token")
        self.position = Embedding(sequence_length, embedding_dim, dtype=policy,
                                  name=f"{self.name}_position")

    def __call__(self, x: Any, training: bool | None = None) -> Tensor:
        training = self.resolve_training(training)
        ids = integer_indices(x, self.vocabulary_size, f"layer '{self.name}': token ids")
        if ids.ndim != 2 or ids.shape[1] > self.sequence_length:
            raise ValueError(f"layer '{self.name}' expects token ids of shape (batch, length <= "
                             f"{self.sequence_length}), got shape {ids.shape}")
        with name_scope(self.name):
            y = self.token(ids) + self.position(np.arange(ids.shape[1])[None, :])
        self.built = True
        return y

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "vocabulary_size": self.vocabulary_size,
                "sequence_length": self.sequence_length, "embedding_dim": self.embedding_dim}


@register
class TransformerBlock(_Composite):
    """One transformer block on ``(batch, T, embed_dim)``:

    - post-norm (``normalize_first=False``, Keras's example): ``x = ln1(x + mha(x, x))``,
      ``y = ln2(x + ff2(ff1(x)))``;
    - pre-norm (GPT-2): ``x = x + mha(ln1(x), ln1(x))``, ``y = x + ff2(ff1(ln2(x)))``;

    with a causal mask when ``causal`` (a language model), ``ff1 = Dense(ff_dim, activation)``,
    ``ff2 = Dense(embed_dim)`` and ``key_dim`` defaulting to ``embed_dim // num_heads``.
    """

    def __init__(self, embed_dim: int, num_heads: int, ff_dim: int, key_dim: int | None = None,
                 activation: str = "relu", epsilon: float = 1e-3, causal: bool = True,
                 normalize_first: bool = False, dtype: Policy | str | None = None,
                 name: str | None = None) -> None:
        super().__init__(name=name, dtype=dtype)
        cls = "TransformerBlock"
        self.embed_dim = checks.count(f"{cls}: embed_dim", embed_dim, minimum=1)
        self.num_heads = checks.count(f"{cls}: num_heads", num_heads, minimum=1)
        self.ff_dim = checks.count(f"{cls}: ff_dim", ff_dim, minimum=1)
        self.key_dim = (max(self.embed_dim // self.num_heads, 1) if key_dim is None
                        else checks.count(f"{cls}: key_dim", key_dim, minimum=1))
        self.epsilon = checks.number(f"{cls}: epsilon", epsilon, lo=0.0, lo_open=True)
        self.causal, self.normalize_first = bool(causal), bool(normalize_first)
        self.activation = activation
        p, n = self.policy, self.name
        self.attention = MultiHeadAttention(self.num_heads, self.key_dim, dtype=p,
                                            name=f"{n}_attention")
        self.ln1 = LayerNormalization(epsilon=epsilon, dtype=p, name=f"{n}_ln1")
        self.ff1 = Dense(self.ff_dim, activation=activation, dtype=p, name=f"{n}_ff1")
        self.ff2 = Dense(self.embed_dim, dtype=p, name=f"{n}_ff2")
        self.ln2 = LayerNormalization(epsilon=epsilon, dtype=p, name=f"{n}_ln2")

    def __call__(self, x: Any, training: bool | None = None) -> Tensor:
        training = self.resolve_training(training)
        x = self._as_input(x)
        if x.ndim != 3 or x.shape[-1] != self.embed_dim:
            raise ValueError(f"layer '{self.name}' expects input of shape (batch, length, "
                             f"{self.embed_dim}), got shape {x.shape}")
        with name_scope(self.name):
            if self.normalize_first:
                h = self.ln1(x, training=training)
                x = x + self.attention(h, h, use_causal_mask=self.causal, training=training)
                y = x + self.ff2(self.ff1(self.ln2(x, training=training)))
            else:
                x = self.ln1(x + self.attention(x, x, use_causal_mask=self.causal,
                                                training=training), training=training)
                y = self.ln2(x + self.ff2(self.ff1(x)), training=training)
        self.built = True
        return F.cast(y, self.compute_format)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "embed_dim": self.embed_dim, "num_heads": self.num_heads,
                "ff_dim": self.ff_dim, "key_dim": self.key_dim, "activation": self.activation,
                "epsilon": self.epsilon, "causal": self.causal,
                "normalize_first": self.normalize_first}
