"""fpsim.atomic: a file is written all or nothing; a failed write leaves the previous file
byte-identical, says what was not written, and the command line exits 1 in one line."""

from __future__ import annotations

import errno
import os
import stat

import pytest

import fpsim.cli as cli
from fpsim.atomic import WriteError, write_atomic, write_bytes

OLD = b"the previous contents\n" * 100


def _disk_full_after_half(data: bytes):
    """A writer that writes half of ``data`` and then fails as a full disk does."""
    def write(f) -> None:
        f.write(data[: len(data) // 2])
        f.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return write


def _leftovers(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_write_replaces_the_file_with_the_new_bytes(tmp_path):
    path = tmp_path / "out.bin"
    path.write_bytes(OLD)
    assert write_bytes(path, b"new") == path
    assert path.read_bytes() == b"new"
    assert _leftovers(tmp_path) == ["out.bin"]  # no temporary file left behind


def test_a_write_that_fails_midway_leaves_the_previous_file_byte_identical(tmp_path):
    path = tmp_path / "compare.png"
    path.write_bytes(OLD)
    with pytest.raises(WriteError) as info:
        write_atomic(path, _disk_full_after_half(b"x" * 10_000), what="picture")
    assert path.read_bytes() == OLD
    assert _leftovers(tmp_path) == ["compare.png"]
    message = str(info.value)
    assert "picture" in message and str(path) in message and "not written" in message
    assert os.strerror(errno.ENOSPC) in message and "previous file is unchanged" in message
    assert info.value.errno == errno.ENOSPC and isinstance(info.value, OSError)


def test_a_failed_first_write_creates_no_file_and_says_so(tmp_path):
    path = tmp_path / "new.json"
    with pytest.raises(WriteError, match="no file was created"):
        write_atomic(path, _disk_full_after_half(b"{}" * 100))
    assert _leftovers(tmp_path) == []


def test_a_writer_error_that_is_not_oserror_propagates_and_keeps_the_old_file(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(OLD)

    def bad(f):
        f.write(b"partial")
        raise KeyError("boom")

    with pytest.raises(KeyError):
        write_atomic(path, bad)
    assert path.read_bytes() == OLD and _leftovers(tmp_path) == ["a.txt"]


def test_a_missing_directory_is_a_write_error_naming_the_file(tmp_path):
    path = tmp_path / "no_such_dir" / "x.png"
    with pytest.raises(WriteError, match="x.png.*not written"):
        write_bytes(path, b"1")


def test_a_directory_at_the_path_is_refused_and_kept(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(WriteError, match="is a directory"):
        write_bytes(tmp_path / "d", b"1")
    assert (tmp_path / "d").is_dir()


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_the_new_file_keeps_the_permissions_of_the_one_it_replaces(tmp_path):
    path = tmp_path / "p.txt"
    path.write_bytes(OLD)
    path.chmod(0o640)
    write_bytes(path, b"new")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


@pytest.mark.skipif(os.name != "posix", reason="POSIX umask")
def test_a_new_file_gets_the_permissions_open_would_give(tmp_path):
    plain, atomic = tmp_path / "plain", tmp_path / "atomic"
    plain.write_bytes(b"")
    write_bytes(atomic, b"")
    assert stat.S_IMODE(atomic.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)


@pytest.mark.skipif(os.name != "posix", reason="symbolic links")
def test_a_symlink_is_followed_and_kept(tmp_path):
    target = tmp_path / "target.txt"
    target.write_bytes(OLD)
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    write_bytes(link, b"new")
    assert link.is_symlink() and target.read_bytes() == b"new"


def test_a_path_that_is_not_a_path_is_refused_naming_it():
    with pytest.raises(TypeError, match="path must be a str or os.PathLike, got 3"):
        write_bytes(3, b"")  # type: ignore[arg-type]


def test_the_picture_saver_writes_a_png_and_keeps_the_old_one_on_failure(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.figure

    from fpsim import plot

    ax = plot.number_line("e2m1fn", 0, 6)
    path = tmp_path / "line.png"
    plot.save(ax, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    before = path.read_bytes()

    def full_disk(self, fname, **kwargs):
        fname.write(before[:100])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", full_disk)
    with pytest.raises(WriteError, match="picture .*line.png.* not written"):
        plot.save(ax.figure, path)
    assert path.read_bytes() == before and _leftovers(tmp_path) == ["line.png"]


def test_the_picture_format_follows_the_suffix(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from fpsim import plot

    path = plot.save(plot.number_line("e2m1fn", 0, 6), tmp_path / "line.svg")
    assert b"<svg" in path.read_bytes()[:400]


def test_a_cli_run_whose_write_fails_exits_1_in_one_line(tmp_path, monkeypatch, capsys):
    path = tmp_path / "out.txt"
    path.write_bytes(OLD)

    def add(parser):
        parser.add_argument("--out")

    def run(args):
        write_atomic(args.out, _disk_full_after_half(b"y" * 1000), what="table")
        return 0

    command = cli.Command("writefile", "write a file", add, run)
    monkeypatch.setattr(cli, "COMMANDS", [*cli.COMMANDS, command])
    assert cli.main(["writefile", "--out", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("fpsim writefile: error: table ") and "not written" in err
    assert path.read_bytes() == OLD
