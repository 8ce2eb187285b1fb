"""How ``fpsim`` finds its commands, and the command line's process-level behaviour.

- fpsim never imports nn: an ast scan of every module of the fpsim package (imports at any
  level, function bodies included); nn's commands arrive through the ``fpsim.commands`` entry
  point (or the built-in fallback table) only when asked for.
- ``--version``, ``python -m fpsim``, ``fpsim warmup``, a closed output pipe.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

import fpsim
import fpsim.cli as cli

FPSIM_DIR = Path(fpsim.__file__).parent


def _imported_modules(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant)):
            names.add(str(node.args[0].value))
    return names


@pytest.mark.parametrize("path", sorted(FPSIM_DIR.rglob("*.py")), ids=lambda p: p.name)
def test_no_fpsim_module_imports_nn_at_any_level(path):
    found = _imported_modules(ast.parse(path.read_text(encoding="utf-8")))
    assert not {m for m in found if m == "nn" or m.startswith("nn.")}, path


def test_the_import_scan_sees_imports_inside_functions():
    # the oracle of the scan above: it must catch a lazy import in a function body
    code = "def f():\n    from nn import cli\n    import nn.experiments\n"
    assert _imported_modules(ast.parse(code)) == {"nn", "nn.experiments"}


def _run(*argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fpsim", *argv], capture_output=True,
                          text=True, **kw)


def test_builtin_commands_run_without_importing_nn():
    probe = ("import sys; from fpsim.cli import main; main(['round', '1', '-f', 'fp16']); "
             "print('nn' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "False"


class _FakeEntryPoint:
    def __init__(self, value: str, target: object) -> None:
        self.value, self._target = value, target

    def load(self) -> object:
        return self._target


def _hello(args: argparse.Namespace) -> int:
    print(f"hello {args.who}")
    return 0


HELLO = [cli.Command("hello", "say hello", lambda p: p.add_argument("who"), _hello)]


def test_a_command_registered_by_entry_point_is_dispatched(monkeypatch, capsys):
    def entry_points(group: str):
        assert group == cli.ENTRY_POINT_GROUP
        return [_FakeEntryPoint("hello_pkg.cli:COMMANDS", HELLO)]

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    assert cli.main(["hello", "world"]) == 0
    assert capsys.readouterr().out == "hello world\n"


def test_without_entry_point_metadata_the_fallback_table_finds_nn(monkeypatch):
    pytest.importorskip("nn")
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [])
    commands, problems = cli.plugin_commands()
    assert [c.name for c in commands] == ["train", "compare"] and problems == []


def test_the_entry_point_and_the_fallback_naming_one_module_load_it_once(monkeypatch):
    nn_cli = pytest.importorskip("nn.cli")
    ep = _FakeEntryPoint("nn.cli:COMMANDS", nn_cli.COMMANDS)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [ep])
    commands, _ = cli.plugin_commands()
    assert [c.name for c in commands] == ["train", "compare"]


def test_a_package_whose_commands_fail_to_load_is_named_in_the_error(monkeypatch, capsys):
    class Broken(_FakeEntryPoint):
        def load(self) -> object:
            raise ImportError("No module named 'missing_pkg'")

    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group: [Broken("missing_pkg.cli:COMMANDS", None)])
    monkeypatch.setattr(cli, "KNOWN_COMMAND_MODULES", ())
    assert cli.main(["train"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "invalid choice: 'train'" in err
    assert "missing_pkg.cli:COMMANDS did not load (ImportError" in err


def test_version_flag_python_m_and_both_packages_agree():
    nn = pytest.importorskip("nn")
    expected = importlib.metadata.version("fpsim")
    assert fpsim.__version__ == nn.__version__ == expected
    done = _run("--version")
    assert (done.returncode, done.stdout) == (0, f"fpsim {expected}\n")


def test_python_m_fpsim_runs_the_command_line_with_its_exit_codes():
    ok = _run("round", "65520", "-f", "fp16")
    assert ok.returncode == 0 and ok.stdout.splitlines()[1].split()[:2] == ["65520.0", "inf"]
    bad = _run("round", "1", "-f", "fp61")
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1


def test_output_into_a_closed_pipe_ends_without_a_traceback():
    values = " ".join(str(i) for i in range(1, 20001))
    done = subprocess.run(f"'{sys.executable}' -m fpsim round {values} -f fp16 | head -1",
                          shell=True, capture_output=True, text=True)
    assert done.stdout.split() == ["input", "float16", "bits"]
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr
    assert done.stderr == ""


def test_warmup_command_runs_fpsims_tasks_then_nns_with_a_progress_bar(monkeypatch):
    warmup = pytest.importorskip("fpsim.warmup")
    calls = []
    monkeypatch.setattr(warmup, "run_tasks", lambda tasks, progress: calls.append(
        ([label for label, _ in tasks], progress)))
    assert cli.main(["warmup"]) == 0
    [(labels, progress)] = calls
    fpsim_labels = [label for label, _ in warmup.tasks()]
    assert progress is True and labels[:len(fpsim_labels)] == fpsim_labels
    # the tutorials train nn models: the command compiles nn's kernels too (group fpsim.warmup)
    assert labels[len(fpsim_labels):] == ["nn training step", "nn conv kernels",
                                          "nn transformer kernels"]


def test_a_warmup_plugin_that_fails_to_load_is_one_line_and_the_rest_still_runs(
        monkeypatch, capsys):
    warmup = pytest.importorskip("fpsim.warmup")
    ran = []
    monkeypatch.setattr(warmup, "run_tasks", lambda tasks, progress: ran.append(len(tasks)))
    monkeypatch.setattr(cli, "KNOWN_WARMUP_MODULES", ("nn.warmup:no_such_function",))
    monkeypatch.setattr(cli.importlib.metadata, "entry_points", lambda group: [])
    assert cli.main(["warmup"]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nn.warmup:no_such_function did not load" in err
    assert ran == [len(warmup.tasks())]


def test_warmup_without_the_warmup_module_says_so_in_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "fpsim.warmup", None)  # makes the import fail
    assert cli.main(["warmup"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "no fpsim.warmup module" in captured.err
