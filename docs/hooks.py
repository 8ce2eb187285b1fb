"""MkDocs hooks: the parts of the site generated from the repository at build time.

- The course: every ``tutorials/*.ipynb`` is executed once (``docs/course_notebooks.py`` caches the
  executed copy by content) and copied to ``docs/course/`` for mkdocs-jupyter to render with its
  outputs; ``tutorials/exercises/*.ipynb`` and their solutions are copied as they are. The
  notebooks are found by glob, and the nav's "The course" section lists what was found.
- The API reference: one page per public package (``docs/api_pages.py``), written to
  ``docs/api/`` before the files are collected.
- The CLI reference: ``<!-- cli-reference -->`` in a page becomes the help of every command,
  formatted by the argument parsers themselves (``fpsim.cli.build_parser``).
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import sys
from typing import Any

DOCS = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS))

import api_pages  # noqa: E402
import course_notebooks as notebooks  # noqa: E402

CLI_MARKER = "<!-- cli-reference -->"
EXERCISES = notebooks.TUTORIALS / "exercises"


def _write_if_changed(path: pathlib.Path, data: bytes) -> None:
    """Write only when the content differs, so `mkdocs serve` does not rebuild in a loop."""
    if path.exists() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _course_nav() -> list[Any]:
    """The nav entries of the course: the overview, each notebook, then the exercises."""
    lessons: list[Any] = ["course/index.md"]
    for name in notebooks.lesson_names():
        lessons.append({notebooks.title(notebooks.TUTORIALS / name): f"course/{name}"})
    exercises: list[Any] = ["course/exercises.md"]
    for name in notebooks.exercise_names():
        exercises.append({notebooks.title(EXERCISES / name): f"course/exercises/{name}"})
    solutions: list[Any] = [
        {notebooks.title(EXERCISES / "solutions" / name): f"course/exercises/solutions/{name}"}
        for name in notebooks.solution_names()
    ]
    lessons.append({"Exercises": exercises})
    lessons.append({"Solutions": solutions})
    return lessons


def _api_nav() -> list[Any]:
    return ["api/index.md"] + [
        {package: f"api/{api_pages.page_name(package)}"} for package, _ in api_pages.PACKAGES
    ]


def on_config(config: Any) -> Any:
    """Fill the nav's course and API sections from the notebooks and packages that exist."""
    generated = {"The course": _course_nav, "API reference": _api_nav}
    for entry in config["nav"]:
        for key, make in generated.items():
            if isinstance(entry, dict) and key in entry:
                entry[key] = make()
    return config


def on_pre_build(config: Any) -> None:
    """Put the executed notebooks, the exercises and the API pages in place, and remove copies
    whose source is gone (a renamed notebook must not linger as a page)."""
    lessons = notebooks.executed_lessons()
    exercises = notebooks.exercises()
    api = api_pages.pages()
    for folder, pattern, keep in ((DOCS / "course", "*.ipynb", lessons),
                                  (DOCS / "course" / "exercises", "**/*.ipynb", exercises),
                                  (DOCS / "api", "*.md", api)):
        for stale in folder.glob(pattern):
            if stale.relative_to(folder).as_posix() not in keep:
                stale.unlink()
    for name, data in lessons.items():
        _write_if_changed(DOCS / "course" / name, data)
    for name, data in exercises.items():
        _write_if_changed(DOCS / "course" / "exercises" / name, data)
    for name, text in api.items():
        _write_if_changed(DOCS / "api" / name, text.encode())


def cli_reference() -> str:
    """Markdown: the top-level help, then each command's, as the parsers print them."""
    os.environ["COLUMNS"] = "100"
    import argparse

    from fpsim.cli import build_parser

    parser = build_parser()
    parts = ["## fpsim", "", "```text", parser.format_help().rstrip(), "```", ""]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                parts += [f"## fpsim {name}", "", "```text", sub.format_help().rstrip(), "```", ""]
    return "\n".join(parts)


def course_list() -> str:
    """Markdown, relative to course/index.md: each notebook with its title."""
    return "\n".join(
        f"- [{notebooks.title(notebooks.TUTORIALS / name)}]({name})"
        for name in notebooks.lesson_names()
    )


def exercise_list() -> str:
    """Markdown, relative to course/exercises.md: each exercise and its worked solution."""
    solutions = set(notebooks.solution_names())
    lines = []
    for name in notebooks.exercise_names():
        line = f"- [{notebooks.title(EXERCISES / name)}](exercises/{name})"
        if name in solutions:
            line += f" ([solution](exercises/solutions/{name}))"
        lines.append(line)
    return "\n".join(lines)


MARKERS = {
    CLI_MARKER: cli_reference,
    "<!-- course-list -->": course_list,
    "<!-- exercise-list -->": exercise_list,
}


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    for marker, make in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown


# A notebook's links to other notebooks (``02_rounding.ipynb``, ``exercises/...``) point at
# their rendered pages: the site mirrors tutorials/ under course/.
_NOTEBOOK_LINK = re.compile(r'href="([^":#"]+)\.ipynb(#[^"]*)?"')


# The notebooks' math: mkdocs-jupyter leaves MathJax 2's script without a source (the page's
# own MathJax configuration follows it). The site carries its own copy of MathJax
# (jupyter-server-mathjax, in the docs extra) so that the math renders offline; its combined
# configuration file holds the TeX input and HTML output in one script.
_MATHJAX_TAG = '<script src=""> </script>'
_MATHJAX_SRC = "assets/mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"


def _mathjax_static() -> pathlib.Path | None:
    try:
        import jupyter_server_mathjax
    except ImportError:
        return None
    return pathlib.Path(jupyter_server_mathjax.__file__).parent / "static"


def on_post_page(output: str, page: Any, config: Any) -> str:
    if page.file.src_uri.endswith(".ipynb"):
        output = _NOTEBOOK_LINK.sub(lambda m: f'href="{m[1]}.html{m[2] or ""}"', output)
        if _mathjax_static() is not None and _MATHJAX_TAG in output:
            up = "../" * page.file.dest_uri.count("/")
            output = output.replace(_MATHJAX_TAG, f'<script src="{up}{_MATHJAX_SRC}"></script>')
    return output


def on_post_build(config: Any) -> None:
    """Copy MathJax (with its English strings only) into the site for the notebooks' math."""
    static = _mathjax_static()
    if static is None:
        return
    target = pathlib.Path(config["site_dir"]) / "assets" / "mathjax"
    shutil.copytree(static, target, dirs_exist_ok=True,
                    ignore=lambda folder, names: [n for n in names if n != "en"]
                    if pathlib.Path(folder).name == "localization" else [])
