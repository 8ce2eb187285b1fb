"""The live form of an explorer: controls above a view that is redrawn at every change, and the
explorer's starting state kept as a static picture for renderers that have no widgets.

**Why the view is an ``ipywidgets.HTML`` and not an ``Output`` area.** An ``Output`` area that
is written to while a cell runs makes a headless executor answer on the kernel's shell
channel: nbclient (what ``jupyter nbconvert --execute`` runs) mimics the front end's Output
widget and sends a ``comm_msg`` with the new outputs on the shell socket, from the coroutine
that reads IOPub, while another coroutine waits on that same socket for the cell's
``execute_reply``. With nbclient's default of no cell timeout that wait is a ``poll`` with no
timeout, and a send on a ZeroMQ socket can consume the readiness event the poll waits for, so
in some runs the reply is never picked up: the kernel is idle and the cell never finishes
(notebook 01 hung this way in 2 of 6 plain ``jupyter nbconvert --execute`` runs). An HTML
widget whose ``value`` is set from Python sends only kernel-to-front-end messages, so nothing
is ever sent on the shell socket during the cell.

**The starting state as a picture.** A notebook exported without a widget manager (GitHub, a
docs site, an offline HTML file) cannot draw a widget, only the other entries of its output's
mime bundle. ``Explorer`` adds the starting state's text, HTML and PNG to that bundle; a live
front end still shows the widget, whose mime type it ranks first.

This module imports ipywidgets at the top; ``fpsim.widgets.ui`` imports it only when an
explorer is live, so ``import fpsim`` never needs ipywidgets.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets as w

from fpsim.widgets.render import StaticView


class Explorer(w.VBox):
    """A ``VBox`` whose notebook output also holds ``start``, its starting state, as text,
    HTML and PNG (for renderers without widgets)."""

    def __init__(self, children: Sequence[Any], start: StaticView) -> None:
        super().__init__(list(children))
        self.start = start

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = dict(super()._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = self.start.text
        bundle["text/html"] = self.start._repr_html_()
        png = self.start.png()
        if png is not None:
            bundle["image/png"] = base64.b64encode(png).decode()
        return bundle


def _html(draw: Callable[[], StaticView]) -> tuple[str, StaticView | None]:
    """The view ``draw`` returns as HTML, or the reason it could not draw."""
    try:
        view = draw()
    except ValueError as err:  # e.g. an impossible format from the builder
        return f"<pre>not a valid choice: {html.escape(str(err))}</pre>", None
    return view._repr_html_(), view


def explorer(controls: Sequence[Any], draw: Callable[[], StaticView],
             layout: Sequence[Any] | None = None) -> Explorer:
    """``layout`` (default: ``controls``) above an HTML view that ``draw`` redraws whenever
    one of ``controls`` changes its value."""
    value, start = _html(draw)
    view = w.HTML(value=value)

    def refresh(_change: object = None) -> None:
        view.value = _html(draw)[0]

    for control in controls:
        control.observe(refresh, names="value")
    return Explorer([*(controls if layout is None else layout), view],
                    start if start is not None else StaticView(html.unescape(value)))
