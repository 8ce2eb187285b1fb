"""The API reference's pages, generated from the packages' public names at build time.

One page per public package, and on it one mkdocstrings entry (``::: package.name``) per public
name, reached through the package that re-exports it (``nn.Dense``, never the module that
defines it, so moving code between modules does not move its documentation). The public names
of a package are its ``__all__``; a package without ``__all__`` contributes every name of
``dir()`` that does not start with an underscore and is its own (defined in it, not imported
from another module; see ``_belongs``). ``tests/docs/test_api_reference.py`` checks that every
public name of fpsim and nn is here.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import pathlib
import subprocess
import sys
from types import ModuleType
from typing import Any, TypeVar

ROOT = pathlib.Path(__file__).resolve().parents[1]

# (package, one line on the page): the packages whose names users import.
PACKAGES: tuple[tuple[str, str], ...] = (
    ("fpsim", "Formats, rounding, bits, emulated arrays, accumulation and the monitor."),
    ("fpsim.mx", "OCP MX and NVFP4 block-scaled formats."),
    ("fpsim.testing", "Hypothesis strategies for your own tests (needs the `test` extra)."),
    ("fpsim.plot", "Pictures of formats and rounding (needs matplotlib)."),
    ("fpsim.widgets", "The notebooks' interactive explorers (ipywidgets)."),
    ("nn", "Tensors, layers, models, policies, optimizers and loss scaling."),
    ("nn.layers", "Keras-style layers."),
    ("nn.optimizers", "Optimizers and their registry."),
    ("nn.losses", "Losses."),
    ("nn.metrics", "Metrics."),
    ("nn.mixed_precision", "Keras's `tf.keras.mixed_precision` names."),
    ("nn.fp8", "fp8 and block-scaling recipes (Transformer Engine's)."),
    ("nn.datasets", "Datasets and the `Dataset` pipeline."),
    ("nn.utils", "PyTorch-style utilities."),
    ("nn.functions", "The differentiable ops, one `Function` each."),
    ("nn.registry", "The registries of layers, optimizers, losses, metrics and activations."),
    ("nn.dtypes", "`DType`, Keras's dtype names of emulated formats."),
    ("nn.plot", "Pictures of training telemetry (needs matplotlib)."),
    ("nn.faces.keras", "Keras 3's names and semantics: `from nn.faces import keras`."),
    ("nn.faces.torch", "PyTorch's names and semantics: `import nn.faces.torch as torch`."),
    ("nn.faces.te", "Transformer Engine's names and semantics: `from nn.faces import te`."),
)


def page_name(package: str) -> str:
    return f"{package}.md"


def _imported_from_elsewhere(obj: object) -> bool:
    """A class, function or object whose ``__module__`` is outside fpsim and nn (``Any``,
    ``dataclass``, ``annotations``); constants such as dicts and tuples have no module and
    count as the package's own."""
    module = getattr(obj, "__module__", None)
    return isinstance(module, str) and module.split(".")[0] not in ("fpsim", "nn")


def _belongs(module: ModuleType, name: str, obj: object) -> bool:
    """Whether a name of a package without ``__all__`` is its own: a class or function defined
    in the package (or below it), or a constant that the top-level package does not already
    export (``fpsim.mx.E4M3FN`` is ``fpsim.E4M3FN``, documented there)."""
    if inspect.ismodule(obj) or _imported_from_elsewhere(obj) or isinstance(obj, TypeVar):
        return False
    if inspect.isclass(obj) or inspect.isroutine(obj) or hasattr(obj, "py_func"):
        defined_in = getattr(obj, "__module__", "") or ""
        return defined_in == module.__name__ or defined_in.startswith(module.__name__ + ".")
    top = importlib.import_module(module.__name__.split(".")[0])
    return top is module or getattr(top, name, None) is not obj


