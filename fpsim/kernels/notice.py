"""A one-line notice on stderr the first time a kernel of this project must be compiled.

numba compiles a kernel on its first call with new argument types, unless its cache (``cache=
True``, in ``__pycache__`` or ``NUMBA_CACHE_DIR``) already holds it. The notice appears only
when numba really compiles (a ``numba:compile`` event), never when it loads from the cache.
"""

from __future__ import annotations

import sys

from numba.core import event

_PACKAGES = ("fpsim.", "nn.")
_notified = False


class _CompileNotice(event.Listener):
    def on_start(self, ev: event.Event) -> None:
        global _notified
        if _notified:
            return
        dispatcher = ev.data.get("dispatcher") if isinstance(ev.data, dict) else None
        module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
        if module.startswith(_PACKAGES):
            _notified = True
            print("fpsim: compiling numba kernels for this machine (one time; numpy answers "
                  "meanwhile, more slowly; `fpsim.warmup()` compiles them all)...",
                  file=sys.stderr, flush=True)

    def on_end(self, ev: event.Event) -> None:
        pass


event.register("numba:compile", _CompileNotice())
