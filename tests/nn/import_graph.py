"""nn's import graph, read from its source (ast): modules, the arrows between them, the imports
written inside functions, and the import cycles. Used by tests/nn/test_layout.py; run as a
script (``python tests/nn/import_graph.py [nn_dir]``) it prints the counts."""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Graph:
    root: Path
    modules: dict[str, Path] = field(default_factory=dict)
    arrows: dict[str, set[str]] = field(default_factory=dict)
    function_imports: list[tuple[str, int, str]] = field(default_factory=list)
    """(module, line, imported module) of each import of a package module inside a function
    (their arrows count in ``arrows`` too: a late import is still an arrow)."""

    @property
    def top_level(self) -> list[str]:
        """The modules directly in the package folder (``nn/*.py``)."""
        return sorted(m for m, p in self.modules.items() if p.parent == self.root)

    def cycles(self) -> list[list[str]]:
        """The strongly connected components of more than one module (Tarjan)."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on: set[str] = set()
        out: list[list[str]] = []
        counter = [0]

        def visit(v: str) -> None:
            index[v] = low[v] = counter[0]
            counter[0] += 1
            stack.append(v)
            on.add(v)
            for w in self.arrows.get(v, ()):
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

        sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
        for v in sorted(self.modules):
            if v not in index:
                visit(v)
        return out


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _resolve(graph: Graph, name: str) -> str | None:
    """The module ``name`` is, or the closest enclosing module of it; None outside nn."""
    while name:
        if name in graph.modules:
            return name
        name = name.rpartition(".")[0]
    return None


def read(root: Path, package_inits: bool = False) -> Graph:
    """The graph of the package at ``root``. ``package_inits``: an import of ``a.b.c`` is also
    an arrow to the package ``a.b`` (Python runs its ``__init__`` first; the top package
    aside), so a re-export in a package's ``__init__`` can close a circle."""
    graph = Graph(root)
    for path in sorted(root.rglob("*.py")):
        graph.modules[_module_name(root, path)] = path
    package = root.name
    for module, path in graph.modules.items():
        tree = ast.parse(path.read_text())
        arrows: set[str] = set()
        is_package = path.name == "__init__.py"
        here = module if is_package else module.rpartition(".")[0]

        def targets(node: ast.Import | ast.ImportFrom, here: str = here) -> list[str]:
            if isinstance(node, ast.Import):
                return [a.name for a in node.names]
            base = node.module or ""
            if node.level:
                parts = here.split(".")
                base_pkg = ".".join(parts[:len(parts) - node.level + 1])
                base = f"{base_pkg}.{base}" if base else base_pkg
            return [f"{base}.{a.name}" for a in node.names] + [base]

        def walk(nodes: list[ast.stmt], in_function: bool, module: str = module,
                 arrows: set[str] = arrows) -> None:
            for node in nodes:
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = targets(node)
                    if isinstance(node, ast.ImportFrom):  # a module imported from a package,
                        wanted = [n for n in names[:-1] if n in graph.modules]  # else the package
                        names = wanted or [names[-1]]
                    ours = [n for n in names if n.split(".")[0] == package]
                    if in_function and ours:
                        graph.function_imports.append((module, node.lineno, ours[0]))
                    for n in ours:
                        target = _resolve(graph, n)
                        while target is not None and target != package:
                            if target != module and not module.startswith(target + "."):
                                arrows.add(target)
                            if not package_inits:
                                break
                            target = target.rpartition(".")[0]  # importing a.b.c runs a.b
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    walk(node.body, True, module, arrows)
                elif isinstance(node, ast.ClassDef):
                    walk(node.body, in_function, module, arrows)
                elif isinstance(node, ast.If) and _is_type_checking(node):
                    walk(node.orelse, in_function, module, arrows)
                else:
                    for child in ast.iter_child_nodes(node):
                        if isinstance(child, ast.stmt):
                            walk([child], in_function, module, arrows)

        walk(tree.body, False)
        graph.arrows[module] = arrows
    return graph


if __name__ == "__main__":
    nn_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parents[2] / "nn"
    g = read(nn_dir)
    print(f"modules: {len(g.modules)}; top level: {len(g.top_level)}; arrows: "
          f"{sum(len(a) for a in g.arrows.values())}")
    for inits in (False, True):
        cycles = read(nn_dir, package_inits=inits).cycles()
        print(f"cycles{' (counting package __init__ runs)' if inits else ''}: {len(cycles)}")
        for c in cycles:
            print("  ", " <-> ".join(c))
    print(f"function-level imports: {len(g.function_imports)}")
    for m, line, name in g.function_imports:
        print(f"   {m}:{line} {name}")
