"""``nn.warmup.warmup()``: fpsim's warmup plus nn's fused kernels (see fpsim.warmup)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import nn
from fpsim.warmup import run_tasks
from fpsim.warmup import tasks as fpsim_tasks
from nn.engine import kernels as _kernels
from nn.engine.conv_kernels import col2im_add, max_pool_window_grads


def _train_step() -> None:
    with nn.policy_scope("mixed_float16"):
        model = nn.Sequential([nn.Dense(8, activation="relu", seed=0), nn.Dense(3, seed=1)])
    model.compile(optimizer=nn.optimizers.SGD(0.01),
                  loss=nn.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)
    model.fit(x, np.arange(8) % 3, batch_size=8, epochs=1, verbose=0)


def _conv_kernels() -> None:
    for dtype in (np.float32, np.float64):  # the policies' carriers, float64 for gradient checks
        image, windows = np.zeros((1, 1, 1, 1), dtype), np.zeros((1, 1, 1, 1, 1, 1), dtype)
        col2im_add(windows, image, 1, 1)
        max_pool_window_grads(image, image, image, 1, 1, dtype(1), windows)


def _lm_kernels() -> None:
    x = np.zeros(8, np.float32)  # the softmax kernels (float32 rows), the embedding gradient's
    for zero_if_infinite in (False, True):
        _kernels.shift_by_row_max(x, x.copy(), 8, x[:1].copy(), zero_if_infinite)
    _kernels.row_sums(x, 8, x[:1].copy())
    _kernels.divide_by_row_sum(x + 1, 8)
    _kernels.softmax_grad(x, x, x.copy(), 8)
    zeros = np.zeros((1, 1))  # the embedding gradient sums in float64 (nn.functions.embedding)
    _kernels.scatter_add_rows(zeros, np.zeros(1, np.int64), zeros.copy())


def extra_tasks() -> list[tuple[str, Callable[[], object]]]:
    """nn's own warmup calls: a mixed_float16 training step (nn's fused kernels), then the
    convolution kernels and the transformer's (softmax, embedding gradient). ``fpsim warmup``
    runs them after fpsim's (entry point group ``fpsim.warmup``)."""
    return [("nn training step", _train_step), ("nn conv kernels", _conv_kernels),
            ("nn transformer kernels", _lm_kernels)]


def tasks() -> list[tuple[str, Callable[[], object]]]:
    """fpsim's warmup calls, then nn's (``extra_tasks``)."""
    return [*fpsim_tasks(), *extra_tasks()]


def warmup(progress: bool = True) -> None:
    """Compile every fpsim and nn kernel the tutorials use (or load them from numba's cache)."""
    run_tasks(tasks(), progress)
