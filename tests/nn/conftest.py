"""Shared fixtures for the nn tests: every test starts under the "float32" policy.

``NN_KERNELS=0 pytest tests/nn`` runs the whole suite with nn's numba kernels off (numpy plus
fpsim.round everywhere), which must give the same results.
"""

from __future__ import annotations

import os
import sys

import pytest

import nn
from nn.engine import rounding

sys.path.insert(0, os.path.dirname(__file__))  # the shared helpers (resume, nn_gradcheck, ...)

KERNELS = os.environ.get("NN_KERNELS", "1") != "0"


@pytest.fixture(autouse=True)
def _fresh_global_state():
    nn.set_global_policy("float32")
    rounding.KERNELS_ENABLED = KERNELS
    yield
    nn.set_global_policy("float32")
    rounding.KERNELS_ENABLED = KERNELS
