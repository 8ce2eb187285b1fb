"""Which rounding path answers a call: the numba kernel when it is ready, else numpy while it
compiles in the background.

On a fresh install each numba kernel costs 0.4 to 2 CPU seconds of compilation the first time
(most of it numba's type inference and lowering, not LLVM; see README "Performance"). A small
array does not need to wait for that: ``fpsim.kernels.portable`` computes the same bits in
numpy, 15 to 35 times slower per element, which for an array below ``NUMPY_MAX`` elements
is milliseconds. So ``compiled(kernel, n, args)``:

- True when this process has the kernel for these argument types (compiled, or loaded from
  numba's cache, by an earlier call), for arrays of ``NUMPY_MAX`` elements or more (they wait
  for the compile, which then pays off; the first call on a large array therefore still shows
  the compile time), and inside ``eager_compiles()`` (``fpsim.warmup`` uses it);
- otherwise False, after starting the kernel's compile (or cache load) on a daemon thread: the
  caller answers with numpy now and later calls take the kernel once it is ready.

The background compile has the same argument types as the call that asked for it (the arrays
are zero-length views of the real ones), so the later call finds it. A process that exits
before a background compile ends abandons it (numba writes its cache atomically; nothing
half-written is left) and the next run starts it again. ``os.fork`` waits for a pending
compile first, so that a child never inherits numba's compiler lock held by a thread that
does not exist in the child.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

# Arrays of at least this many elements wait for their kernel rather than take numpy.
NUMPY_MAX = 1 << 18

_ready: set[tuple] = set()
_pending: dict[tuple, threading.Thread] = {}
_eager = 0
_lock = threading.Lock()


def _key(kernel: Callable[..., Any], args: tuple) -> tuple:
    """What selects a numba specialization of ``kernel``: the arrays' dtype, dimensions,
    layout and writability, and the other arguments' Python types."""
    return (kernel, *((a.dtype.str, a.ndim, a.flags.c_contiguous, a.flags.writeable)
                      if isinstance(a, np.ndarray) else type(a) for a in args))


def _compile(key: tuple, kernel: Callable[..., Any], args: tuple) -> None:
    """Call kernel on zero-length views of the arrays: compiles (or loads) the specialization
    and does no work. An error is left to the next call on the calling thread to raise."""
    try:
        kernel(*(a[:0] if isinstance(a, np.ndarray) else 0 if type(a) is int else a
                 for a in args))
    except Exception:  # the synchronous call will raise it where the user sees it
        pass
    finally:
        with _lock:
            _ready.add(key)
            _pending.pop(key, None)


def _start(key: tuple, kernel: Callable[..., Any], args: tuple) -> None:
    """Start _compile on a daemon thread (called with _lock held)."""
    thread = threading.Thread(target=_compile, args=(key, kernel, args), daemon=True,
                              name="fpsim-compile")
    _pending[key] = thread
    thread.start()


def compiled(kernel: Callable[..., Any], n: int, args: tuple) -> bool:
    """Whether to call ``kernel(*args)`` (a range kernel over ``n`` elements) now: True when
    it is ready, the array is large or compiles are eager; else False, and its compile has been
    started in the background (see the module docstring)."""
    key = _key(kernel, args)
    if key in _ready:
        return True
    with _lock:
        if n >= NUMPY_MAX or _eager:
            _ready.add(key)  # the caller's own call compiles it (after a pending one ends)
            return True
        if key not in _pending:
            _start(key, kernel, args)
    return False


def wait() -> None:
    """Wait until every background compile has finished."""
    while True:
        with _lock:
            threads = [t for t in _pending.values() if t.is_alive()]
        if not threads:
            return
        for thread in threads:
            thread.join()


@contextlib.contextmanager
def eager_compiles() -> Iterator[None]:
    """Inside, every call takes its numba kernel, compiling it on the calling thread if need
    be (fpsim.warmup compiles this way); background compiles already started are waited for."""
    global _eager
    wait()
    with _lock:
        _eager += 1
    try:
        yield
    finally:
        with _lock:
            _eager -= 1


os.register_at_fork(before=wait)
