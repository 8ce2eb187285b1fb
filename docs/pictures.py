"""Draw the site's and the README's picture: ``python docs/pictures.py`` writes
``docs/images/e4m3fn_values.png`` (every e4m3fn value in [0, 1], ``fpsim.plot.number_line``)."""

from __future__ import annotations

import pathlib

import matplotlib

matplotlib.use("Agg")

import fpsim.plot  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent / "images" / "e4m3fn_values.png"

if __name__ == "__main__":
    ax = fpsim.plot.number_line("e4m3fn", 0.0, 1.0)
    ax.figure.savefig(OUT, dpi=100, bbox_inches="tight")
    print(f"wrote {OUT}")
