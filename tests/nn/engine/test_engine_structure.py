"""The shape of nn's engine: imports point one way, and Tensor's operator table is complete.

Layers, lowest first (each module imports only from layers below it):

    fpsim  ->  nn.engine.sites, nn.engine.formats  ->  nn.engine.rounding, nn.engine.dtypes
           ->  nn.engine.tensor  ->  nn.engine.autograd
           ->  nn.functions.*  (which register Tensor's operators)  ->  layers, models, ...

(tests/nn/test_layout.py checks the whole package's layout.)
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nn
from nn.engine import tensor

ROOT = Path(nn.__file__).resolve().parent
ENGINE_LAYERS = [
    {"nn.engine", "nn.engine.sites", "nn.engine.formats", "nn.engine.kernels",
     "nn.engine.conv_kernels", "nn.engine.checks", "nn.engine.registry", "nn.engine.random",
     "nn.engine.memory", "nn.engine.blas", "nn.fp8.state", "nn.fp8.meta", "nn.fp8.recipes",
     "nn.functions.fp16_accumulate"},
    {"nn.engine.rounding", "nn.precision", "nn.precision.autocast", "nn.engine.dtypes"},
    {"nn.engine.tensor"},
    {"nn.engine.autograd", "nn.fp8.scope"},
    {"nn.functions._common", "nn.functions.activations", "nn.functions.cast",
     "nn.functions.elementwise", "nn.functions.linalg", "nn.functions.losses",
     "nn.functions.reductions", "nn.functions.shape", "nn.functions",
     "nn.functions.accumulate", "nn.functions.attention", "nn.functions.conv",
     "nn.functions.embedding", "nn.functions.norm", "nn.functions.pooling", "nn.fp8.ops"},
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(node: ast.Import | ast.ImportFrom) -> set[str]:
    """The nn modules an import statement loads (``from nn import x`` names module nn.x)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in MODULES}
    if node.module is None or node.level:
        return set()
    found = {node.module} if node.module in MODULES else set()
    found |= {f"{node.module}.{a.name}" for a in node.names} & MODULES.keys()
    return found


def imports_of(module: str, top_level_only: bool) -> set[str]:
    """The nn modules ``module`` imports at run time (``if TYPE_CHECKING:`` blocks skipped)."""
    tree = ast.parse(MODULES[module].read_text())
    found: set[str] = set()
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update(_imported(node))
        if top_level_only and isinstance(node, scopes):
            return  # runs later, if ever: not part of importing the module
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(module)
    return found


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def dfs(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for dep in sorted(graph.get(m, ())):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if dep not in state and (cycle := dfs(dep)):
                return cycle
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (cycle := dfs(m)):
            return cycle
    return None


def test_the_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _find_cycle(graph) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_import_scanner_sees_nested_imports_but_not_type_checking_ones():
    # tensor.py names autograd only under TYPE_CHECKING; autograd imports tensor at the top
    assert "nn.engine.autograd" not in imports_of("nn.engine.tensor", top_level_only=False)
    assert "nn.engine.tensor" in imports_of("nn.engine.autograd", top_level_only=True)
    # cli.py imports nn.plot inside a function: seen only when nested imports count
    assert "nn.plot" in imports_of("nn.cli", top_level_only=False)
    assert "nn.plot" not in imports_of("nn.cli", top_level_only=True)


def test_nn_modules_have_no_import_cycle_at_top_level():
    graph = {m: imports_of(m, top_level_only=True) - {"nn"} for m in MODULES if m != "nn"}
    assert _find_cycle(graph) is None


def test_engine_modules_import_only_from_layers_below_them_at_any_depth():
    layer_of = {m: i for i, layer in enumerate(ENGINE_LAYERS) for m in layer}
    assert set(layer_of) <= MODULES.keys()
    engine = [m for m in MODULES if m.startswith(("nn.functions", "nn.engine")) or m in layer_of]
    assert set(engine) == set(layer_of), "a new engine module needs a place in ENGINE_LAYERS"
    upward = {
        (m, dep)
        for m in engine
        for dep in imports_of(m, top_level_only=False)
        if dep != "nn" and layer_of.get(dep, len(ENGINE_LAYERS)) > layer_of[m]
    }
    assert upward == set()


def test_every_tensor_operator_is_registered_by_the_ops():
    assert set(tensor._OPS) == tensor.OPERATORS


def test_registering_an_unknown_operator_name_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"unknown operator names \['addd'\].*'add'"):
        tensor.register_ops(addd=lambda a, b: a)


@pytest.mark.parametrize("first", ["nn.engine.tensor", "nn.engine.autograd",
                                   "nn.functions.linalg", "nn.engine.rounding",
                                   "nn.precision.policy"])
def test_any_engine_module_imported_first_gives_working_operators(first):
    code = (f"import {first}, nn, numpy as np\n"
            "t = nn.Tensor([1.0, 2.0], requires_grad=True)\n"
            "(t * t).sum().backward()\n"
            "assert np.array_equal(t.grad.data, [2.0, 4.0])\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_ops_round_at_the_sites_nn_sites_names_forward_and_backward():
    import fpsim
    from nn.engine import sites
    from nn.engine.sites import name_scope

    def counted_sites(fmt_b: str) -> set[str]:
        a = nn.Tensor([1.1, 2.2], fmt="fp16", requires_grad=True)
        b = nn.Tensor([3.3, 4.4], fmt=fmt_b, requires_grad=True)
        with fpsim.monitor() as m:
            with name_scope("blk"):
                y = a * b
            y.backward(np.array([0.1, 0.2], np.float32))
        return set(m.counts)

    assert sites.op_output("Mul") == "Mul" and sites.op_input_grad("Mul", 1) == "grad_Mul_input1"
    # fp16 * fp16: the output, and the backward's own products in the "grad" scope
    assert {"blk/Mul", "blk/grad/Mul"} <= counted_sites("fp16")
    # fp16 * fp32: a's fp32 gradient is rounded to fp16 at the op's input site
    assert "blk/grad_Mul_input0" in counted_sites("fp32")
