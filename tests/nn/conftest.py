"""Shared fixtures for the nn tests: every test starts under the "float32" policy."""

from __future__ import annotations

import pytest

import nn
from nn import autograd


@pytest.fixture(autouse=True)
def _fresh_global_state():
    nn.set_global_policy("float32")
    autograd.KERNELS_ENABLED = True
    yield
    nn.set_global_policy("float32")
    autograd.KERNELS_ENABLED = True
