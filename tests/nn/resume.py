"""The resume check shared by the checkpoint and registry tests: training straight through
and training, saving, loading and training on give bit-identical results."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import nn


def assert_resume_is_bit_identical(make: Callable[[], Any], x: np.ndarray, y: np.ndarray,
                                   path: Path, *, batch_size: int, seed: int,
                                   before_load: Callable[[], None] | None = None) -> Any:
    """fit 3 epochs straight vs fit 1, save to ``path``, load, fit 2: the weights, step losses
    and loss scales must be bit-identical. ``before_load`` runs between save and load (e.g. to
    move the global generator on). Returns the resumed model."""
    straight = make()
    h_straight = straight.fit(x, y, batch_size=batch_size, epochs=3, seed=seed, verbose=0)
    first = make()
    first.fit(x, y, batch_size=batch_size, epochs=1, seed=seed, verbose=0)
    first.save(path)
    if before_load is not None:
        before_load()
    resumed = nn.load_model(path)
    h_resumed = resumed.fit(x, y, batch_size=batch_size, epochs=2, seed=seed, verbose=0)
    for a, b in zip(straight.get_weights(), resumed.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    assert h_straight.step_loss[-len(h_resumed.step_loss):] == h_resumed.step_loss
    assert h_straight.step_loss_scale[-len(h_resumed.step_loss_scale):] == \
        h_resumed.step_loss_scale
    return resumed
