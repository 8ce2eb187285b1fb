"""The torch tests run torch on one thread: beside another pytest worker on a small machine,
torch's OpenMP threads spin against each other (measured here: 65536-element roundings took
ten times the CPU time on two threads). No torch import at module level, so that the test
modules can skip where torch is absent."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    try:
        import torch
    except ImportError:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
