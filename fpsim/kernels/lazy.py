"""Which rounding path answers a call: the numba kernel when it is ready, else numpy while it
compiles in the background.

On a fresh install each numba kernel costs 0.4 to 2 CPU seconds of compilation the first time
(most of it numba's type inference and lowering, not LLVM; see README "Performance"). A call
does not need to wait for that: ``fpsim.kernels.portable`` computes the same bits in numpy, 15
to 35 times slower per element, which for an array of a million elements is tens of
milliseconds. So ``answer(kernel, n, args, run_kernel, stand_in)``:

- runs the kernel over the whole array when this process has it for these argument types
  (compiled, or loaded from numba's cache, by an earlier call) and inside
  ``eager_compiles()`` (``fpsim.warmup`` uses it);
- otherwise starts the kernel's compile (or cache load) on a daemon thread and answers with
  numpy, ``PIECE`` elements at a time (bounded extra memory), handing the rest of the array to
  the kernel as soon as it is ready. A stand-in answers at most ``STAND_IN_MAX`` elements of one
  call; past that the call waits for the compile and the kernel does the rest, so a huge array
  never takes numpy's pace for longer than 0.1 to 0.2 s of numpy work (2^22 elements).

The background compile has the same argument types as the call that asked for it (the arrays
are zero-length views of the real ones), so the later call finds it. A process that ends
while a background compile runs waits for it at exit (``atexit``), so the compile lands in
numba's cache and the notice "compiling numba kernels (one time)" is true: a short run (``fpsim
compare --quick``, a script) that started a compile does not start it again next time. Ctrl-C
during that wait abandons it (numba writes its cache atomically; nothing half-written is left;
the next run compiles again). ``os.fork`` waits for a pending compile first, so that a child
never inherits numba's compiler lock held by a thread that does not exist in the child.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

# The numpy stand-in answers this many elements at a time (in blocks of portable.BLOCK, so its
# extra memory stays small), then looks whether the kernel is ready: a few milliseconds of work.
PIECE = 1 << 18
# ... and at most this many of one call; then the call waits for the kernel (see the docstring).
STAND_IN_MAX = 1 << 22

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


def ready(kernel: Callable[..., Any], args: tuple) -> bool:
    """Whether ``kernel(*args)`` can be called without compiling: True when it is ready or
    compiles are eager; else False, after starting its compile in the background."""
    key = _key(kernel, args)
    if key in _ready:
        return True
    with _lock:
        if _eager:
            _ready.add(key)  # the caller's own call compiles it (after a pending one ends)
            return True
        if key not in _pending:
            _start(key, kernel, args)
    return False


def _wait_for(key: tuple) -> None:
    """Wait until the background compile of ``key`` (started by ``ready``) has finished."""
    with _lock:
        thread = _pending.get(key)
    if thread is not None:
        thread.join()


def answer(kernel: Callable[..., Any], n: int, args: tuple,
           run_kernel: Callable[[int], list[Any]], stand_in: Callable[[int, int], list[Any]]
           ) -> list[Any]:
    """The results of rounding ``n`` elements with ``kernel`` (``args``: a call's arguments,
    for its argument types): ``run_kernel(lo)`` rounds elements ``[lo, n)`` with the kernel and
    returns its results, ``stand_in(lo, hi)`` rounds ``[lo, hi)`` with numpy and returns its
    results (a list, as run_kernel's). The kernel does all of it when
    ready; else numpy answers piece by piece while the kernel compiles in the background, and
    the kernel the rest once it is ready (see the module docstring). Both compute the same
    bits, so where the switch falls does not show."""
    if ready(kernel, args):
        return run_kernel(0)
    key = _key(kernel, args)
    parts: list[Any] = []
    lo = 0
    while True:
        if lo >= STAND_IN_MAX:
            _wait_for(key)
        if lo and key in _ready:
            return parts + run_kernel(lo)
        hi = min(n, lo + PIECE)
        parts.extend(stand_in(lo, hi))
        lo = hi
        if lo >= n:
            return parts


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


def _finish_at_exit() -> None:
    """At interpreter exit: let every background compile finish into numba's cache (daemon
    threads would otherwise be stopped mid-compile and the work redone next run)."""
    try:
        wait()
    except KeyboardInterrupt:  # Ctrl-C at exit: abandon the compile, quietly
        pass


os.register_at_fork(before=wait)
atexit.register(_finish_at_exit)
