"""Every tutorial notebook runs top to bottom, is stored without outputs and runs within a minute.

The notebooks' asserts are their claims, so a numerics regression fails here. Notebooks are
found by glob, so a new ``tutorials/NN_*.ipynb`` is tested without touching this file; the
classroom exercises (``tutorials/exercises/``) are tested in ``tests/test_exercises.py``.
"""

from __future__ import annotations

import pathlib

import nbformat
import pytest
from notebooks import run_notebook

# This module's notebook tests start Jupyter kernels: one pytest-xdist worker runs the module
# (pytest -n auto --dist loadgroup), so two kernels never start at once and race for ports.
pytestmark = pytest.mark.xdist_group("jupyter")

TUTORIALS = pathlib.Path(__file__).resolve().parent.parent / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("*.ipynb"))
TIME_LIMIT_S = 60


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
