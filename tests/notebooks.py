"""Run a notebook top to bottom in a kernel of this test environment's Python.

Stable API for the notebook tests (tutorials and exercises):

- ``run_notebook(path, timeout=120, live=False) -> NotebookNode``: executes every cell in a
  fresh kernel started from ``sys.executable`` (not whatever ``python`` is first on PATH), with
  ``MPLBACKEND=Agg`` and the notebook's folder as working directory. ``live=True`` runs it
  the way a student's Jupyter does instead: no ``MPLBACKEND`` (matplotlib's inline backend)
  and no ``FPSIM_WIDGETS``, so fpsim's explorers are live ipywidgets. Raises ``AssertionError``
  naming the notebook, the failing cell's index and source, and the error. The executed copy is
  returned; the file on disk is not touched. ``nb.metadata["execution_seconds"]`` holds the wall
  time of the run (kernel start included).
- ``cell_outputs_text(nb) -> str``: every stream and ``text/plain`` output, concatenated.

    >>> nb = run_notebook(pathlib.Path("tutorials/01_anatomy_of_a_float.ipynb"))  # doctest: +SKIP
    >>> "65504" in cell_outputs_text(nb)  # doctest: +SKIP
    True
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import pathlib
import re
import shutil
import sys
import tempfile
import time

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError
from nbformat import NotebookNode

KERNEL_NAME = "fpsim-test-python"
LIVE_KERNEL_NAME = "fpsim-test-python-live"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@functools.lru_cache(maxsize=1)
def _kernel_dir() -> str:
    """A kernelspec folder with two kernels of this interpreter: one with a headless
    matplotlib (``KERNEL_NAME``), one as a student's Jupyter starts it (``LIVE_KERNEL_NAME``)."""
    root = pathlib.Path(tempfile.mkdtemp(prefix="fpsim-kernels-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    for name, env in ((KERNEL_NAME, {"MPLBACKEND": "Agg"}), (LIVE_KERNEL_NAME, {})):
        spec = root / name
        spec.mkdir()
        (spec / "kernel.json").write_text(
            json.dumps(
                {
                    "argv": [sys.executable, "-m", "ipykernel_launcher", "-f",
                             "{connection_file}"],
                    "display_name": f"fpsim tests ({name})",
                    "language": "python",
                    "env": env,
                }
            )
        )
    return str(root)


def _kernel_manager(live: bool = False) -> KernelManager:
    ksm = KernelSpecManager(kernel_dirs=[_kernel_dir()], ensure_native_kernel=False)
    return KernelManager(kernel_name=LIVE_KERNEL_NAME if live else KERNEL_NAME,
                         kernel_spec_manager=ksm)


def _failing_cell(nb: NotebookNode) -> tuple[int, NotebookNode] | None:
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and any(
            out.get("output_type") == "error" for out in cell.get("outputs", [])
        ):
            return index, cell
    return None


def kernel_env(live: bool = False) -> dict[str, str]:
    """The notebook kernel's environment: this process's, with one BLAS thread when the tests
    run on several workers (``pytest -n``). There every core already runs a worker, and
    OpenBLAS's threads wait for each other by spinning: measured here, the mixed-precision
    notebook (06) took 135 s beside two busy processes with OpenBLAS's default threads and
    7.8 s with one. ``live``
    drops ``MPLBACKEND`` and ``FPSIM_WIDGETS``, as a student's Jupyter has neither."""
    env = dict(os.environ)
    if live:
        env.pop("MPLBACKEND", None)
        env.pop("FPSIM_WIDGETS", None)
    if "PYTEST_XDIST_WORKER" in env:
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    return env


def run_notebook(path: pathlib.Path, timeout: int = 120, live: bool = False) -> NotebookNode:
    """Execute ``path`` top to bottom; ``timeout`` is per cell, in seconds (a cell that hangs
    fails the run); ``live`` as in the module docstring."""
    path = pathlib.Path(path)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        km=_kernel_manager(live),
        timeout=timeout,
        allow_errors=False,
        resources={"metadata": {"path": str(path.parent.resolve())}},
    )
    start = time.perf_counter()
    try:
        client.execute(env=kernel_env(live))
    except CellTimeoutError as err:
        raise AssertionError(f"{path.name}: a cell ran longer than {timeout} s\n{err}") from None
    except CellExecutionError as err:
        found = _failing_cell(nb)
        if found is None:  # not a cell's own error: nbclient's message already has the source
            raise AssertionError(f"{path.name}: {_ANSI.sub('', str(err))}") from None
        index, cell = found
        error = next(out for out in cell.outputs if out.output_type == "error")
        trace = _ANSI.sub("", "\n".join(error.get("traceback", [])))
        raise AssertionError(
            f"{path.name}: cell {index} raised {error.ename}: {error.evalue}\n"
            f"--- source ---\n{cell.source}\n--- traceback ---\n{trace}"
        ) from None
    nb.metadata["execution_seconds"] = time.perf_counter() - start
    return nb


def cell_outputs_text(nb: NotebookNode) -> str:
    """All stream output and ``text/plain`` results of ``nb``, in cell order."""
    parts: list[str] = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                parts.append(out.get("text", ""))
            elif "data" in out and "text/plain" in out["data"]:
                parts.append(out["data"]["text/plain"])
    return "\n".join(parts)
