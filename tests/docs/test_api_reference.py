"""The API reference names every public name of fpsim and nn (docs/api_pages.py writes it)."""

from __future__ import annotations

import importlib
import inspect
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs"))

import api_pages  # noqa: E402

PAGES = api_pages.pages()


def _entries(package: str) -> str:
    return PAGES[api_pages.page_name(package)]


def _appears(package: str, name: str) -> bool:
    text = _entries(package)
    qualified = f"{package}.{name}"
    return (f"::: {qualified}\n" in text or f"## `{qualified}`" in text
            or f"| `{qualified}` |" in text
            or qualified in {p for p, _ in api_pages.PACKAGES})


def _public_dir(module) -> list[str]:
    """``dir(module)`` as a fresh ``import`` gives it (not the submodules other tests imported)."""
    return sorted(n for n in api_pages.fresh_names()[module.__name__] if not n.startswith("_"))


@pytest.mark.parametrize("root", ["fpsim", "nn"])
def test_every_public_name_of_the_top_level_package_appears(root):
    """nn's public names are its ``__all__`` (its internal modules are being moved); fpsim has
    no ``__all__``, so every name of ``dir(fpsim)`` without an underscore counts, its
    implementation modules included."""
    module = importlib.import_module(root)
    names = getattr(module, "__all__", None) or _public_dir(module)
    missing = [n for n in sorted(names) if not _appears(root, n)]
    assert not missing, f"not in the API reference: {', '.join(f'{root}.{n}' for n in missing)}"


@pytest.mark.parametrize("package", [p for p, _ in api_pages.PACKAGES])
def test_every_public_name_of_each_documented_package_appears(package):
    module = importlib.import_module(package)
    missing = [n for n in api_pages.public_names(module) if not _appears(package, n)]
    assert not missing, f"not on api/{api_pages.page_name(package)}: {missing}"


def test_names_are_documented_through_the_package_that_exports_them():
    """Entries say ``nn.Dense``, never the module that defines it (``nn.layers.core.Dense``),
    so moving code between internal modules does not move the reference."""
    for package, _ in api_pages.PACKAGES:
        for line in _entries(package).splitlines():
            if line.startswith("::: "):
                qualified = line[4:]
                assert qualified.rsplit(".", 1)[0] == package, line


def test_the_pages_do_not_depend_on_which_submodules_were_imported_before():
    """In a running process ``fpsim`` also holds every submodule imported since (``fpsim.cli``,
    ``fpsim.torch``); the pages list only what a fresh ``import fpsim`` binds."""
    importlib.import_module("fpsim.cli")
    assert "cli" in vars(importlib.import_module("fpsim"))
    assert "cli" not in api_pages.fresh_names()["fpsim"]
    assert "fpsim.cli" not in api_pages.page("fpsim", "")


def test_a_name_missing_from_the_pages_is_caught():
    """The check is not vacuous: an invented name does not appear."""
    assert not _appears("fpsim", "no_such_name")
    assert _appears("fpsim", "round") and _appears("nn", "Dense")


def test_every_documented_package_is_public():
    for package, _ in api_pages.PACKAGES:
        parent, _, child = package.rpartition(".")
        if parent:
            assert inspect.ismodule(getattr(importlib.import_module(parent), child))
