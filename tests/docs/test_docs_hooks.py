"""docs/hooks.py: the generated parts of the site follow the repository's files."""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs"))

import course_notebooks as notebooks  # noqa: E402
import hooks  # noqa: E402


def test_copies_of_renamed_notebooks_do_not_linger(tmp_path, monkeypatch):
    monkeypatch.setattr(hooks, "DOCS", tmp_path)
    monkeypatch.setattr(notebooks, "executed_lessons", lambda: {"01_new.ipynb": b"{}"})
    monkeypatch.setattr(notebooks, "exercises",
                        lambda: {"01_ex.ipynb": b"{}", "solutions/01_ex.ipynb": b"{}"})
    monkeypatch.setattr(hooks.api_pages, "pages", lambda: {"index.md": "# API\n"})
    stale = [tmp_path / "course" / "01_old.ipynb",
             tmp_path / "course" / "exercises" / "02_gone.ipynb",
             tmp_path / "course" / "exercises" / "solutions" / "02_gone.ipynb",
             tmp_path / "api" / "old.package.md"]
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
    hooks.on_pre_build(None)
    assert not any(path.exists() for path in stale)
    assert (tmp_path / "course" / "01_new.ipynb").read_bytes() == b"{}"
    assert (tmp_path / "course" / "exercises" / "solutions" / "01_ex.ipynb").exists()
    assert (tmp_path / "api" / "index.md").read_text() == "# API\n"


def test_the_course_nav_lists_every_notebook_found_by_glob():
    nav = hooks._course_nav()
    pages = [next(iter(entry.values())) for entry in nav if isinstance(entry, dict)
             and isinstance(next(iter(entry.values())), str)]
    assert pages == [f"course/{name}" for name in notebooks.lesson_names()]
    assert len(notebooks.lesson_names()) == len(list((ROOT / "tutorials").glob("*.ipynb")))


def test_notebook_links_point_at_the_rendered_pages():
    class Page:
        class file:  # noqa: N801 (a stand-in for mkdocs's File)
            src_uri = "course/01_a.ipynb"
            dest_uri = "course/01_a.html"

    html = '<a href="02_b.ipynb#ties">x</a> <a href="exercises/03_c.ipynb">y</a>'
    out = hooks.on_post_page(html, Page, None)
    assert 'href="02_b.html#ties"' in out and 'href="exercises/03_c.html"' in out


def test_notebook_titles_come_from_their_headings():
    assert notebooks.title(ROOT / "tutorials" / "exercises" / "01_round_to_nearest_even.ipynb") \
        .startswith("01 · Round to nearest even")
