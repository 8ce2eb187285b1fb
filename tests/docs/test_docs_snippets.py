"""Every code block of README.md and of the documentation site's pages runs as shown.

Per page, in order, in one namespace (a later block may use an earlier block's names):

- a ``python`` block with ``>>>`` prompts is a doctest: each example must print what the page
  shows (whitespace normalised);
- a ``python`` block without prompts is executed, and any ``test_*`` function it defines is
  called (the property-test example);
- a ``console`` block is a shell session: each ``$ fpsim ...`` line is run and must print the
  lines that follow it, exactly.

A ``python`` block whose first line is ``# not run here (...)`` says why it cannot run on
this machine (a GPU script) and is skipped. ``sh`` blocks (set-up commands: venvs, pip,
jupyter, mkdocs) are not run here; .ci/run runs the
set-up and the strict site build.
"""

from __future__ import annotations

import doctest
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
GENERATED = ("api", "course/exercises")  # written at build time by docs/hooks.py
BLOCK = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
RUN_LANGUAGES = {"python", "console"}
KNOWN_LANGUAGES = RUN_LANGUAGES | {"sh", "text", ""}


def pages() -> list[pathlib.Path]:
    found = [ROOT / "README.md"]
    for path in sorted(DOCS.rglob("*.md")):
        rel = path.relative_to(DOCS).as_posix()
        if rel == "README.md" or any(rel.startswith(g + "/") for g in GENERATED):
            continue
        found.append(path)
    return found


def blocks(path: pathlib.Path) -> list[tuple[str, str, int]]:
    """(language, code, line number) of every fenced block of the page."""
    text = path.read_text()
    return [(m[1], m[2], text.count("\n", 0, m.start()) + 1) for m in BLOCK.finditer(text)]


def _doctest(code: str, namespace: dict, where: str) -> None:
    parser = doctest.DocTestParser()
    test = parser.get_doctest(code, namespace, where, where, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    out: list[str] = []
    # doctest reads what sys.displayhook prints: Python's own hook, whatever an earlier test in
    # this worker may have left there
    hook, sys.displayhook = sys.displayhook, sys.__displayhook__
    try:
        runner.run(test, out=out.append, clear_globs=False)
    finally:
        sys.displayhook = hook
    namespace.update(test.globs)  # DocTest ran in a copy; later blocks see its names
    assert runner.failures == 0, f"{where}: an example prints something else\n" + "".join(out)


def _console(code: str, where: str) -> None:
    commands: list[tuple[str, list[str]]] = []
    for line in code.rstrip("\n").split("\n"):
        if line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            assert commands, f"{where}: output before the first $ command"
            commands[-1][1].append(line)
    for command, expected in commands:
        argv = shlex.split(command)
        assert argv[0] == "fpsim", f"{where}: only fpsim commands run here, not {command!r}"
        done = subprocess.run([sys.executable, "-m", "fpsim", *argv[1:]], capture_output=True,
                              text=True, timeout=300, cwd=ROOT)
        assert done.returncode == 0, f"{where}: {command} failed: {done.stderr}"
        got = [line.rstrip() for line in done.stdout.rstrip("\n").split("\n")]
        assert got == [line.rstrip() for line in expected], (
            f"{where}: {command} printed\n" + "\n".join(got))


@pytest.fixture
def float32_policy():
    """Pages set nn's global policy; every page starts from, and leaves, float32."""
    import nn

    nn.set_global_policy("float32")
    yield
    nn.set_global_policy("float32")


@pytest.mark.parametrize("path", pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_code_block_runs_as_shown(path, float32_policy, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict = {"__name__": "__docs__"}
    for language, code, line in blocks(path):
        where = f"{path.relative_to(ROOT)}:{line}"
        assert language in KNOWN_LANGUAGES, f"{where}: unknown block language {language!r}"
        if language == "python" and code.startswith("# not run here ("):
            continue
        if language == "console":
            _console(code, where)
        elif language == "python" and ">>>" in code:
            _doctest(code, namespace, where)
        elif language == "python":
            before = set(namespace)
            exec(compile(code, where, "exec"), namespace)  # noqa: S102 (the page's own code)
            for name in sorted(set(namespace) - before):
                if name.startswith("test_") and callable(namespace[name]):
                    namespace[name]()


def test_the_snippet_runner_fails_on_a_wrong_output():
    """The doctest path is not vacuous: a wrong printed value fails."""
    with pytest.raises(AssertionError, match="prints something else"):
        _doctest(">>> 1 + 1\n3\n", {}, "check")


def test_every_page_with_code_has_a_block_that_runs():
    """The pages whose job is to show code (the concepts, the faces, home) have python blocks
    this test runs, so a block mislabelled ``text`` cannot slip through."""
    for name in ("index.md", "from-keras.md", "from-pytorch.md", "from-transformer-engine.md",
                 "troubleshooting.md", *[f"concepts/{p.name}" for p in
                                         (DOCS / "concepts").glob("*.md")]):
        langs = {language for language, _, _ in blocks(DOCS / name)}
        assert "python" in langs, f"docs/{name} has no python block"
