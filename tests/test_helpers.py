"""tests/helpers.py: what "the same value" means, and that no test file types it again."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
from helpers import all_same, same_arrays, same_values


def test_same_values_tells_signed_zeros_apart_and_matches_nan_with_nan():
    got = same_values([0.0, -0.0, np.nan, 1.0], [-0.0, -0.0, np.nan, np.nextafter(1.0, 2.0)])
    assert got.tolist() == [False, True, True, False]
    assert same_values(0.0, -0.0, signed_zeros=False)
    assert not all_same([1.0], [1.0, 1.0])  # shapes differ
    assert all_same(np.float32([np.nan, -0.0]), [np.nan, -0.0])
    assert same_arrays([np.ones(2)], [np.ones(2)]) and not same_arrays([np.ones(2)], [])


def test_no_test_file_defines_its_own_same():
    here = Path(__file__).parent
    own = [f"{p.relative_to(here)}:{node.lineno}" for p in sorted(here.rglob("*.py"))
           if p.name != "helpers.py"
           for node in ast.walk(ast.parse(p.read_text()))
           if isinstance(node, ast.FunctionDef) and node.name in ("same", "_same")]
    assert own == []
