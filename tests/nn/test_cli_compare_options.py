"""``fpsim compare``: every option is honoured by the kind of run it is given to, or refused
(exit 2) naming it and what that kind takes; none is ignored silently."""

from __future__ import annotations

import argparse

import pytest

from fpsim.cli import main
from nn.cli import COMPARE_KINDS, add_compare_arguments


def _options() -> set[str]:
    parser = argparse.ArgumentParser()
    add_compare_arguments(parser)
    return {a.option_strings[-1] for a in parser._actions
            if a.option_strings and a.option_strings[-1] != "--help"}


def test_every_compare_option_belongs_to_some_kind_of_run():
    taken = set().union(*(takes for takes, _ in COMPARE_KINDS.values()))
    assert _options() == taken


@pytest.mark.parametrize("argv, refused, takes", [
    (["--experiment", "digits", "--steps", "2"], "--steps does not apply", "--epochs"),
    (["--experiment", "bf16", "--epochs", "7"], "--epochs does not apply", "--steps"),
    (["--experiment", "digits", "--seeds", "3"], "--seeds does not apply", "one fixed seed"),
    (["--experiment", "digits", "--json", "{tmp}/r.json", "--processes", "2"],
     "--json, --processes do not apply", "--epochs"),
    (["--all", "--epochs", "3"], "--epochs does not apply", "--steps"),
    (["--what-if", "--seeds", "2"], "--seeds does not apply", "--steps"),
    (["--what-if", "--out", "{tmp}"], "--out does not apply", "--json"),
    (["--list", "--steps", "3"], "--steps does not apply", "it takes --list"),
    (["--all", "--experiment", "bf16"], "--experiment does not apply", "--all runs every"),
    (["--what-if", "--all"], "--all does not apply", "--what-if replays"),
    (["--experiment", "bf16", "--resume"], "--resume does not apply", "--steps"),
])
def test_an_option_its_run_would_ignore_exits_2_naming_it_and_what_the_run_takes(
        argv, refused, takes, capsys, tmp_path):
    argv = [a.format(tmp=tmp_path) for a in argv]
    keep_out = {"--out", "--what-if", "--list"} & set(argv)  # (--out is theirs to refuse)
    assert main(["compare", *argv, *([] if keep_out else ["--out", str(tmp_path)])]) == 2
    err = capsys.readouterr().err
    assert refused in err and takes in err, err


def test_what_if_with_an_experiment_of_neither_replayed_model_is_refused(capsys):
    """(It used to replay the default language model instead, without a word.) The replay
    follows the language model and the CNN; fp8's MLP and the autoencoder are neither."""
    for name in ("fp8", "reconstruction"):
        assert main(["compare", "--what-if", "--experiment", name]) == 2
        err = capsys.readouterr().err
        assert f"--experiment {name} is neither" in err, err
        assert "adam-state" in err and "statistics" in err, err


def test_options_a_run_takes_pass_the_check():
    from nn.cli import check_compare_options

    parser = argparse.ArgumentParser()
    add_compare_arguments(parser)
    for argv in (["--experiment", "digits", "--epochs", "2", "--quick", "--out", "d"],
                 ["--experiment", "bf16", "--steps", "3", "--seeds", "2", "--json", "r.json"],
                 ["--all", "--json", "r.json", "--resume", "--processes", "1"],
                 ["--what-if", "--experiment", "underflow", "--steps", "3"],
                 ["--what-if", "--experiment", "statistics", "--steps", "3"],
                 ["--list"]):
        check_compare_options(parser.parse_args(argv))  # raises nothing
