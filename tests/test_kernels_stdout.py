"""A background compile leaves sys.stdout alone.

numba colours its error messages when colorama is installed (mkdocs-material, in the docs
extra, brings it), swapping sys.stdout out and back thousands of times while it type-checks a
kernel; from fpsim's background compile thread that raced doctest's own capture of sys.stdout
and sent an example's output astray. ``fpsim.kernels`` turns numba's colouring off before numba
is imported (see its ``__init__``). Each check runs in a fresh interpreter, since import order
is what matters.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("colorama")  # without colorama numba never touches sys.stdout

SCHEME = "import numba.core.errors as e; print(type(e.termcolor()).__name__)"


def _run(code: str, **env: str) -> str:
    """The last line code prints in a fresh interpreter; env's items over this process's (the
    switch itself unset unless given)."""
    base = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=600, env={**base, **env})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("package", ["fpsim", "nn"])
def test_importing_the_package_turns_off_numbas_stdout_swapping_colours(package):
    assert _run(f"import {package}; {SCHEME}") == "NOPColorScheme"


def test_a_users_own_setting_of_numbas_switch_is_kept():
    # "" is numba's "colour on"
    assert _run(f"import fpsim; {SCHEME}", NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING="") == (
        "HighlightColorScheme")


PROBE = """
    import sys, tempfile, time, os
    import numpy as np
    import fpsim
    from fpsim.kernels import lazy
    mine = open(os.devnull, "w")
    fpsim.round(np.linspace(-3, 3, 1000, dtype=np.float32), "e5m2", mode="toward_zero")
    assert lazy._pending, "no background compile started"
    swapped = 0
    while any(t.is_alive() for t in list(lazy._pending.values())):
        sys.stdout = mine
        time.sleep(0.001)
        swapped += sys.stdout is not mine
    sys.stdout = sys.__stdout__
    print(swapped)
"""


def test_a_background_compile_never_puts_back_a_sys_stdout_the_caller_replaced(tmp_path):
    # a cold numba cache, so the kernel really compiles on the background thread
    assert _run(PROBE, NUMBA_CACHE_DIR=str(tmp_path)) == "0"


def test_the_probe_sees_the_swaps_when_numbas_colours_are_on(tmp_path):
    # the check above can fail: with the colours on, the same compile swaps sys.stdout back
    colours_on = {"NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING": ""}
    assert int(_run(PROBE, NUMBA_CACHE_DIR=str(tmp_path), **colours_on)) > 0
