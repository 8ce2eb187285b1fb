"""Open three pages of the built site in headless Chromium, save screenshots, and fail when a
page renders blank or without its figures.

    mkdocs build && python docs/screenshots.py [--site build/site] [--out build/screenshots]

The pages: the home page, the course notebook whose first figure comes earliest, and the API page of
``fpsim``. For each, Chromium (Debian's ``chromium`` package; ``--browser`` to name another)
renders the page from disk twice: once to a PNG (``--screenshot``) and once to its DOM after
the scripts ran (``--dump-dom``). A page fails when

- the screenshot is blank: fewer than 1% of its pixels differ from the background, or it has
  fewer than 16 distinct colours;
- its DOM's article has fewer than 300 characters of text;
- a figure it should have is missing: the home page's picture file, a notebook page's PNG
  outputs (every ``data:image/png`` must decode to a non-empty image), the API page's entries;
  or a notebook page's math failed to typeset (MathJax's "Math Processing Error").

Besides, every course page (one per tutorial notebook) must hold at least one figure in its
HTML. Exit status 0 when everything passes, 1 otherwise (one line per failure on stderr).
"""

from __future__ import annotations

import argparse
import base64
import html
import pathlib
import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import course_notebooks as notebooks  # noqa: E402  (which notebooks the course has)

ROOT = pathlib.Path(__file__).resolve().parents[1]
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
WINDOW = (1280, 2400)
# A figure: a cell's image output (mkdocs-jupyter renders it in a jp-RenderedImage area; a
# widget's static picture, inside an HTML output, does not count).
DATA_PNG = re.compile(r'class="jp-RenderedImage[^"]*"[^>]*>\s*'
                      r'<img[^>]+src="data:image/png;base64,([A-Za-z0-9+/=\s]+)"')


def find_browser(name: str | None = None) -> str | None:
    for candidate in (name,) if name else BROWSERS:
        path = shutil.which(candidate)
        if path:
            return path
    return None


def _chromium(browser: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--disable-dev-shm-usage", "--virtual-time-budget=8000",
             f"--window-size={WINDOW[0]},{WINDOW[1]}"]
    return subprocess.run([browser, *flags, *args], capture_output=True, text=True,
                          timeout=timeout)


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's header; (0, 0) when it is not a PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return 0, 0
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def blankness(png: bytes) -> tuple[float, int]:
    """(share of pixels that differ from the top-left pixel, distinct colours)."""
    import io

    from PIL import Image  # Pillow, which matplotlib (the docs extra) installs

    image = Image.open(io.BytesIO(png)).convert("RGB")
    background = image.getpixel((0, 0))
    histogram = image.getcolors(maxcolors=1 << 24) or []
    total = image.width * image.height
    same = sum(count for count, colour in histogram if colour == background)
    return 1 - same / total, len(histogram)


def article_text(dom: str) -> str:
    match = re.search(r"<article[^>]*>(.*?)</article>", dom, re.DOTALL)
    body = match[1] if match else dom
    body = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", body, flags=re.DOTALL)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body))).strip()


def check_home(page: pathlib.Path, dom: str) -> list[str]:
    problems = []
    for src in re.findall(r'<img[^>]+src="([^"]+)"', dom):
        if not src.startswith("data:") and "://" not in src:
            if not (page.parent / src).resolve().exists():
                problems.append(f"picture {src} is missing")
    if not re.search(r'<img[^>]+src="[^"]*\.png"', dom):
        problems.append("no picture")
    return problems


def check_notebook(page: pathlib.Path, dom: str) -> list[str]:
    figures = DATA_PNG.findall(dom)
    if not figures:
        return ["no figure (no PNG output in the rendered notebook)"]
    empty = [i for i, b64 in enumerate(figures)
             if 0 in png_size(base64.b64decode(re.sub(r"\s+", "", b64)))]
    problems = [f"figures {empty} of {len(figures)} are not images"] if empty else []
    if "Math Processing Error" in dom:
        problems.append("MathJax failed on the page's math")
    return problems


def check_api(page: pathlib.Path, dom: str) -> list[str]:
    entries = len(re.findall(r'class="doc doc-heading"', dom))
    problems = [] if entries >= 10 else [f"only {entries} documented entries"]
    if "fpsim.round" not in article_text(dom):
        problems.append("fpsim.round is not documented")
    return problems


def notebook_with_earliest_figure(site: pathlib.Path) -> pathlib.Path | None:
    """The course page whose first figure comes earliest in its text, so the screenshot's
    window shows it; None when no course page has a figure."""
    best: tuple[int, pathlib.Path] | None = None
    for name in notebooks.lesson_names():
        page = site / "course" / name.replace(".ipynb", ".html")
        if not page.exists():
            continue
        text = page.read_text(errors="replace")
        match = DATA_PNG.search(text, text.find("<article"))
        if match and (best is None or match.start() - text.find("<article") < best[0]):
            best = (match.start() - text.find("<article"), page)
    return best[1] if best else None


def check_page(browser: str, page: pathlib.Path, shot: pathlib.Path,
               check: Callable[[pathlib.Path, str], list[str]]) -> list[str]:
    url = page.resolve().as_uri()
    _chromium(browser, f"--screenshot={shot}", url)
    if not shot.exists():
        return ["no screenshot was written"]
    dom = _chromium(browser, "--dump-dom", url).stdout
    problems = check(page, dom)
    share, colours = blankness(shot.read_bytes())
    if share < 0.01 or colours < 16:
        problems.append(f"renders blank ({share:.1%} of pixels drawn, {colours} colours)")
    if len(article_text(dom)) < 300:
        problems.append("almost no text")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=pathlib.Path, default=ROOT / "build" / "site")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "build" / "screenshots")
    parser.add_argument("--browser", default=None, help="Chromium's executable")
    args = parser.parse_args(argv)
    browser = find_browser(args.browser)
    if browser is None:
        print("no chromium found (apt-get install chromium)", file=sys.stderr)
        return 1
    notebook = notebook_with_earliest_figure(args.site)
    if notebook is None:
        print(f"no course page with a figure under {args.site}/course", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    pages = [("home", args.site / "index.html", check_home),
             ("notebook", notebook, check_notebook),
             ("api", args.site / "api" / "fpsim.html", check_api)]
    failed = 0
    for name in notebooks.lesson_names():
        lesson = args.site / "course" / name.replace(".ipynb", ".html")
        if not lesson.exists() or not DATA_PNG.search(lesson.read_text(errors="replace")):
            print(f"{lesson.relative_to(args.site)}: missing, or no figure", file=sys.stderr)
            failed += 1
    for name, page, check in pages:
        shot = args.out / f"{name}.png"
        shot.unlink(missing_ok=True)
        problems = ["the page does not exist"] if not page.exists() else check_page(
            browser, page, shot, check)
        for problem in problems:
            print(f"{page.relative_to(args.site)}: {problem}", file=sys.stderr)
        failed += bool(problems)
        print(f"{name}: {page.relative_to(args.site)} -> {shot}"
              f"{' FAILED' if problems else ''}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
