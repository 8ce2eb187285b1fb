"""A griffe extension for the API reference: ``>>>`` examples in docstrings become code blocks.

The docstrings are written for ``help()`` and doctest, where an example is a run of lines
starting with ``>>>`` followed by its output up to a blank line. Markdown would read them as
prose (``m.counts["demo"]["overflow"]`` as a link), so each such run is fenced as ``pycon``.
"""

from __future__ import annotations

from typing import Any

import griffe


def fence_examples(text: str) -> str:
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if not stripped.startswith(">>>"):
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(stripped)]
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        out.append(f"{indent}```")
    return "\n".join(out)


class FenceDoctestExamples(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_examples(obj.docstring.value)
