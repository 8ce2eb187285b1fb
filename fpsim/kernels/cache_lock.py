"""numba's on-disk cache made safe for several processes compiling at once.

numba keeps one index file per cached function: a table from (signature, CPU, bytecode and
closure values) to the numbered data file holding that compiled version. Adding an entry reads
the index, takes the first free number, writes the index, then the data. Two processes adding
*different* entries of one function at the same moment (pytest-xdist workers, a
multiprocessing pool, two notebooks on one machine) can both read the old index and both take
the same number: the index keeps one of the two keys, pointing at a data file the other process
may have written last. A later process then loads the compiled code of one entry for the other:
a kernel of another rounding mode, or of another carrier, run on these arrays. (Seen here: two
test workers compiling the directed-mode kernels left one mode's key pointing at another's
code, and every later run failed until the cache was deleted.)

``install()`` wraps numba's ``IndexDataCacheFile.save`` in an exclusive ``flock`` on a lock file
beside the index, so the read-pick-write of an entry is one step across processes. Loading is
left as numba has it: it already copes with an entry whose data file is not written yet (a miss,
so it compiles). Where ``fcntl`` is missing (Windows) or numba's class has changed shape,
``install`` does nothing and returns False.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

try:
    import fcntl
except ImportError:  # (Windows)
    fcntl = None  # type: ignore[assignment]

_INSTALLED = "_fpsim_locked"


def _locked_save(save: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(save)
    def locked_save(self: Any, key: Any, data: Any) -> Any:
        try:
            lock = open(self._index_path + ".lock", "a")  # noqa: SIM115  (closed below)
        except OSError:  # a cache directory that takes no new file: numba's own save decides
            return save(self, key, data)
        with lock:  # (closing the file releases the lock)
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            return save(self, key, data)  # (it reads the index again, inside the lock)

    setattr(locked_save, _INSTALLED, True)
    return locked_save


def install() -> bool:
    """Serialize numba's cache-entry writes across processes; True if installed (or already)."""
    if fcntl is None:
        return False
    try:
        from numba.core.caching import IndexDataCacheFile
    except ImportError:
        return False
    save = getattr(IndexDataCacheFile, "save", None)
    if save is None or not hasattr(IndexDataCacheFile, "_load_index"):
        return False
    if getattr(save, _INSTALLED, False):
        return True
    IndexDataCacheFile.save = _locked_save(save)  # type: ignore[method-assign]
    return True


install()
