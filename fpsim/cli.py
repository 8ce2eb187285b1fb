"""The ``fpsim`` command line: ``fpsim formats``, ``explain``, ``round``, ``warmup`` and the
commands other packages register (nn's ``train`` and ``compare``).

Each subcommand is a ``Command``: a name, a one-line help, a function that adds its arguments
to an argparse parser and a function that runs it and returns the exit code. fpsim's own are
in ``COMMANDS``; another package lists its own in a module attribute named by an entry point
of the group ``fpsim.commands`` (nn: ``nn = "nn.cli:COMMANDS"`` in pyproject.toml), which is
imported only when one of its commands (or ``--help``) is asked for, so ``fpsim round`` never
loads nn. Without entry-point metadata (a source checkout on ``PYTHONPATH``) the modules of
``KNOWN_COMMAND_MODULES`` are tried, if their package can be found.

Bad input is one line on stderr and exit status 2, never a traceback: argument errors come
from argparse, and a ``run`` function signals bad input by raising ``ValueError``. A file that
could not be written or read (an ``OSError``: ``fpsim.atomic.WriteError`` for the files the
commands write, all or nothing) is one line on stderr and exit status 1, also without a
traceback. Output into a closed pipe (``fpsim round ... | head -1``) ends quietly with
status 1.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fpsim._cli_numbers import Number, float64_note, parse_number, print_note
from fpsim._version import __version__
from fpsim.bits import to_bits
from fpsim.catalog import get_format
from fpsim.explain import explain, field_string
from fpsim.formats import OVERFLOW_KINDS, Format
from fpsim.quantize import round as round_array
from fpsim.rounding import MODE_NAMES, get_mode
from fpsim.tables import format_table

ENTRY_POINT_GROUP = "fpsim.commands"
KNOWN_COMMAND_MODULES = ("nn.cli:COMMANDS",)
# ``fpsim warmup``'s extra tasks: a function returning [(label, call), ...], as fpsim.warmup.tasks
WARMUP_ENTRY_POINT_GROUP = "fpsim.warmup"
KNOWN_WARMUP_MODULES = ("nn.warmup:extra_tasks",)


class UsageError(Exception):
    """Bad command-line input: main prints the message as one line and exits with status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line (raised, printed by main)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: error: {message}")


