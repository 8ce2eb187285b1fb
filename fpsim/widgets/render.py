"""Static renderings of the explorers' states, and the rule that picks static or interactive.

Every explorer draws its current state as a ``StaticView`` (text plus an optional matplotlib
figure). Interactive, the view is redrawn into the explorer's HTML view at each change of a
control, and the explorer's notebook output also carries its initial state's view for
renderers without widgets (``fpsim.widgets.live``); static, the explorer returns the view of
its initial state, which a notebook shows as HTML (text and picture) and a terminal as text.

**When is it static?** ``rendering()`` decides, in this order:

1. the environment variable ``FPSIM_WIDGETS`` = ``static`` or ``interactive`` wins (anything
   else is an error naming the allowed values); ``interactive`` still needs ipywidgets;
2. without ipywidgets installed: static (ipywidgets is in the ``tutorials`` extra);
3. outside an IPython *kernel* (a script, the plain IPython shell): static;
4. a kernel started with a non-interactive matplotlib backend in ``MPLBACKEND`` (``Agg``, as
   the test suite and most CI runners set it): static, because nobody can click there;
5. otherwise interactive.

A kernel cannot ask whether a frontend is listening, so rule 4 is how a headless execution
(``nbclient`` in ``tests/notebooks.py``) is recognised; a headless run that does not set
``MPLBACKEND`` sets ``FPSIM_WIDGETS=static`` instead.
"""

from __future__ import annotations

import base64
import html
import importlib.util
import io
import os
import sys
from dataclasses import dataclass
from typing import Any

ENV_VAR = "FPSIM_WIDGETS"
RENDERINGS = ("static", "interactive")
NON_INTERACTIVE_BACKENDS = ("agg", "pdf", "ps", "svg", "pgf", "cairo", "template")


def _ipywidgets_installed() -> bool:
    return importlib.util.find_spec("ipywidgets") is not None


def _in_kernel() -> bool:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and getattr(shell, "kernel", None) is not None


def rendering() -> str:
    """``"interactive"`` or ``"static"``, by the rules in this module's docstring."""
    forced = os.environ.get(ENV_VAR, "").strip().lower()
    if forced and forced not in RENDERINGS:
        raise ValueError(f"{ENV_VAR} must be one of {RENDERINGS} (or unset), got "
                         f"{os.environ[ENV_VAR]!r}")
    if not _ipywidgets_installed():
        return "static"
    if forced:
        return forced
    if not _in_kernel():
        return "static"
    if os.environ.get("MPLBACKEND", "").strip().lower() in NON_INTERACTIVE_BACKENDS:
        return "static"
    return "interactive"


@dataclass
class StaticView:
    """An explorer's state as text and an optional figure (a ``matplotlib.figure.Figure``
    made without pyplot, so it never shows twice). Notebooks display it as HTML."""

    text: str
    figure: Any = None

    def png(self) -> bytes | None:
        """The figure as PNG bytes, or None without a figure."""
        if self.figure is None:
            return None
        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
        return buffer.getvalue()

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        parts = [f"<pre>{html.escape(self.text)}</pre>"]
        png = self.png()
        if png is not None:
            parts.append(f'<img src="data:image/png;base64,{base64.b64encode(png).decode()}"/>')
        return "\n".join(parts)


def new_figure(*, rows: int = 1, width: float = 8.0, height: float = 2.4) -> tuple[Any, Any]:
    """A figure (no pyplot state) and its axes, ``rows`` stacked."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height * rows), layout="constrained")
    axes = fig.subplots(rows, 1, squeeze=False)[:, 0]
    return fig, (axes[0] if rows == 1 else list(axes))
