"""Notebooks 06 and 07 (Part II's first training notebooks) keep the promises of their rebuild,
read from their source without running them (``test_tutorials.py`` runs them): no staged loss
weight, loss scaling named in 06 only as notebook 07's subject, the corrected rules of 07 kept,
and no silent wait before a cell that builds or trains a model."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

TUTORIALS = pathlib.Path(__file__).resolve().parent.parent / "tutorials"
NB06 = TUTORIALS / "06_mixed_precision_training.ipynb"
NB07 = TUTORIALS / "07_loss_scaling.ipynb"
# calls that build, compile or train a model (each takes a noticeable time on a first run)
SLOW_CALLS = ("ex.master_weights_lm(", "ex.adam_state(", "ex.bf16_vs_fp16(",
              "ex.underflow_from_averaging(", "kernel_gradient_swamping(", "ex.build_lm(",
              ".fit(")


def _cells(path: pathlib.Path, kind: str) -> list[str]:
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == kind]


def _top_level_lines(source: str) -> list[str]:
    """The cell's lines outside ``def`` bodies (a function's body runs when it is called)."""
    kept, in_def = [], False
    for line in source.splitlines():
        if in_def and (line.startswith((" ", "\t")) or not line.strip()):
            continue
        in_def = line.startswith("def ")
        if not in_def:
            kept.append(line)
    return kept


@pytest.mark.parametrize("path", [NB06, NB07], ids=["06", "07"])
def test_training_notebooks_use_no_staged_loss_weight(path):
    source = "\n".join(_cells(path, "code") + _cells(path, "markdown"))
    for staged in ("LOSS_WEIGHT", "WeightedLoss", "2^-18", "2**-18", "run_story", "story_model"):
        assert staged not in source, f"{path.name} still uses the digits story's {staged}"


def test_notebook_06_names_loss_scaling_only_as_notebook_07s_subject():
    for text in _cells(NB06, "markdown"):
        if re.search(r"loss[ -]scal", text, re.IGNORECASE):
            assert re.search(r"[Nn]otebook\s+07", text), (
                f"06 mentions loss scaling without pointing to notebook 07:\n{text[:200]}")


def test_notebook_07_keeps_its_corrected_rules():
    text = "\n".join(_cells(NB07, "markdown"))
    code = "\n".join(_cells(NB07, "code"))
    assert "14 - (largest exponent)" in text and "k_max = 14 - top" in code
    assert "no subnormals" in text and "65520" in text


@pytest.mark.parametrize("path", [NB06, NB07], ids=["06", "07"])
def test_every_cell_that_builds_or_trains_prints_a_line_first(path):
    for source in _cells(path, "code"):
        lines = _top_level_lines(source)
        slow = next((i for i, line in enumerate(lines) if any(c in line for c in SLOW_CALLS)),
                    None)
        if slow is None:
            continue
        assert any("print(" in line for line in lines[:slow]), (
            f"{path.name}: a cell builds or trains before printing anything:\n{source[:300]}")


def test_both_notebooks_link_the_dynamic_loss_scaler_exercise():
    link = "exercises/04_dynamic_loss_scaler.ipynb"
    assert all(link in "\n".join(_cells(p, "markdown")) for p in (NB06, NB07))
