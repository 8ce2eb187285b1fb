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


def test_readme_property_test_example_runs():
    """The fpsim.testing example under "Property tests" is a working hypothesis test."""
    text = README.read_text()
    section = text[text.index("## Property tests"):]
    code = section[section.index("```python") + len("```python"):]
    code = code[: code.index("```")]
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 (the README's own code)
    namespace["test_values_survive_a_bit_round_trip"]()
