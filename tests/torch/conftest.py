"""The torch tests: skipped where torch is absent; FPSIM_TORCH_DEVICE=cuda runs them on a GPU."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

DEVICE = os.environ.get("FPSIM_TORCH_DEVICE", "cpu")


@pytest.fixture
def device() -> str:
    """The device the torch tests run on (FPSIM_TORCH_DEVICE, default cpu)."""
    return DEVICE
