"""Every docstring example in fpsim and nn runs and prints what it shows (doctest).

One test per module, so a failure names the module; the examples see ``np``, ``fpsim`` and
``nn`` without importing them, as the README's examples do. Each runs in a temporary directory,
so an example that writes a file leaves nothing in the repository.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import sys

import numpy as np
import pytest

import fpsim
import nn

SKIP = {"fpsim.testing"}  # needs hypothesis strategies drawn inside tests; covered elsewhere
try:
    import torch  # noqa: F401  (fpsim.torch's examples need it; torch is optional)
except ImportError:
    SKIP_PACKAGES: tuple[str, ...] = ("fpsim.torch",)
else:
    SKIP_PACKAGES = ()


def _modules() -> list[str]:
    names = []
    for package in (fpsim, nn):
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name not in SKIP and not info.name.startswith(SKIP_PACKAGES):
                names.append(info.name)
    return sorted(names)


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_print_what_they_show(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an example that saves a file (fpsim.plot's) writes it here
    # doctest reads what sys.displayhook prints: Python's own hook, whatever an earlier test in
    # this worker may have left there
    monkeypatch.setattr(sys, "displayhook", sys.__displayhook__)
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    globs = {**vars(module), "np": np, "fpsim": fpsim, "nn": nn}
    for test in finder.find(module, name, globs=globs):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} example(s) in {name} differ"


def test_the_docstring_examples_are_found():
    finder = doctest.DocTestFinder(exclude_empty=True)
    count = sum(len(t.examples) for n in _modules()
                for t in finder.find(importlib.import_module(n), n))
    assert count >= 50, f"only {count} docstring examples found"
