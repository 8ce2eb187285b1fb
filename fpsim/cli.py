"""The ``fpsim`` command line: ``fpsim formats``, ``fpsim explain VALUE``, ``fpsim round VALUE...``.

Each subcommand is a ``Command`` in ``COMMANDS``: a name, a one-line help, a function that adds
its arguments to an argparse parser and a function that runs it and returns the exit code.
``build_parser()`` makes one subparser per entry, so adding a command is adding an entry.
Bad input is one line on stderr and exit status 2, never a traceback: argument errors come from
argparse, and a ``run`` function signals bad input by raising ``ValueError``.

Commands of the ``nn`` package (``train``, ``compare``) keep fpsim free of nn at import time by
importing it inside ``run``::

    def _run_train(args: argparse.Namespace) -> int:
        from nn import cli as nn_cli  # loads nn only when this command runs
        return nn_cli.train(args)

    COMMANDS.append(Command("train", "train a model under a precision policy",
                            _add_train, _run_train))
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from fpsim.bits import nan_code, to_bits
from fpsim.catalog import CATALOG, get_format, known_names
from fpsim.explain import explain, field_string
from fpsim.formats import OVERFLOW_KINDS, Format
from fpsim.quantize import round as round_array
from fpsim.rounding import MODE_NAMES, get_mode


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


# --- argument types ----------------------------------------------------------------------------
def parse_value(text: str) -> float:
    """A number from the command line: decimal (``1e-5``, ``-0.0``, ``inf``, ``nan``) or hex
    float (``0x1p-24``), as the nearest float64."""
    s = text.strip()
    try:
        return float.fromhex(s) if "0x" in s.lower() else float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{s!r} is not a number (examples: 1e-5, -65520, 0.1, inf, nan, 0x1p-24)"
        ) from None


def _format_arg(text: str) -> Format:
    try:
        return get_format(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _mode_arg(text: str) -> str:
    try:
        return get_mode(text).value
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _is_negative_number(token: str) -> bool:
    if not token.startswith("-") or token.startswith("--"):
        return False
    try:
        parse_value(token)
    except argparse.ArgumentTypeError:
        return False
    return True


def _protect_negative_numbers(argv: Sequence[str]) -> list[str]:
    # argparse takes "-1e-5" or "-inf" for an option; a token with a space is always positional
    return [f" {a}" if _is_negative_number(a) else a for a in argv]


def _add_format_and_mode(parser: argparse.ArgumentParser, *, default: str | None) -> None:
    parser.add_argument(
        "-f", "--format", type=_format_arg, default=None if default is None else default,
        required=default is None, metavar="F",
        help="format name or alias (see `fpsim formats`)"
        + (f"; default {default}" if default else ""),
    )
    parser.add_argument(
        "-m", "--mode", type=_mode_arg, default="nearest_even", metavar="M",
        help=f"rounding mode: {', '.join(MODE_NAMES)}; default nearest_even",
    )
    parser.add_argument(
        "--overflow", choices=OVERFLOW_KINDS, default=None,
        help="override the format's overflow policy",
    )


def _emit(text: str) -> None:
    """Print, falling back to ASCII where the terminal cannot show '×'."""
    try:
        print(text)
    except UnicodeEncodeError:
        print(text.replace("×", "x").encode("ascii", "replace").decode("ascii"))


# --- fpsim formats -----------------------------------------------------------------------------
def _specials(fmt: Format) -> str:
    ones_e, ones_m = "1" * fmt.exponent_bits, "1" * fmt.mantissa_bits
    if fmt.nan == "ieee":
        return f"inf = S.{ones_e}.{'0' * fmt.mantissa_bits}, NaN = S.{ones_e}.(not 0)"
    if fmt.nan == "fn":
        return f"no inf; NaN = S.{ones_e}.{ones_m} only"
    if fmt.nan == "fnuz":
        code = nan_code(fmt)
        assert code is not None
        return f"no inf, no -0; one NaN = {field_string(code, fmt).replace(' ', '.')} (the -0 code)"
    return "no inf, no NaN"


def format_table(formats: Sequence[Format] = CATALOG) -> str:
    """The ``fpsim formats`` table: layout, range, precision and special-value rules."""
    header = ("name", "bits", "E", "M", "bias", "max", "min normal", "min subnormal", "eps",
              "overflow", "inf / NaN")
    rows = [header]
    for f in formats:
        rows.append((
            f.name, str(f.bits), str(f.exponent_bits), str(f.mantissa_bits), str(f.bias),
            f"{f.max:.6g}", f"{f.smallest_normal:.6g}", f"{f.smallest_subnormal:.6g}",
            f"{f.eps:.6g}", str(f.overflow), _specials(f),
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=False)) + "  " + r[-1]
             for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    aliases = []
    for f in formats:
        names = [n for n in known_names() if n != f.name and get_format(n) is f]
        if names:
            aliases.append(f"  {f.name}: {', '.join(names)}")
    return "\n".join(lines + ["", "aliases:"] + aliases)


def _add_formats(parser: argparse.ArgumentParser) -> None:
    del parser  # no arguments


def _run_formats(args: argparse.Namespace) -> int:
    _emit(format_table())
    return 0


# --- fpsim explain -----------------------------------------------------------------------------
def _add_explain(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("value", type=parse_value, metavar="VALUE",
                        help="the number to round, e.g. 1e-5, 65520, -0.1, 0x1p-25")
    _add_format_and_mode(parser, default="fp16")


def _run_explain(args: argparse.Namespace) -> int:
    _emit(explain(args.value, args.format, args.mode, overflow=args.overflow))
    return 0


# --- fpsim round -------------------------------------------------------------------------------
def _add_round(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("values", type=parse_value, nargs="+", metavar="VALUE",
                        help="numbers to round")
    _add_format_and_mode(parser, default=None)
    parser.add_argument("--seed", type=int, default=None,
                        help="random seed for --mode stochastic")


def _bits_text(v: float, fmt: Format) -> str:
    try:
        return field_string(int(to_bits(v, fmt)), fmt)
    except ValueError:
        return "-"  # NaN in a format without NaN: no code


def _run_round(args: argparse.Namespace) -> int:
    fmt = args.format
    x = np.array(args.values, dtype=np.float64)
    rng = np.random.default_rng(args.seed)
    result = round_array(x, fmt, args.mode, rng=rng, overflow=args.overflow)
    rows = [("input", fmt.name, "bits")]
    rows += [(repr(float(a)), repr(float(r)), _bits_text(float(r), fmt))
             for a, r in zip(x, result, strict=True)]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    _emit("\n".join(f"{a:>{w0}}  {r:<{w1}}  {b}" for a, r, b in rows))
    return 0


COMMANDS: list[Command] = [
    Command("formats", "table of every catalog format", _add_formats, _run_formats),
    Command("explain", "explain how one number rounds to a format, bit by bit",
            _add_explain, _run_explain),
    Command("round", "round numbers to a format", _add_round, _run_round),
]


# --- fpsim train / fpsim compare (nn's commands; nn is imported only when they run) ---------
def _add_train(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", default="mixed_float16", metavar="P",
                        help="float32, mixed_float16, mixed_bfloat16, float16, bfloat16, ...; "
                             "default mixed_float16")
    parser.add_argument("--loss-scale", default=None, metavar="S",
                        help="dynamic, none or a fixed number; default: dynamic under "
                             "mixed_float16, none otherwise")
    parser.add_argument("--optimizer", choices=("sgd", "rmsprop", "adam"), default="sgd")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", default=None, metavar="PATH", help="write a checkpoint (.npz)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _run_train(args: argparse.Namespace) -> int:
    from nn import cli as nn_cli  # loads nn only when this command runs

    return nn_cli.train(args)


def _add_compare(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default=".", metavar="DIR",
                        help="directory for compare.png; default the current one")
    parser.add_argument("--epochs", type=int, default=None, help="default 20 (4 with --quick)")
    parser.add_argument("--quick", action="store_true", help="a short run (4 epochs)")


def _run_compare(args: argparse.Namespace) -> int:
    from nn import cli as nn_cli  # loads nn only when this command runs

    return nn_cli.compare(args)


COMMANDS += [
    Command("train", "train an MLP on the digits data under a precision policy",
            _add_train, _run_train),
    Command("compare", "train the same MLP under float32, mixed fp16 with and without loss "
            "scaling, mixed bf16 and pure fp16; one table and one PNG", _add_compare,
            _run_compare),
]


def build_parser() -> argparse.ArgumentParser:
    """The ``fpsim`` parser with one subparser per entry of ``COMMANDS``."""
    parser = _Parser(
        prog="fpsim",
        description="See what low-precision floating point (fp16, bf16, fp8) does to numbers.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for cmd in COMMANDS:
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        cmd.add_arguments(p)
        p.set_defaults(run=cmd.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``fpsim`` command line; returns the exit status (2 for bad input)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(_protect_negative_numbers(argv))
        if args.command is None:
            names = ", ".join(c.name for c in COMMANDS)
            raise UsageError(f"fpsim: error: choose a command: {names} (see fpsim --help)")
        try:
            return int(args.run(args) or 0)
        except ValueError as err:
            raise UsageError(f"fpsim {args.command}: error: {err}") from None
    except UsageError as err:
        print(str(err).replace("\n", " "), file=sys.stderr)
        return 2
