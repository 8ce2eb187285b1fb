"""numba kernels: rounding on the integer view of the float32 / float64 carrier.

Kernels only: no validation, no API logic (fpsim.quantize and fpsim.accumulate validate, pick
the carrier, pack the constants and dispatch). One job a module:

- ``constants``: the named tuples the kernels take (carrier, format, fast-path constants);
- ``general``: every mode on either carrier, the mode a run-time code (``MODE_KERNELS``),
  with an event-counting twin for ``fpsim.monitor``;
- ``fast_f32``: float32 nearest-even in float32 arithmetic, the common case;
- ``directed_f32``: the float32 directed modes (nearest_away, toward_zero, up, down, odd) in
  float32 arithmetic, one kernel per mode, for large arrays;
- ``portable``: the general kernel's function in numpy, bit for bit (no compile needed);
- ``lazy``: picks the numba kernel when ready, else ``portable`` while it compiles in the
  background (piece by piece, handing the rest to the kernel once it is ready);
- ``accumulate``: sums (and, on rows of exact products, matrix products) rounded after every
  addition;
- ``mx``: MX block quantization of float32 (amax, shared exponent, elements) for fpsim.mx;
- ``threads``: runs the range kernels on blocks of a large array in a small thread pool;
- ``notice``: says so on stderr when a kernel must be compiled (not when loaded from cache);
- ``cache_lock``: numba's cache entries written under a file lock, so processes compiling at
  once cannot cross their entries.

Every kernel is ``cache=True`` and ``nogil=True`` and none uses ``prange``: a fresh install
compiles a handful of small serial kernels, lazily, on the first call that needs each (in the
background while ``portable`` answers).
"""

import os as _os

# numba colours its error messages when colorama is installed, and to do so swaps sys.stdout out
# and back (colorama's init/deinit) thousands of times while it type-checks a kernel, even for
# messages nobody sees. From the background compile thread (``lazy``) that races whoever else
# redirects sys.stdout meanwhile (doctest, ``contextlib.redirect_stdout``, a notebook's capture):
# the thread puts back the stream it saw, and their output goes astray. numba's own switch turns
# the colouring off; it is read when numba is first imported, so it must be set before that. A
# value the user set is kept.
_os.environ.setdefault("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")

from fpsim.kernels import cache_lock as _cache_lock  # noqa: F401  (locks cache writes)
from fpsim.kernels import notice as _notice  # noqa: F401  (registers the compile notice)
