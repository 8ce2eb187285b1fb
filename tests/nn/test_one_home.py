"""Each of nn's rules has one home: these tests enumerate the places a rule could be restated
(nn's source, read as syntax trees) and require exactly one."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

import nn
import nn.functions
from nn.engine import checks, sites

AUTOCAST = importlib.import_module("nn.precision.autocast")

ROOT = Path(nn.__file__).parent
SOURCES = {p: ast.parse(p.read_text()) for p in sorted(ROOT.rglob("*.py"))}


def _calls(name: str) -> list[tuple[Path, ast.Call]]:
    """Every call of a function or method spelled ``name`` in nn."""
    found = []
    for path, tree in SOURCES.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                if (isinstance(f, ast.Name) and f.id == name) or (
                        isinstance(f, ast.Attribute) and f.attr == name):
                    found.append((path, node))
    return found


def _defs(name: str) -> list[Path]:
    """The modules that define a top-level function or class ``name``."""
    return [path for path, tree in SOURCES.items() for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name]


def test_the_name_scope_lives_in_sites_and_nowhere_else():
    made = [(p.relative_to(ROOT).as_posix(), c) for p, c in _calls("ContextVar")
            if c.args and isinstance(c.args[0], ast.Constant) and "name_scope" in c.args[0].value]
    assert [p for p, _ in made] == ["engine/sites.py"]
    assert _defs("name_scope") == [ROOT / "engine/sites.py"] == _defs("current_scope")
    assert nn.engine.autograd.name_scope is sites.name_scope  # re-exported, not restated


def test_every_tensor_operator_is_registered_exactly_once():
    registered: dict[str, list[str]] = {}
    for path, call in _calls("register_ops"):
        for kw in call.keywords:
            registered.setdefault(str(kw.arg), []).append(path.relative_to(ROOT).as_posix())
    assert registered and all(places == ["functions/__init__.py"]
                              for places in registered.values()), registered
    assert "backward" in registered


def test_argument_checks_are_defined_in_checks_only():
    for name in ("check_number", "check_seed", "_positive_float32", "_factor"):
        assert _defs(name) == [], name
    for name in ("count", "number", "seed", "positive_float32", "factor", "loss_scale", "device"):
        assert _defs(name) == [ROOT / "engine/checks.py"], name


def test_the_checkpoint_touches_no_private_field_of_a_model_or_optimizer():
    tree = SOURCES[ROOT / "saving/checkpoint.py"]
    private = sorted({f"{node.value.id}.{node.attr}" for node in ast.walk(tree)
                      if isinstance(node, ast.Attribute) and node.attr.startswith("_")
                      and not node.attr.startswith("__") and isinstance(node.value, ast.Name)
                      and node.value.id in ("model", "scaler", "inner", "opt")})
    assert private == []


OURS = [p for p in SOURCES if not p.relative_to(ROOT).as_posix().startswith(
    ("experiments", "cli.py", "plot.py"))]  # (the experiments define their own settings)


@pytest.mark.parametrize("literal,home", [
    (2.0**15, "precision/loss_scale.py"),  # Keras's initial loss scale
])
def test_a_default_is_written_once(literal, home):
    places = sorted({p.relative_to(ROOT).as_posix() for p, tree in SOURCES.items() if p in OURS
                     for node in ast.walk(tree)
                     if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow)
                     and isinstance(node.left, ast.Constant) and isinstance(node.right,
                                                                             ast.Constant)
                     and node.left.value ** node.right.value == literal})
    assert places == [home]


def _batch_size_defaults(tree: ast.AST, value: int) -> int:
    """How often ``value`` is written as a batch size: a parameter ``batch_size=<value>``, an
    expression mixing ``batch_size`` and ``<value>`` (``batch_size or 32``), or a constant
    ``*BATCH_SIZE = <value>``."""
    found = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            args = node.args.args[len(node.args.args) - len(node.args.defaults):]
            found += sum(a.arg == "batch_size" and isinstance(d, ast.Constant) and d.value == value
                         for a, d in zip(args, node.args.defaults, strict=True))
        elif isinstance(node, (ast.BoolOp, ast.IfExp)):
            names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            found += "batch_size" in names and any(
                isinstance(n, ast.Constant) and n.value == value for n in ast.walk(node))
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            found += node.value.value == value and any(
                isinstance(t, ast.Name) and t.id.endswith("BATCH_SIZE") for t in node.targets)
    return found


def test_keras_batch_size_is_one_constant():
    places = {p.relative_to(ROOT).as_posix(): n for p, tree in SOURCES.items() if p in OURS
              if (n := _batch_size_defaults(tree, 32))}
    assert places == {"datasets/dataset.py": 1}


def test_the_growth_intervals_are_written_once_per_face():
    """2000 (the growth interval: Keras's in loss_scale.py, PyTorch's in grad_scaler.py)
    appears once per face among the modules that speak of loss scaling."""
    places = sorted(p.relative_to(ROOT).as_posix() for p, tree in SOURCES.items()
                    if p in OURS and "scale" in p.read_text()
                    for node in ast.walk(tree)
                    if isinstance(node, ast.Constant) and type(node.value) is int
                    and node.value == 2000)
    assert places == ["precision/grad_scaler.py", "precision/loss_scale.py"]


def _op_wrappers() -> list[str]:
    return sorted(name for name in nn.functions.__all__ if name[0].islower()
                  and inspect.isfunction(getattr(nn.functions, name))
                  and not name.startswith("autocast_"))


def test_every_op_has_an_entry_in_the_cast_policy_table_for_every_device():
    ops = _op_wrappers()
    assert len(ops) >= 38
    for device, table in AUTOCAST.CAST_POLICY.items():
        assert sorted(table) == ops, device
        assert set(table.values()) <= set(AUTOCAST.RULES)


def test_an_op_asks_the_cast_policy_table_by_its_own_name():
    """``autocast_inputs("<op>", ...)`` only inside the wrapper of that op, and every op a
    device's table does not simply PROMOTE asks it."""
    asked: dict[str, str] = {}
    for path, tree in SOURCES.items():
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef):
                for node in ast.walk(fn):
                    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == \
                            "autocast_inputs" and isinstance(node.args[0], ast.Constant):
                        assert node.args[0].value == fn.name, (path, fn.name)
                        asked[fn.name] = path.name
    cast_ops = {op for table in AUTOCAST.CAST_POLICY.values() for op, rule in table.items()
                if rule != AUTOCAST.PROMOTE}
    assert set(asked) == cast_ops


