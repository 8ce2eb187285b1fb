"""Every relative link in a tutorial or exercise notebook (and tutorials/README.md) points to a
file that exists, so "exercise 06" from notebook 01 opens exercise 06."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

TUTORIALS = pathlib.Path(__file__).resolve().parent.parent / "tutorials"
DOCUMENTS = sorted(TUTORIALS.rglob("*.ipynb")) + [TUTORIALS / "README.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _markdown(path: pathlib.Path) -> str:
    if path.suffix == ".md":
        return path.read_text()
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(TUTORIALS)))
def test_every_relative_link_points_to_an_existing_file(path):
    for target in LINK.findall(_markdown(path)):
        if "://" in target or target.startswith("#"):
            continue
        file = (path.parent / target.split("#")[0]).resolve()
        assert file.exists(), f"{path.name} links to {target}, which does not exist"
