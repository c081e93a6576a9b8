"""Every command's ``--help``, sub-commands included (``sim up``, ``nccl-conf set``), fits an
80-column terminal in English and in Chinese (full-width characters take two columns), and the
Chinese help is Chinese."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from parser_tree import parsers

from ddpkit.cli.command_table import COMMANDS, build_parser
from ddpkit.cli.output.width import display_width
from ddpkit.i18n import Language, use_language


@pytest.fixture(params=["en", "zh"])
def language(request: pytest.FixtureRequest) -> Iterator[Language]:
    chosen: Language = request.param
    use_language(chosen)
    try:
        yield chosen
    finally:
        use_language("en")



def _helps(command: str) -> list[tuple[str, str]]:
    parser, _unused = build_parser(command)  # built in the chosen language, as `main` builds it
    return [(name, sub.format_help()) for name, sub in parsers(command, parser)]


def _has_cjk(text: str) -> bool:
    return any("\u4e00" <= char <= "\u9fff" for char in text)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_help_fits_80_columns(command: str, language: Language,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    helps = _helps(command)
    if command in ("sim", "nccl-conf"):
        assert len(helps) > 1  # the sub-commands are checked too
    for name, text in helps:
        wide = [line for line in text.splitlines() if display_width(line) > 80]
        assert wide == [], f"ddpkit {name} --help ({language}) is wider than 80 columns"
        assert _has_cjk(text) == (language == "zh"), f"ddpkit {name} --help ({language})"


def test_the_fixture_restores_english() -> None:
    from ddpkit.i18n import current_language

    assert current_language() == "en"
