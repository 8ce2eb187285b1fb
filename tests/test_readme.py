"""README.md is the landing page: short, with the set-up commands CI mirrors and links that
resolve. Its code blocks run as shown (tests/docs/test_docs_snippets.py runs them)."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TEST_COMMAND = "python -m pytest -q -n auto --dist loadgroup"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_readme_is_at_most_200_lines():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail into docs/"


def test_readme_test_command_is_the_one_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    assert TEST_COMMAND in README.read_text()
    assert TEST_COMMAND in ci, ".ci/run and README.md run the suite with different commands"


def test_readme_shows_exactly_two_setup_commands_and_the_tutorials_and_docs_commands():
    text = README.read_text()
    setup = text[text.index("## Set-up: two commands"):text.index("## The tutorials")]
    assert setup.count("```sh") == 2
    assert "jupyter lab tutorials/" in text
    assert "mkdocs serve" in text


def test_every_relative_link_in_the_readme_points_to_an_existing_file():
    for target in LINK.findall(README.read_text()):
        if "://" in target or target.startswith("#"):
            continue
        path = (ROOT / target.split("#")[0]).resolve()
        assert path.exists(), f"README.md links to {target}, which does not exist"


def test_readme_links_into_the_documentation_site():
    targets = {t.split("#")[0] for t in LINK.findall(README.read_text())}
    for page in ("docs/index.md", "docs/semantics.md", "docs/course/index.md", "docs/cli.md",
                 "docs/performance.md", "docs/troubleshooting.md", "docs/experiments.md"):
        assert page in targets, f"README.md does not link to {page}"
