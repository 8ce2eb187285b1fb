"""Scaled dot-product attention over heads, built from nn's ops.

``attention(q, k, v, mask, stats_fmt, accumulator)`` for ``q`` (N, h, T, dk), ``k`` (N, h, S,
dk), ``v`` (N, h, S, dv), the query already scaled by 1/sqrt(dk) (Keras scales the query):

1. scores = q @ k^T: compute-format inputs, fp32 accumulation (or ``accumulator``), one
   rounding to the compute format -- the logits that overflow fp16 do so here;
2. the scores are cast to ``stats_fmt`` (FP32 under mixed policies, FP16 under pure "float16"),
   masked positions get a large negative number (Keras: -1e9, or half the format's max when
   that is smaller: -32752 in fp16), and softmax runs there: in fp32 (or float64) it is
   nn.functions.softmax; in a narrower format every step rounds to it (``scores - max``,
   ``exp``, the sum -- added in fp32, rounded once --, the division), as a softmax kernel
   computing in fp16 would (``narrow_softmax``);
3. the probabilities are cast to the compute format and multiplied by ``v`` as in 1.
"""

from __future__ import annotations

import numpy as np

from fpsim import FP32, Format
from nn.engine.formats import FormatLike
from nn.engine.tensor import Tensor
from nn.functions.accumulate import accumulated_matmul
from nn.functions.activations import softmax
from nn.functions.cast import cast
from nn.functions.elementwise import exp
from nn.functions.linalg import matmul
from nn.functions.reductions import max as fmax
from nn.functions.reductions import sum as fsum
from nn.functions.shape import transpose


def large_negative(fmt: Format | None) -> float:
    """The additive mask value: -1e9, or -max/2 for formats whose range is smaller."""
    return -1e9 if fmt is None or fmt.max > 2e9 else -float(fmt.max) / 2


def causal_mask(t: int, s: int) -> np.ndarray:
    """(t, s) booleans, True where query i may attend key j: j <= i (Keras's and PyTorch's
    rule, aligned at the top-left, so every query sees at least key 0)."""
    return np.tril(np.ones((t, s), dtype=bool))


def narrow_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """Softmax with every step rounded to ``x``'s format: ``e = exp(x - max)``, ``e / sum(e)``
    (the sum accumulated in fp32 and rounded once). Gradients follow from the ops."""
    fmt = x.fmt
    if fmt is None or fmt.contains(FP32):
        return softmax(x, axis=axis)
    e = exp(x - cast(fmax(x, axis=axis, keepdims=True), fmt))
    return e / cast(fsum(e, axis=axis, keepdims=True), fmt)


def _matmul(a: Tensor, b: Tensor, accumulator: FormatLike) -> Tensor:
    return matmul(a, b) if accumulator is None else accumulated_matmul(a, b, accumulator)


def attention(q: Tensor, k: Tensor, v: Tensor, mask: np.ndarray | None,
              stats_fmt: Format | None, accumulator: FormatLike = None) -> tuple[Tensor, Tensor]:
    """(context (N, h, T, dv), probabilities (N, h, T, S)); ``mask`` broadcasts to
    (N, h, T, S), True = attend."""
    compute = q.fmt
    scores = cast(_matmul(q, transpose(k, (0, 1, 3, 2)), accumulator), stats_fmt)
    if mask is not None:
        adder = np.where(mask, 0.0, large_negative(stats_fmt))
        scores = scores + Tensor._make(np.asarray(adder, dtype=scores.data.dtype), scores.fmt)
    probs = narrow_softmax(scores, axis=-1)
    return _matmul(cast(probs, compute), v, accumulator), probs
