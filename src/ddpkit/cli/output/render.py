"""The only module that writes to the terminal: text, tables, JSON documents, logs, errors."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ddpkit.cli.output.console import Console
from ddpkit.errors import DdpkitError

_STYLES = {"error": "31;1", "warn": "33", "ok": "32", "dim": "2", "bold": "1"}


def style(console: Console, text: str, name: str) -> str:
    """``text`` wrapped in an ANSI style when the console wants colour, else unchanged."""
    code = _STYLES.get(name)
    if not console.color or code is None:
        return text
    return f"\x1b[{code}m{text}\x1b[0m"


def line(console: Console, text: str = "") -> None:
    """A line of human output on stdout."""
    console.out.write(text + "\n")
    console.out.flush()


def wrapped(console: Console, text: str, *, indent: str = "  ", name: str | None = None,
            width: int = 100) -> None:
    """A paragraph on stdout, wrapped to ``width`` columns; continuation lines get ``indent``."""
    import textwrap

    for part in textwrap.wrap(text, width, subsequent_indent=indent,
                              break_long_words=False, break_on_hyphens=False):
        line(console, style(console, part, name) if name else part)


def log(console: Console, text: str) -> None:
    """A log or progress line on stderr (never mixed into a JSON document); not with -q."""
    if console.verbosity != "quiet":
        result(console, text)


def result(console: Console, text: str) -> None:
    """A line on stderr that -q keeps: a command's outcome, or what the user must act on."""
    console.err.write(text + "\n")
    console.err.flush()


def warn(console: Console, text: str) -> None:
    log(console, style(console, "warning: ", "warn") + text)


def emit_json(console: Console, doc: dict[str, Any]) -> None:
    """One JSON document on stdout."""
    console.out.write(json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n")
    console.out.flush()


def table(
    console: Console,
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    title: str | None = None,
) -> None:
    """A plain, aligned text table (no box drawing, so it pastes into issues and logs)."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    if title:
        line(console, style(console, title, "bold"))
    for index, row in enumerate(cells):
        text = "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
        line(console, style(console, text, "bold") if index == 0 else text)


def error(console: Console, exc: DdpkitError, *, as_json: bool) -> None:
    """A user-facing error: one paragraph with id, cause and fix (or a JSON error document)."""
    if as_json:
        from ddpkit.report import document

        emit_json(console, document("error", 1, {"error": exc.to_dict()}))
    head = style(console, f"error [{exc.error_id}]:", "error")
    result(console, f"{head} {exc.message}")
    if exc.hint:
        result(console, f"  fix: {exc.hint}")
