"""The course's notebooks for the site: found by glob, executed once, cached by content.

``executed_lessons()`` runs every ``tutorials/*.ipynb`` top to bottom in a fresh kernel of this
interpreter (headless matplotlib, the widgets' static pictures, one BLAS thread) and returns the
executed copies. A copy is cached under ``build/docs-notebooks/`` keyed by a hash of the
notebook, of every ``.py`` file of fpsim, nn and tutorials/ and of the results in docs/results/
(the Consequences sections read them), so a rebuild executes only what changed.
``exercises()`` returns the exercises and their worked solutions as stored: an exercise is a
task with stubs left to the reader, so it is shown unexecuted.

Run as a script to fill the cache ahead of a build: ``python docs/course_notebooks.py``. For a quick
draft of the prose, ``FPSIM_DOCS_EXECUTE=0 mkdocs serve`` shows the notebooks unexecuted.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "tutorials"
CACHE = ROOT / "build" / "docs-notebooks"
TIMEOUT_S = 600
# The kernel's environment: figures go into the cells' outputs (the inline backend; plain "Agg"
# would draw them nowhere), the widgets draw their starting state, and one BLAS thread
# (OpenBLAS's spinning threads slow a notebook many times over beside other busy work).
KERNEL_ENV = {
    "MPLBACKEND": "module://matplotlib_inline.backend_inline",
    "FPSIM_WIDGETS": "static",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
}


def lesson_names() -> list[str]:
    return sorted(p.name for p in TUTORIALS.glob("*.ipynb"))


def exercise_names() -> list[str]:
    return sorted(p.name for p in (TUTORIALS / "exercises").glob("*.ipynb"))


def solution_names() -> list[str]:
    return sorted(p.name for p in (TUTORIALS / "exercises" / "solutions").glob("*.ipynb"))


def heading(path: pathlib.Path) -> str:
    """The notebook's first markdown heading without its ``#``s ("" when it has none)."""
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return ""


def title(path: pathlib.Path) -> str:
    """The nav title: the notebook's heading, led by the file's number.

    ``exercises/01_round_to_nearest_even.ipynb`` (heading "Exercise · Round to nearest even,
    with integer operations") -> "01 · Round to nearest even, with integer operations"."""
    number = path.name.partition("_")[0]
    text = heading(path) or path.stem.replace("_", " ")
    for prefix in ("Exercise · ", "Solution · ", f"{number} · "):
        text = text.removeprefix(prefix)
    return f"{number} · {text}" if number.isdigit() else text


# what an executed notebook depends on besides itself: the code, and the committed results that
# the training notebooks' Consequences sections read (tutorials/consequences.py)
SOURCES = (("fpsim", "*.py"), ("nn", "*.py"), ("tutorials", "*.py"), ("docs/results", "*.json"))


def _source_hash() -> str:
    digest = hashlib.sha256()
    for folder, pattern in SOURCES:
        for path in sorted((ROOT / folder).rglob(pattern)):
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _execute(path: pathlib.Path) -> bytes:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    saved = {k: os.environ.get(k) for k in KERNEL_ENV}
    os.environ.update(KERNEL_ENV)
    try:
        NotebookClient(
            nb, timeout=TIMEOUT_S, kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
        ).execute()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return nbformat.writes(nb).encode()


def _missing_figures(data: bytes) -> list[int]:
    """Indices of code cells that call ``plt.show()``, ``plt.subplots`` or ``plt.figure`` and
    yet have no image among their outputs."""
    cells = json.loads(data)["cells"]
    missing = []
    for index, cell in enumerate(cells):
        source = "".join(cell["source"]) if cell["cell_type"] == "code" else ""
        if any(call in source for call in ("plt.subplots(", "plt.figure(", "plt.show(")):
            outputs = cell.get("outputs", [])
            if not any("image/png" in out.get("data", {}) for out in outputs):
                missing.append(index)
    return missing


def executed_lessons(log=print) -> dict[str, bytes]:
    """{notebook name: its executed copy}, executing only notebooks missing from the cache."""
    if os.environ.get("FPSIM_DOCS_EXECUTE", "1") == "0":
        return {name: (TUTORIALS / name).read_bytes() for name in lesson_names()}
    CACHE.mkdir(parents=True, exist_ok=True)
    sources = _source_hash()
    result: dict[str, bytes] = {}
    for name in lesson_names():
        path = TUTORIALS / name
        key = hashlib.sha256(path.read_bytes() + sources.encode()
                             + repr(sorted(KERNEL_ENV.items())).encode()).hexdigest()[:20]
        cached = CACHE / f"{path.stem}-{key}.ipynb"
        if not cached.exists():
            start = time.perf_counter()
            data = _execute(path)
            missing = _missing_figures(data)
            if missing:
                raise RuntimeError(f"{name}: cells {missing} draw a figure but have no image "
                                   "output")
            for stale in CACHE.glob(f"{path.stem}-*.ipynb"):
                stale.unlink()
            cached.write_bytes(data)
            log(f"docs: executed {name} in {time.perf_counter() - start:.1f} s")
        result[name] = cached.read_bytes()
    return result


def exercises() -> dict[str, bytes]:
    """{relative path under course/exercises/: notebook as stored} for exercises and solutions."""
    folder = TUTORIALS / "exercises"
    found = {name: (folder / name).read_bytes() for name in exercise_names()}
    found |= {
        f"solutions/{name}": (folder / "solutions" / name).read_bytes()
        for name in solution_names()
    }
    return found


if __name__ == "__main__":
    executed_lessons(log=lambda line: print(line, file=sys.stderr))
