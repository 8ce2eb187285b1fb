"""One way to write a file: all of it or nothing, so a failed write never destroys the old one.

``write_atomic(path, write)`` lets ``write`` fill a new file in the same directory as ``path``
(a hidden ``.NAME.XXXXXXXX.tmp``), flushes it to the disk (``fsync``) and renames it over
``path`` (``os.replace``, atomic on POSIX and Windows within one file system). Until that rename
``path`` is untouched; a reader sees the old file or the new one, never half of one. When
anything fails (a full disk, a missing directory, a writer that raises) the temporary file is
removed and the previous file at ``path``, if any, is byte for byte what it was. An ``OSError``
comes back as ``WriteError``, which says which file was not written, why, and whether a
previous file is still there; any other exception of the writer propagates unchanged.

Decisions (ours): the new file gets the permissions of the file it replaces, else those a plain
``open(path, "w")`` gives (0666 less the umask); a symbolic link at ``path`` is followed, so
the file it points to is replaced and the link stays; after the rename the directory is
fsynced too where the system allows it, so the rename itself survives a crash.

>>> write_bytes("table.csv", b"x,y\\n1,2\\n")  # doctest: +SKIP
PosixPath('table.csv')

``fpsim.plot.save(figure, path)`` writes matplotlib pictures this way; the ``fpsim`` command
line turns a ``WriteError`` (any ``OSError``) into one line on stderr and exit status 1.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["WriteError", "write_atomic", "write_bytes"]

_TRIES = 100  # temporary names tried before giving up (each is 32 random bits)


class WriteError(OSError):
    """A file was not written. ``path`` is the file, ``errno`` the cause's error number; the
    message says what was not written, why, and that the previous file is unchanged."""

    def __init__(self, message: str, path: Path, code: int | None) -> None:
        super().__init__(message)
        self.path = path
        self.errno = code  # OSError's attribute, set after the message so str() is the message


def _not_written(what: str, path: Path, err: OSError) -> WriteError:
    reason = err.strerror or str(err) or type(err).__name__
    previous = ("the previous file is unchanged" if path.exists()
                else "no file was created")
    return WriteError(f"{what} {str(path)!r} was not written ({reason}); {previous}", path,
                      err.errno)


def _open_temporary(path: Path) -> tuple[int, Path]:
    """A new file beside ``path``, opened for writing: (descriptor, its path). The mode 0666 is
    reduced by the umask, as for ``open(path, "w")``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(_TRIES):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{_TRIES} temporary names beside {path} were all taken")


def _fsync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError, AttributeError):  # not every system opens directories
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomic(path: str | os.PathLike[str], write: Callable[[BinaryIO], object], *,
                 what: str = "file") -> Path:
    """Write the file ``path`` with ``write(f)`` (``f`` a binary file open for writing), all
    at once: see the module docstring. Returns the path written.

    ``what`` names the file in the error (``"picture"``, ``"checkpoint"``). Raises
    ``WriteError`` (an ``OSError``) when the file could not be written, leaving any previous
    file at ``path`` unchanged; an exception of ``write`` that is not an ``OSError`` is raised
    as it is, also leaving the previous file unchanged.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {path!r} "
                        f"(a {type(path).__name__})")
    path = Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)
    if path.is_dir():
        raise WriteError(f"{what} {str(path)!r} was not written: it is a directory", path,
                         errno.EISDIR)
    try:
        fd, tmp = _open_temporary(path)
    except OSError as err:
        raise _not_written(what, path, err) from err
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        if path.exists():
            os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(err, OSError):
            raise _not_written(what, path, err) from err
        raise
    _fsync_directory(path.parent)
    return path


def write_bytes(path: str | os.PathLike[str], data: bytes, *, what: str = "file") -> Path:
    """Write ``data`` to ``path`` atomically (``write_atomic``); returns the path."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes, got a {type(data).__name__}")
    return write_atomic(path, lambda f: f.write(data), what=what)
