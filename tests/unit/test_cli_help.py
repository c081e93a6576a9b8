"""`--help` and usage errors as a newcomer reads them (issue 9): wrapped at the terminal's width
without breaking words or paths, every option's default shown, examples kept as written."""

from __future__ import annotations

import argparse
import re

import pytest

from ddpkit.cli.command_table import COMMANDS, build_parser
from ddpkit.errors import ExitCode


def _help(command: str, columns: int, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    parser, _ = build_parser(command)
    return parser.format_help()


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _options(sub)
        elif action.option_strings and action.help != argparse.SUPPRESS and action.nargs != 0:
            found.append(action)
    return found


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_fits_80_columns_and_never_splits_a_word(command: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    text = _help(command, 80, monkeypatch)
    wide = [line for line in text.splitlines() if len(line) > 80
            and not line.lstrip().startswith(("usage:", "[", "-"))]  # argparse's own usage lines
    assert wide == []
    # a hyphenated word or path is never cut at its hyphen: "./ddpkit-" at a line's end was the bug
    assert not re.search(r"\w-\n\s+\w", text)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_shows_its_default(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    parser, _ = build_parser(command)
    formatter = parser._get_formatter()
    missing = [a.option_strings[0] for a in _options(parser)
               if not re.search(r"\bdefault\b", formatter._get_help_string(a) or "", re.I)]
    assert missing == []


def test_launch_help_ends_with_three_examples(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _help("launch", 80, monkeypatch).rstrip().splitlines()
    examples = lines[lines.index("examples:") + 1:]
    assert len(examples) == 3 and all(line.startswith("  ddpkit launch ") for line in examples)


def test_bare_launch_says_the_script_is_required(run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("launch")
    assert result.code == ExitCode.USAGE
    said = " ".join(result.err.split())  # wrapped at 100 columns
    assert "script (the training script" in said and "is required" in said
    assert "script_args" not in result.err
