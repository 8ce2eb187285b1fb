"""The README's Python examples run and print what the README says (doctest)."""

from __future__ import annotations

import doctest
import pathlib

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_readme_examples_print_what_the_readme_shows():
    result = doctest.testfile(str(README), module_relative=False,
                              optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, "the README has no >>> examples"
    assert result.failed == 0, f"{result.failed} README example(s) print something else"
