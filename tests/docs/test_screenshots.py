"""docs/screenshots.py: the built site's pages render in headless Chromium with their figures.

The rendering test needs Debian's ``chromium`` and a built site (``mkdocs build``) and is
skipped without them; .ci/run builds the site and runs the script. The checks' own laws (a blank
picture is blank, a notebook page without figures fails) run everywhere."""

from __future__ import annotations

import base64
import io
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs"))

import screenshots  # noqa: E402

SITE = ROOT / "build" / "site"


def _png(draw) -> bytes:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (200, 100), "white")
    draw(ImageDraw.Draw(image))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def test_a_blank_page_is_blank_and_a_drawn_one_is_not():
    share, colours = screenshots.blankness(_png(lambda d: None))
    assert (share, colours) == (0.0, 1)
    share, colours = screenshots.blankness(
        _png(lambda d: [d.line((0, y, 200, 100 - y), fill=(y, 2 * y, 255 - y), width=3)
                        for y in range(0, 100, 4)]))
    assert share > 0.01 and colours >= 16


def test_a_notebook_page_without_figures_fails_and_one_with_a_figure_passes():
    page = ROOT / "x.html"
    assert screenshots.check_notebook(page, "<article><p>text only</p></article>")
    widget_picture = ('<article><div class="jp-RenderedHTMLCommon">'
                      '<img src="data:image/png;base64,iVBORw0KGgo="></div></article>')
    assert screenshots.check_notebook(page, widget_picture), "a widget's picture is no figure"
    figure = _png(lambda d: d.rectangle((10, 10, 50, 50), fill="blue"))
    data = base64.b64encode(figure).decode()
    dom = ('<article><div class="jp-RenderedImage jp-OutputArea-output">'
           f'<img alt="" src="data:image/png;base64,{data}"></div></article>')
    assert screenshots.check_notebook(page, dom) == []
    assert screenshots.png_size(figure) == (200, 100)


@pytest.mark.skipif(screenshots.find_browser() is None, reason="chromium is not installed")
@pytest.mark.skipif(not (SITE / "index.html").exists(), reason="no built site (mkdocs build)")
def test_three_built_pages_render_with_their_figures(tmp_path):
    assert screenshots.main(["--site", str(SITE), "--out", str(tmp_path)]) == 0
    assert {p.name for p in tmp_path.glob("*.png")} == {"home.png", "notebook.png", "api.png"}
