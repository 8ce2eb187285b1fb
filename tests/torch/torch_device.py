"""The device the torch tests run on: FPSIM_TORCH_DEVICE (default "cpu"; "cuda" on a GPU).

A plain module, not a conftest: it imports nothing, so the test modules can read it before
``pytest.importorskip("torch")`` skips them where torch is absent."""

from __future__ import annotations

import os

DEVICE = os.environ.get("FPSIM_TORCH_DEVICE", "cpu")
