"""argparse's messages never come from a catalogue the environment points at (issue 32):
``LANGUAGE=../../tmp/x`` used to make argparse load ``/tmp/x/LC_MESSAGES/messages.mo`` (gettext
joins the variable to its locale directory as it is). A planted catalogue, reachable through
``LANGUAGE`` from the directory gettext looks in, is not loaded."""

from __future__ import annotations

import argparse
import gettext
import io
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo

from ddpkit.cli.main import main
from ddpkit.cli.output.console import Console

PLANTED = "PLANTED-BY-SOMEONE-ELSE"


def _plant(root: Path) -> Path:
    catalog = Catalog(locale="en")
    for message in ("unrecognized arguments: %s", "usage: ", "show this help message and exit",
                    "the following arguments are required: %s"):
        catalog.add(message, PLANTED + " " + message)
    where = root / "x" / "LC_MESSAGES"
    where.mkdir(parents=True)
    with open(where / "messages.mo", "wb") as out:
        write_mo(out, catalog)
    return root / "x"


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The planted catalogue and LANGUAGE pointing at it relative to gettext's locale directory
    (bound to a directory of the test's own, as the interpreter's share/locale would be)."""
    localedir = tmp_path / "share" / "locale"
    localedir.mkdir(parents=True)
    target = _plant(tmp_path / "tmp")
    old = gettext.bindtextdomain("messages")
    gettext.bindtextdomain("messages", str(localedir))
    monkeypatch.setenv("LANGUAGE", os.path.relpath(target, localedir))
    for name in ("_", "ngettext"):  # restored after the test: ddpkit's main replaces them
        monkeypatch.setattr(argparse, name, getattr(argparse, name))
    yield target
    gettext.bindtextdomain("messages", old)


def test_the_planted_catalogue_is_reachable_through_language(planted: Path) -> None:
    """The trap is real: gettext itself follows LANGUAGE to the planted file."""
    assert gettext.gettext("usage: ").startswith(PLANTED)


def test_ddpkit_never_shows_the_planted_messages(planted: Path) -> None:
    for argv in (["nics", "--no-such-flag"], ["nics", "--help"], ["doctor", "--bogus"]):
        console = Console(out=io.StringIO(), err=io.StringIO(), color=False, width=100)
        main(argv, console)
        out, err = console.out, console.err
        assert isinstance(out, io.StringIO) and isinstance(err, io.StringIO)
        written = out.getvalue() + err.getvalue()
        assert written.strip(), argv
        assert PLANTED not in written, (argv, written)