@dataclass(frozen=True)
class Command:
    """A subcommand: ``add_arguments(parser)`` declares it, ``run(args)`` returns an exit code."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


# --- argument types and checks (also for other packages' commands) ----------------------------
def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (argparse names the option in its message)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text.strip()!r}")
    return value


def check_writable(path: Path, option: str) -> None:
    """Raise ValueError naming ``option`` unless a file can be written at ``path`` (its
    directory is created if missing): run before any long work, not after it."""
    if path.is_dir():
        raise ValueError(f"{option} {str(path)!r} is a directory, not a file path")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            if not os.access(path, os.W_OK):
                raise PermissionError(f"cannot write {path}")
        else:
            tempfile.TemporaryFile(dir=path.parent).close()
    except OSError as err:
        raise ValueError(f"{option}: cannot write {str(path)!r} "
                         f"({err.strerror or err})") from None


def _number_arg(text: str) -> Number:
    try:
        return parse_number(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _format_arg(text: str) -> Format:
    try:
        return get_format(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None  # it names the closest


def _mode_arg(text: str) -> str:
    try:
        return get_mode(text).value
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None  # it names the closest


def _is_negative_number(token: str) -> bool:
    if not token.startswith("-") or token.startswith("--"):
        return False
    try:
        parse_number(token)
    except ValueError:
        return False
    return True


def _protect_negative_numbers(argv: Sequence[str]) -> list[str]:
    # argparse takes "-1e-5" or "-inf" for an option; a token with a space is always positional
    return [f" {a}" if _is_negative_number(a) else a for a in argv]


def _add_values_format_and_mode(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument("values", type=_number_arg, nargs="+", metavar="VALUE",
                        help=f"one or more numbers to {verb}, read exactly: 1e-5, -65520, 0.1, "
                             "inf, nan, 0x1p-25 (fpsim rounds their nearest float64; a note "
                             "on stderr says when that differs from the exact number)")
    parser.add_argument("-f", "--format", type=_format_arg, required=True, metavar="F",
                        help="format name or alias, required (see `fpsim formats`)")
    parser.add_argument("-m", "--mode", type=_mode_arg, default="nearest_even", metavar="M",
                        help=f"rounding mode: {', '.join(MODE_NAMES)}; default nearest_even")
    parser.add_argument("--overflow", choices=OVERFLOW_KINDS, default=None,
                        help="override the format's overflow policy")


def _emit(text: str) -> None:
    """Print, falling back to ASCII where the terminal cannot show '×'."""
    try:
        print(text)
    except UnicodeEncodeError:
        print(text.replace("×", "x").encode("ascii", "replace").decode("ascii"))


# --- fpsim formats -----------------------------------------------------------------------------
def _add_formats(parser: argparse.ArgumentParser) -> None:
    del parser  # no arguments


def _run_formats(args: argparse.Namespace) -> int:
    _emit(format_table())
    return 0


# --- fpsim explain and fpsim round: the same VALUE... -f F [-m M] [--overflow O] ---------------
def _add_explain(parser: argparse.ArgumentParser) -> None:
    _add_values_format_and_mode(parser, "explain")


def _notes(args: argparse.Namespace) -> None:
    for number in args.values:
        print_note(float64_note(number, args.format, args.mode, args.overflow))


def _run_explain(args: argparse.Namespace) -> int:
    _notes(args)
    _emit("\n\n".join(explain(n.value, args.format, args.mode, overflow=args.overflow)
                      for n in args.values))
    return 0


def _add_round(parser: argparse.ArgumentParser) -> None:
    _add_values_format_and_mode(parser, "round")
    parser.add_argument("--seed", type=int, default=None,
                        help="random seed for --mode stochastic; default: fresh randomness")


def _bits_text(v: float, fmt: Format) -> str:
    try:
        return field_string(int(to_bits(v, fmt)), fmt)
    except ValueError:
        return "-"  # NaN in a format without NaN: no code


def _run_round(args: argparse.Namespace) -> int:
    fmt = args.format
    _notes(args)
    x = np.array([n.value for n in args.values], dtype=np.float64)
    rng = np.random.default_rng(args.seed)
    result = round_array(x, fmt, args.mode, rng=rng, overflow=args.overflow)
    rows = [("input", fmt.name, "bits")]
    rows += [(repr(float(a)), repr(float(r)), _bits_text(float(r), fmt))
             for a, r in zip(x, result, strict=True)]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    _emit("\n".join(f"{a:>{w0}}  {r:<{w1}}  {b}" for a, r, b in rows))
    return 0


# --- fpsim warmup ----------------------------------------------------------------------------
def _add_warmup(parser: argparse.ArgumentParser) -> None:
    del parser  # no arguments


def _run_warmup(args: argparse.Namespace) -> int:
    try:
        module = importlib.import_module("fpsim.warmup")  # the module, not fpsim.warmup()
    except ModuleNotFoundError as err:
        if err.name != "fpsim.warmup":
            raise
        print("fpsim warmup: error: this installation of fpsim has no fpsim.warmup module",
              file=sys.stderr)
        return 1
    tasks, problems = warmup_tasks(module)
    for line in problems:
        print(f"fpsim warmup: {line}", file=sys.stderr)
    module.run_tasks(tasks, progress=True)
    return 0


def warmup_tasks(module: Any) -> tuple[list[tuple[str, Callable[[], object]]], list[str]]:
    """(fpsim's warmup tasks, then those of every package registered in the group
    ``fpsim.warmup`` (nn: its training step and convolution kernels), so that ``fpsim warmup``
    compiles everything the tutorials use; one line per package that failed to load)."""
    tasks = list(module.tasks())
    problems: list[str] = []
    for spec, load in _plugin_loaders(WARMUP_ENTRY_POINT_GROUP, KNOWN_WARMUP_MODULES).items():
        try:
            extra = load()
            tasks += list(extra()) if callable(extra) else []
        except (ImportError, AttributeError, TypeError) as err:
            problems.append(f"{spec} did not load ({type(err).__name__}: {err})")
    return tasks, problems


COMMANDS: list[Command] = [
    Command("formats", "table of every catalog format", _add_formats, _run_formats),
    Command("explain", "explain how numbers round to a format, bit by bit",
            _add_explain, _run_explain),
    Command("round", "round numbers to a format: one line each with the bits",
            _add_round, _run_round),
    Command("warmup", "compile every kernel the tutorials use, once, with a progress bar",
            _add_warmup, _run_warmup),
]


# --- commands of other packages ----------------------------------------------------------------
def _load(spec: str, load: Callable[[], object]) -> list[Command]:
    found = load()
    commands = list(found) if isinstance(found, (list, tuple)) else []
    if not commands or not all(isinstance(c, Command) for c in commands):
        raise TypeError(f"{spec} is not a list of fpsim.cli.Command")
    return commands


def _attribute_loader(module: str, attr: str) -> Callable[[], object]:
    return lambda: getattr(importlib.import_module(module), attr)


def _plugin_loaders(group: str, known: Sequence[str]) -> dict[str, Callable[[], object]]:
    """Loaders of what other packages register in the entry-point ``group`` first, then of the
    ``known`` "module:attribute" specs whose package is importable (each spec once)."""
    loaders: dict[str, Callable[[], object]] = {}
    for ep in importlib.metadata.entry_points(group=group):
        loaders.setdefault(ep.value, ep.load)
    for spec in known:
        module, _, attr = spec.partition(":")
        if spec not in loaders and importlib.util.find_spec(module.split(".")[0]) is not None:
            loaders[spec] = _attribute_loader(module, attr)
    return loaders


def plugin_commands() -> tuple[list[Command], list[str]]:
    """(the commands other packages register, one line per package that failed to load).

    Entry points of the group ``fpsim.commands`` first, then ``KNOWN_COMMAND_MODULES`` whose
    package is importable (each module once)."""
    commands: list[Command] = []
    problems: list[str] = []
    for spec, load in _plugin_loaders(ENTRY_POINT_GROUP, KNOWN_COMMAND_MODULES).items():
        try:
            commands += _load(spec, load)
        except (ImportError, AttributeError, TypeError) as err:
            problems.append(f"{spec} did not load ({type(err).__name__}: {err})")
    return commands, problems


def build_parser(commands: Sequence[Command] | None = None) -> argparse.ArgumentParser:
    """The ``fpsim`` parser with one subparser per command (default: fpsim's and every
    registered package's)."""
    if commands is None:
        commands = COMMANDS + plugin_commands()[0]
    parser = _Parser(
        prog="fpsim",
        description="See what low-precision floating point (fp16, bf16, fp8) does to numbers.",
        epilog="Exit status: 0 on success, 2 on bad input, 1 when a file could not be written "
               "(one line on stderr, no traceback).",
    )
    parser.add_argument("--version", action="version", version=f"fpsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for cmd in commands:
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        cmd.add_arguments(p)
        p.set_defaults(run=cmd.run)
    return parser


def _quiet_broken_pipe() -> int:
    # Python's documented recipe (signal module, "Note on SIGPIPE"): point stdout at devnull so
    # the interpreter's final flush does not fail again, and exit with status 1
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # stdout without a file descriptor (captured): nothing left to flush
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``fpsim`` command line; returns the exit status (2 for bad input)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    commands, problems = list(COMMANDS), list[str]()
    if not argv or argv[0] not in {c.name for c in COMMANDS} | {"--version"}:
        more, problems = plugin_commands()
        commands += more
    try:
        args = build_parser(commands).parse_args(_protect_negative_numbers(argv))
        if args.command is None:
            names = ", ".join(c.name for c in commands)
            raise UsageError(f"fpsim: error: choose a command: {names} (see fpsim --help)")
        try:
            code = int(args.run(args) or 0)
            sys.stdout.flush()
            return code
        except ValueError as err:
            raise UsageError(f"fpsim {args.command}: error: {err}") from None
        except BrokenPipeError:
            raise
        except OSError as err:  # a file not written (WriteError) or not read: no traceback
            print(f"fpsim {args.command}: error: {err}".replace("\n", " "), file=sys.stderr)
            return 1
    except UsageError as err:
        message = str(err).replace("\n", " ")
        if problems and "invalid choice" in message:
            message += "; " + "; ".join(problems)
        print(message, file=sys.stderr)
        return 2
    except BrokenPipeError:
        return _quiet_broken_pipe()
