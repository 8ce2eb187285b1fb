"""Every tutorial notebook runs top to bottom, is stored without outputs and runs within a minute.

The notebooks' asserts are their claims, so a numerics regression fails here. Notebooks are
found by glob, so a new ``tutorials/NN_*.ipynb`` is tested without touching this file; the
classroom exercises (``tutorials/exercises/``) are tested in ``tests/test_exercises.py``.
"""

from __future__ import annotations

import os
import pathlib
import re

import nbformat
import pytest
from notebooks import run_notebook

# This module's notebook tests start Jupyter kernels: one pytest-xdist worker runs the module
# (pytest -n auto --dist loadgroup), so two kernels never start at once and race for ports.
pytestmark = pytest.mark.xdist_group("jupyter")

TUTORIALS = pathlib.Path(__file__).resolve().parent.parent / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("*.ipynb"))
TIME_LIMIT_S = 60
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
EXPLORER_CALL = re.compile(
    r"widgets\.(bit_explorer|value_slider|rounding_comparer|format_builder|loss_scale_slider)\(")
# Run live (as a student's Jupyter runs them: explorers live, matplotlib inline): the Part I
# notebooks with explorers, 01 and 02, on every run; every notebook with
# FPSIM_LIVE_NOTEBOOKS=all. A live explorer once hung `jupyter nbconvert --execute` on 01
# (fpsim.widgets.live); the static runs above cannot see such a failure.
LIVE = NOTEBOOKS if os.environ.get("FPSIM_LIVE_NOTEBOOKS") == "all" else [
    p for p in NOTEBOOKS if p.name.startswith(("01_", "02_"))]


def _ids(paths: list[pathlib.Path]) -> list[str]:
    return [p.stem for p in paths]


def test_tutorials_folder_has_the_first_three_notebooks() -> None:
    names = {p.name for p in NOTEBOOKS}
    for name in (
        "01_anatomy_of_a_float.ipynb",
        "02_rounding.ipynb",
        "03_overflow_and_underflow.ipynb",
    ):
        assert name in names, f"tutorials/{name} is missing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_is_stored_without_outputs(path: pathlib.Path) -> None:
    nb = nbformat.read(path, as_version=4)
    dirty = [
        i
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count"))
    ]
    assert not dirty, (
        f"{path.name}: cells {dirty} have stored outputs or execution counts; clear them "
        "(e.g. jupyter nbconvert --clear-output --inplace) before committing"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_runs_top_to_bottom_within_a_minute(path: pathlib.Path) -> None:
    nb = run_notebook(path, timeout=TIME_LIMIT_S)
    seconds = nb.metadata["execution_seconds"]
    assert seconds < TIME_LIMIT_S, f"{path.name} took {seconds:.1f} s (limit {TIME_LIMIT_S} s)"


@pytest.mark.parametrize("path", LIVE, ids=_ids(LIVE))
def test_notebook_runs_live_as_in_a_students_jupyter_and_its_explorers_leave_a_picture(
    path: pathlib.Path,
) -> None:
    nb = run_notebook(path, timeout=TIME_LIMIT_S, live=True)
    seconds = nb.metadata["execution_seconds"]
    assert seconds < TIME_LIMIT_S, f"{path.name} took {seconds:.1f} s live (limit {TIME_LIMIT_S} s)"
    cells = [c for c in nb.cells if c.cell_type == "code" and EXPLORER_CALL.search(c.source)]
    explorers = [out.data for cell in cells for out in cell.get("outputs", [])
                 if WIDGET_VIEW in out.get("data", {})]
    assert len(explorers) >= len(cells), f"{path.name}: {len(explorers)} live explorers"
    for data in explorers:  # the starting state, for GitHub, the docs site, an HTML export
        assert not data["text/plain"].startswith(("VBox(", "Explorer(")), data["text/plain"]
        assert data["text/html"].startswith("<pre>"), data["text/html"][:80]