@functools.cache
def fresh_names() -> dict[str, frozenset[str]]:
    """Each documented package's names as a fresh ``import package`` binds them, read in a new
    interpreter: in a running process a package also holds every submodule that anything
    imported since (``fpsim.torch`` once a test has used it), which would make the pages
    depend on what ran before."""
    code = ("import importlib, json, sys\n"
            "print(json.dumps({p: sorted(vars(importlib.import_module(p))) "
            "for p in sys.argv[1:]}))")
    out = subprocess.run([sys.executable, "-c", code, *(p for p, _ in PACKAGES)],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    return {p: frozenset(names) for p, names in json.loads(out.splitlines()[-1]).items()}


def public_names(module: ModuleType) -> list[str]:
    """The names a user of ``module`` is meant to import, sorted."""
    exported = getattr(module, "__all__", None)
    if exported is not None:
        return sorted(set(exported))
    fresh = fresh_names().get(module.__name__, frozenset(vars(module)))
    return sorted(
        name for name, obj in vars(module).items()
        if not name.startswith("_") and name in fresh and _belongs(module, name, obj)
    )


def documented_names(package: str) -> list[str]:
    """The public names of ``package`` that get an entry of their own (not its submodules that
    have a page of their own, which get a link instead)."""
    module = importlib.import_module(package)
    own_pages = {p for p, _ in PACKAGES}
    return [n for n in public_names(module) if f"{package}.{n}" not in own_pages]


def implementation_modules(package: str) -> list[str]:
    """The submodules of a package without ``__all__`` that ``dir()`` shows and that are neither
    public names nor pages: where the code lives, named on the page so every name of ``dir()``
    appears in the reference."""
    module = importlib.import_module(package)
    if getattr(module, "__all__", None) is not None:
        return []
    own_pages = {p for p, _ in PACKAGES}
    fresh = fresh_names().get(package, frozenset(vars(module)))
    return sorted(
        name for name, obj in vars(module).items()
        if not name.startswith("_") and name in fresh and inspect.ismodule(obj)
        and obj.__name__.startswith(package + ".") and obj.__name__ not in own_pages
    )


@functools.cache
def _static_tree(root: str) -> Any:
    try:
        import griffe  # in the docs extra, with mkdocstrings
    except ImportError:
        return None
    return griffe.load(root, search_paths=[str(ROOT)], resolve_aliases=False)


def _found_statically(package: str, name: str) -> bool:
    """Whether mkdocstrings (griffe, which reads the source without running it) sees the name
    and can follow it to its definition; it does not see names bound by unpacking
    (``FINITE, INF, NAN = ...``)."""
    tree = _static_tree(package.split(".")[0])
    if tree is None:  # without griffe there is no build to fail; assume it sees every name
        return True
    try:
        found = tree[f"{package}.{name}"[len(tree.path) + 1:]]
        if getattr(found, "is_alias", False):
            found.final_target  # noqa: B018 (resolving it is the check)
    except Exception:  # griffe's KeyError or AliasResolutionError: a name it cannot follow
        return False
    return True


def _entry(package: str, name: str, obj: object) -> list[str]:
    if _found_statically(package, name):
        return [f"::: {package}.{name}", "    options:", "      heading_level: 2", ""]
    text = repr(obj)
    return [f"## `{package}.{name}`", "", "```python", f"{package}.{name} = {text[:300]}",
            "```", ""]


def page(package: str, summary: str) -> str:
    module = importlib.import_module(package)
    lines = [f"# `{package}`", "", summary, ""]
    doc = inspect.getdoc(module)
    if doc:
        lines += ["```text", doc, "```", ""]
    subpages = [p for p, _ in PACKAGES if p.startswith(package + ".") and "." not in
                p[len(package) + 1:]]
    if subpages:
        lines += ["Packages: " + ", ".join(f"[`{p}`]({page_name(p)})" for p in subpages), ""]
    for name in documented_names(package):
        lines += _entry(package, name, getattr(module, name))
    modules = implementation_modules(package)
    if modules:
        lines += ["## Implementation modules", "",
                  "Where the names above are defined; import them from "
                  f"`{package}`, which re-exports them.", "", "| module | |", "|---|---|"]
        for name in modules:
            first = (inspect.getdoc(getattr(module, name)) or "").split("\n")[0]
            lines.append(f"| `{package}.{name}` | {first.replace('|', '/')} |")
        lines.append("")
    return "\n".join(lines)


def pages() -> dict[str, str]:
    """{file name under docs/api/: markdown}, including the index."""
    result = {page_name(p): page(p, summary) for p, summary in PACKAGES}
    index = ["# API reference", "",
             "Generated from the docstrings, one page per package, each public name under the "
             "package that exports it.", "",
             "| package | |", "|---|---|"]
    index += [f"| [`{p}`]({page_name(p)}) | {summary} |" for p, summary in PACKAGES]
    result["index.md"] = "\n".join(index) + "\n"
    return result
