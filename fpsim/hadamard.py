"""The random Hadamard transform (RHT) of block-scaled training recipes.

A MODEL of Transformer Engine's NVFP4 weight-gradient transform (TE
``transformer_engine/pytorch/tensor/nvfp4_tensor.py``; NVIDIA, "Pretraining Large Language
Models with NVFP4", 2025, section 4.2): consecutive blocks of ``block`` (16) elements along
an axis are multiplied by the orthogonal matrix

    M = diag(signs) @ H / sqrt(block)

with H Sylvester's Hadamard matrix, ``H[i, j] = (-1)^popcount(i & j)``

(``v -> v @ M`` for each block ``v``, a row vector). ``M`` is orthogonal (``M @ M.T = I``),
so a product summed over the transformed axis is unchanged: ``(Q a)^T (Q g) = a^T g`` for
the block-diagonal ``Q``. Spreading a block's outlier over its 16 elements is what makes the
transformed operands quantize better. ``signs`` is TE's fixed wgrad vector by default
(``TE_WGRAD_SIGNS``), an int seed draws a random one (``random_signs``), None means all +1.

Ours: a trailing partial block (the axis not a multiple of ``block``) passes through
unchanged, which keeps ``Q`` orthogonal (TE requires multiples of 16); the transform is
computed in float64 (TE: fp32 on the tensor cores), then rounded once to x's dtype.
"""

from __future__ import annotations

import math

import numpy as np

# TE's hard-coded wgrad sign vector (get_wgrad_sign_vector in nvfp4_tensor.py)
TE_WGRAD_SIGNS: tuple[int, ...] = (1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1)
RHT_BLOCK = 16  # TE's Hadamard dimension


def hadamard_matrix(n: int) -> np.ndarray:
    """Sylvester's ``n x n`` Hadamard matrix of +-1 (float64), n a power of two:
    ``H_1 = [1]``, ``H_2k = [[H_k, H_k], [H_k, -H_k]]``.

    >>> hadamard_matrix(2)
    array([[ 1.,  1.],
           [ 1., -1.]])
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1 or n & (n - 1):
        raise ValueError(f"n must be a power of two (1, 2, 4, ..., 16), got {n!r}")
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


def random_signs(seed: int, n: int = RHT_BLOCK) -> tuple[int, ...]:
    """n random signs (+1 or -1) from ``numpy.random.default_rng(seed)``: the same seed
    gives the same signs."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {seed!r}")
    draws = np.random.default_rng(int(seed)).integers(0, 2, n)
    return tuple(int(s) for s in 1 - 2 * draws)


def _signs(signs: object, n: int) -> np.ndarray:
    if signs is None:
        return np.ones(n)
    if isinstance(signs, (int, np.integer)) and not isinstance(signs, bool):
        return np.asarray(random_signs(int(signs), n), np.float64)
    s = np.asarray(signs, dtype=np.float64)
    if s.shape != (n,) or not np.all(np.abs(s) == 1):
        raise ValueError(f"signs must be {n} values of +1 or -1, an int seed, or None; got "
                         f"{signs!r:.80}")
    return s


def rht_matrix(block: int = RHT_BLOCK, signs: object = TE_WGRAD_SIGNS) -> np.ndarray:
    """``diag(signs) @ H / sqrt(block)`` (float64): orthogonal, its inverse its transpose."""
    h = hadamard_matrix(block)
    return _signs(signs, block)[:, None] * h / math.sqrt(block)


def random_hadamard_transform(x: object, axis: int = -1, *, signs: object = TE_WGRAD_SIGNS,
                              block: int = RHT_BLOCK, inverse: bool = False) -> np.ndarray:
    """x with every whole block of ``block`` elements along ``axis`` replaced by ``v @ M``
    (``inverse``: ``v @ M.T``, which undoes it); a trailing partial block is kept. Returns x's
    float dtype (float32 or float64; other input becomes float64).

    >>> x = np.arange(16.0)
    >>> y = random_hadamard_transform(x)
    >>> bool(np.allclose(random_hadamard_transform(y, inverse=True), x))
    True
    """
    arr = np.asarray(x)
    if arr.dtype not in (np.float32, np.float64):
        arr = arr.astype(np.float64)
    if arr.ndim == 0:
        raise ValueError("random_hadamard_transform needs an array of at least one dimension")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not (
            -arr.ndim <= axis < arr.ndim):
        raise ValueError(f"axis must be an int in [-{arr.ndim}, {arr.ndim}), got {axis!r}")
    m = rht_matrix(block, signs)
    if inverse:
        m = m.T
    moved = np.moveaxis(arr, axis, -1)
    n = moved.shape[-1]
    whole = n - n % block
    out = np.array(moved, dtype=arr.dtype, copy=True)
    if whole:
        blocks = moved[..., :whole].astype(np.float64).reshape(*moved.shape[:-1], -1, block)
        out[..., :whole] = (blocks @ m).reshape(*moved.shape[:-1], whole)
    return np.moveaxis(out, -1, axis)
