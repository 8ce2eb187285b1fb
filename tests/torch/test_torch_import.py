"""torch is optional: ``import fpsim`` never imports it, and ``import fpsim.torch`` without
torch raises an ImportError that says how to install it."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)


def test_import_fpsim_does_not_import_torch():
    done = _run("import sys, fpsim; print('torch' in sys.modules)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_fpsim_torch_without_torch_raises_an_import_error_saying_how_to_install():
    # sys.modules["torch"] = None makes every `import torch` fail, as if it were absent
    done = _run(
        "import sys; sys.modules['torch'] = None\n"
        "import fpsim\n"
        "try:\n"
        "    import fpsim.torch\n"
        "except ImportError as e:\n"
        "    print('ImportError:', e)\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ImportError: fpsim.torch needs PyTorch")
    assert 'pip install "fpsim[torch]"' in done.stdout


def test_fpsim_torch_imports_with_torch():
    pytest.importorskip("torch")
    done = _run("import fpsim.torch as ft; print(ft.round.__module__)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "fpsim.torch.rounding"
