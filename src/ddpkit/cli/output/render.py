"""The only module that writes to the terminal: text, tables, JSON documents, logs, errors."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ddpkit.cli.output.console import Console
from ddpkit.cli.output.width import display_width, pad, truncate, wrap
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


def wrapped(console: Console, text: str, *, indent: str = "  ", first: str = "",
            name: str | None = None, width: int | None = None) -> None:
    """A paragraph on stdout, wrapped to ``width`` display columns (the console's width when not
    given); the first line starts with ``first``, continuation lines with ``indent``."""
    for part in wrap(text, width or console.width, initial_indent=first, subsequent_indent=indent):
        line(console, style(console, part, name) if name else part)


def clipped(console: Console, text: str) -> None:
    """A line of quoted material (a log line as evidence) cut to the console's width with an
    ellipsis."""
    line(console, truncate(text, console.width))


def log(console: Console, text: str) -> None:
    """A log or progress line on stderr (never mixed into a JSON document)."""
    console.err.write(text + "\n")
    console.err.flush()


def warn(console: Console, text: str) -> None:
    log(console, style(console, "warning: ", "warn") + text)


def emit_json(console: Console, doc: dict[str, Any]) -> None:
    """One JSON document on stdout."""
    console.out.write(json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n")
    console.out.flush()


_GAP = 2  # spaces between columns
_MIN_COLUMN = 8  # in the last resort a column is squeezed to this (or its own natural width)
_MIN_WRAPPED = 24  # the last column wraps, down to this width before the others give up space
_MIN_HEADING = 4  # a heading longer than its column's cells is cut down to this


def fit_columns(natural: Sequence[int], body: Sequence[int], columns: int) -> list[int]:
    """Column widths that fit ``columns`` display columns, widest first: the last column (it
    wraps) down to ``_MIN_WRAPPED`` and headings down to their cells' width (``body``) first; then
    any column down to ``_MIN_COLUMN``. A very narrow width may still be exceeded."""
    widths = list(natural)
    excess = sum(widths) + _GAP * (len(widths) - 1) - columns
    last = len(widths) - 1
    first_floors = [min(w, _MIN_WRAPPED if i == last else max(body[i], _MIN_HEADING))
                    for i, w in enumerate(widths)]
    for floors in (first_floors, [min(w, _MIN_COLUMN) for w in widths]):
        while excess > 0:
            shrinkable = [i for i, w in enumerate(widths) if w > floors[i]]
            if not shrinkable:
                break
            widest = max(shrinkable, key=lambda i: widths[i])
            widths[widest] -= 1
            excess -= 1
    return widths


def table_lines(headers: Sequence[str], rows: Sequence[Sequence[Any]],
                columns: int) -> list[str]:
    """An aligned text table in at most ``columns`` display columns: the widest columns shrink
    first; the last column wraps onto continuation lines, the others are cut with ``…``."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    body = [max((display_width(r[i]) for r in cells[1:]), default=0) for i in range(len(headers))]
    natural = [max(display_width(cells[0][i]), body[i]) for i in range(len(headers))]
    widths = fit_columns(natural, body, columns)
    last = len(widths) - 1
    indent = " " * (sum(widths[:last]) + _GAP * last)
    out: list[str] = []
    for index, row in enumerate(cells):
        tail = [row[last]]
        if display_width(row[last]) > widths[last]:
            tail = (wrap(row[last], widths[last], break_long_words=True) or [""]) if index else \
                [truncate(row[last], widths[last])]
        head = [pad(truncate(cell, widths[i]), widths[i]) for i, cell in enumerate(row[:last])]
        out.append((" " * _GAP).join(head + [tail[0]]).rstrip())
        out.extend((indent + more).rstrip() for more in tail[1:])
    return out


def table(
    console: Console,
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    title: str | None = None,
) -> None:
    """A plain, aligned text table (no box drawing, so it pastes into issues and logs), fitted to
    the console's width (:func:`table_lines`)."""
    if title:
        wrapped(console, title, indent="", name="bold")
    for index, text in enumerate(table_lines(headers, rows, console.width)):
        line(console, style(console, text, "bold") if index == 0 else text)


def error(console: Console, exc: DdpkitError, *, as_json: bool) -> None:
    """A user-facing error: one paragraph with id, cause and fix (or a JSON error document)."""
    if as_json:
        from ddpkit.report import document

        emit_json(console, document("error", 1, {"error": exc.to_dict()}))
    head = style(console, f"error [{exc.error_id}]:", "error")
    log(console, f"{head} {exc.message}")
    if exc.hint:
        log(console, f"  fix: {exc.hint}")