def test_an_unknown_op_in_the_cast_policy_table_raises_naming_it():
    with pytest.raises(KeyError, match="no entry for op 'frobnicate'"):
        AUTOCAST.cast_policy("frobnicate")


def test_names_docstrings_give_examples_of_their_own_registry():
    for module in (nn.losses, nn.metrics):
        doc = module.names.__doc__
        example = doc.split('("')[1].split('"')[0]
        assert example in module.names(), module.__name__


def test_the_loss_scale_checker_is_the_one_the_faces_call():
    users = sorted({p.relative_to(ROOT).as_posix() for p, c in _calls("loss_scale")
                    if isinstance(c.func, ast.Attribute) and getattr(c.func.value, "id", "") ==
                    "checks" or (isinstance(c.func, ast.Name) and p.name == "loss_scale.py")})
    assert "models/model.py" in users and "precision/loss_scale.py" in users
    assert checks.loss_scale("x", 1.0) == 1.0


def test_the_keras_policy_forms_are_one_tuple_that_the_table_and_the_error_spell():
    policy = importlib.import_module("nn.precision.policy")
    with pytest.raises(ValueError) as err:
        nn.Policy("no_such_policy")
    for form in policy.KERAS_FORMS:
        assert nn.Policy(form).name == form
        assert f"``{form!r}``".replace("'", '"') in policy.__doc__
        assert repr(form) in str(err.value)
