"""``ddpkit --lang xx COMMAND`` names the unknown language and the ones ddpkit speaks (issue 32),
instead of calling --lang an unknown option."""

from __future__ import annotations

import io

import pytest

from ddpkit.cli.main import main
from ddpkit.cli.output.console import Console
from ddpkit.errors import ExitCode


@pytest.mark.parametrize(("argv", "said"), [
    (["--lang", "xx", "nics"], "unknown language 'xx' for --lang"),
    (["--lang=fr", "nics"], "unknown language 'fr' for --lang"),
    (["--lang"], "--lang needs a language"),
])
def test_an_unknown_language_is_named_with_the_known_ones(argv: list[str], said: str) -> None:
    console = Console(out=io.StringIO(), err=io.StringIO(), color=False, width=100)
    assert main(argv, console) == ExitCode.USAGE
    err = console.err
    assert isinstance(err, io.StringIO)
    text = err.getvalue()
    assert said in text and "en|zh" in text, text
    assert "unknown option" not in text
