"""The nn experiments' models as torch modules, for ``fpsim compare --backend torch``
(``nn.experiments.torch_backend``): ``torch_lm`` (the char LM of ``nn.experiments.lm``) and
``torch_cnn`` (the CNN of ``nn.experiments.cnn``), each with the data nn trains it on laid out
as torch takes it, and how ``--scale`` widens it. ``FAMILIES`` maps a configuration's type to
its ``Family``; ``family(config)`` looks it up.

Same sizes, layers and data as nn's models; torch's own initialisation (from ``config.seed``),
so the numbers are not nn's bit for bit, but the story is the same.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from nn.datasets.text import VOCABULARY
from nn.experiments import cnn, lm
from nn.experiments.cnn import CNNConfig
from nn.experiments.lm import LMConfig

# nn's BatchNormalization epsilon (Keras's default 1e-3; torch's own is 1e-5)
BN_EPSILON = 1e-3


def torch_lm(config: LMConfig) -> Any:
    """The char LM as a torch module (float32, initialised from ``config.seed``): token and
    position embeddings, ``config.blocks`` ``nn.TransformerEncoderLayer`` blocks (causal, ReLU
    feed-forward, post- or pre-norm as ``config.normalize_first``, LayerNorm epsilon
    ``config.epsilon``), a Linear to the 128 characters. Its forward takes (batch,
    sequence_length) character ids and gives (batch, sequence_length, 128) logits."""
    import torch

    tnn = torch.nn

    class TorchLM(tnn.Module):
        def __init__(self) -> None:
            super().__init__()
            d = config.embed_dim
            self.tokens = tnn.Embedding(VOCABULARY, d)
            self.positions = tnn.Embedding(config.sequence_length, d)
            self.blocks = tnn.ModuleList([
                tnn.TransformerEncoderLayer(d, config.num_heads, config.ff_dim, dropout=0.0,
                                            layer_norm_eps=config.epsilon, batch_first=True,
                                            norm_first=config.normalize_first)
                for _ in range(config.blocks)])
            self.logits = tnn.Linear(d, VOCABULARY)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            t = ids.shape[1]
            x = self.tokens(ids) + self.positions(torch.arange(t, device=ids.device))
            mask = torch.ones(t, t, dtype=torch.bool, device=ids.device).triu(1)
            for block in self.blocks:
                x = block(x, src_mask=mask)
            return self.logits(x)

    torch.manual_seed(config.seed)
    return TorchLM()


def torch_cnn(config: CNNConfig) -> Any:
    """The CNN as a torch module (float32, initialised from ``config.seed``), layer for layer
    nn's ``build_cnn`` and named as it names them: per entry of ``config.filters`` a
    ``Conv2d(kernel_size, padding="same")`` ("conv1", ...), ``BatchNorm2d`` ("bn1", ...; nn's
    epsilon 1e-3, torch's momentum ``1 - config.bn_momentum``: the same moving average) and
    ``ReLU``, a 2x2 max-pool between stacks ("pool1", ...), then global average pooling
    ("pool") and ``Linear(10)`` ("logits"). Its forward takes (batch, 1, 8, 8) pixels (NCHW,
    torch's layout) and gives (batch, 10) logits."""
    import torch

    tnn = torch.nn
    layers: OrderedDict[str, Any] = OrderedDict()
    channels = 1
    for i, filters in enumerate(config.filters, 1):
        if i > 1:
            layers[f"pool{i - 1}"] = tnn.MaxPool2d(2)
        layers[f"conv{i}"] = tnn.Conv2d(channels, filters, config.kernel_size, padding="same")
        layers[f"bn{i}"] = tnn.BatchNorm2d(filters, eps=BN_EPSILON,
                                           momentum=1.0 - config.bn_momentum)
        layers[f"relu{i}"] = tnn.ReLU()
        channels = filters
    layers["pool"] = tnn.AdaptiveAvgPool2d(1)
    layers["flatten"] = tnn.Flatten()
    layers["logits"] = tnn.Linear(channels, 10)
    torch.manual_seed(config.seed)
    return tnn.Sequential(layers)


def cnn_data(config: CNNConfig) -> Any:
    """nn's digits for ``config`` (``nn.experiments.cnn.data_for``: the same pixels, batches
    and order) with the images as (n, 1, 8, 8), torch's layout."""
    (x, y), (x_test, y_test) = cnn.data_for(config)

    def nchw(a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(a.transpose(0, 3, 1, 2))

    return (nchw(x), y), (nchw(x_test), y_test)


def widen_lm(config: LMConfig, scale: int) -> LMConfig:
    """Embedding width, heads and feed-forward width times ``scale``, so each head keeps its
    size; depth, batch, sequence length and steps as they are."""
    return config.with_(embed_dim=config.embed_dim * scale, num_heads=config.num_heads * scale,
                        ff_dim=config.ff_dim * scale)


def widen_cnn(config: CNNConfig, scale: int) -> CNNConfig:
    """Every convolution's filters times ``scale``; depth, kernel, batch and steps as they
    are."""
    return config.with_(filters=tuple(f * scale for f in config.filters))


@dataclass(frozen=True)
class Family:
    """One model family of the experiments on torch: ``build(config)`` the module,
    ``data(config)`` its ``((x, y), (x_test, y_test))`` as torch takes them, ``widen(config,
    scale)`` for ``--scale``, and whether its runs report held-out accuracy (a classifier of
    whole inputs)."""

    build: Callable[[Any], Any]
    data: Callable[[Any], Any]
    widen: Callable[[Any, int], Any]
    accuracy: bool


# a configuration's type -> its family (a test checks every torch experiment's has one)
FAMILIES: dict[type, Family] = {
    LMConfig: Family(torch_lm, lm.data_for, widen_lm, accuracy=False),
    CNNConfig: Family(torch_cnn, cnn_data, widen_cnn, accuracy=True),
}


def family(config: Any) -> Family:
    """The family of ``config``'s model; a TypeError names the known configurations."""
    found = FAMILIES.get(type(config))
    if found is None:
        raise TypeError(f"no torch model for a {type(config).__name__}; the torch backend has "
                        f"{', '.join(t.__name__ for t in FAMILIES)}")
    return found
