"""The only module that writes to the terminal: text, tables, JSON documents, logs, errors.

Human output fits the console's width (``Console.width``: the terminal's, or 100 columns when
not a terminal), measured in display columns (:mod:`ddpkit.cli.output.width`): paragraphs wrap,
tables shrink their widest columns and wrap cells, commands split with ``\\`` continuations, and
quoted material is cut with an ellipsis.

Every text is made plain here, where it is written (:func:`shown`): the values of a
:class:`~ddpkit.i18n.Text` (a rank's exception, a file name, a value read from the store, a host
name) and every plain string (a line a rank printed, a log line quoted as evidence) lose their
terminal control sequences (:func:`ddpkit.plain_text.plain`), so no message can forget it. The one
opt-out is :class:`Styled`: ddpkit's own colours, which :func:`style` makes of text it cleaned.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ddpkit.cli.output.console import Console
from ddpkit.cli.output.width import display_width, elide, pad, truncate, wrap
from ddpkit.errors import DdpkitError
from ddpkit.i18n import Text, _, current_language
from ddpkit.plain_text import plain

# docs/ as published online: errors.md is DOCS_URL/errors, errors.zh-CN.md DOCS_URL/errors.zh-CN
# (short, so a link with the longest error id still fits 80 columns after its label)
DOCS_URL = "https://ddpkit.github.io"
_STYLES = {"error": "31;1", "warn": "33", "ok": "32", "dim": "2", "bold": "1"}


class Styled(str):
    """Text the renderer already made plain, with ddpkit's own colours: written as it is."""


def _clean(text: str) -> str:
    return text if isinstance(text, Styled) else plain(text)


def shown(text: str) -> Styled:
    """``text`` as it may reach the terminal: a :class:`~ddpkit.i18n.Text` in the user's
    language with every value that came from outside made plain, any other string made plain
    whole, a :class:`Styled` text as it is."""
    if isinstance(text, Styled):
        return text
    return Styled(text.localized(_clean) if isinstance(text, Text) else plain(text))


def style(console: Console, text: str, name: str) -> Styled:
    """``text`` (made plain) wrapped in an ANSI style when the console wants colour."""
    code = _STYLES.get(name)
    if not console.color or code is None:
        return shown(text)
    return Styled(f"\x1b[{code}m{shown(text)}\x1b[0m")


def _out(console: Console, text: str) -> None:
    console.out.write(text + "\n")
    console.out.flush()


def _err(console: Console, text: str, keep: bool) -> None:
    if keep or console.verbosity != "quiet":
        console.err.write(text + "\n")
        console.err.flush()


def line(console: Console, text: str = "") -> None:
    """A line of human output on stdout (a :class:`~ddpkit.i18n.Text` in the user's language)."""
    _out(console, shown(text))


def wrapped(console: Console, text: str, *, indent: str = "  ", first: str = "",
            name: str | None = None, width: int | None = None, to_err: bool = False,
            keep: bool = False, break_paths: bool = False) -> None:
    """A paragraph on stdout (stderr with ``to_err``), wrapped to ``width`` display columns (the
    console's width when not given); the first line starts with ``first``, continuation lines
    with ``indent``. On stderr it is a log line (-q hides it) unless ``keep``: a result. A word
    wider than a line stays whole (a command's path is pasted) unless ``break_paths``: prose
    that cites a deep path breaks it after a ``/``."""
    for part in wrap(shown(text), width or console.width, initial_indent=shown(first),
                     subsequent_indent=shown(indent), break_long_words=break_paths):
        part = style(console, Styled(part), name) if name else part
        _err(console, part, keep) if to_err else _out(console, part)


def clipped(console: Console, text: str, *, middle: bool = False, to_err: bool = False) -> None:
    """A line of quoted material (a log line as evidence) cut to the console's width with an
    ellipsis at its end, or in its ``middle`` (a setting whose value is a long path). A tab in
    it is one space: the columns a tab takes depend on where it stands, which the cut cannot
    know (a tab-separated log, Envoy's or a container runtime's, would spill past the width)."""
    text = shown(text.replace("\t", " "))
    fitted = elide(text, console.width) if middle else truncate(text, console.width)
    _err(console, fitted, False) if to_err else _out(console, fitted)


def _shell_words(text: str) -> list[str] | None:
    """``text`` split at the blanks a shell splits it at, each word as written (quotes, escapes
    and operators kept); None when its quotes do not close."""
    words: list[str] = []
    current, quote, escaped = "", "", False
    for char in text:
        if escaped:
            current, escaped = current + char, False
        elif char == "\\" and quote != "'":
            current, escaped = current + char, True
        elif quote:
            current += char
            quote = "" if char == quote else quote
        elif char in "'\"":
            current, quote = current + char, char
        elif char in " \t":
            if current:
                words.append(current)
            current = ""
        else:
            current += char
    if quote or escaped:
        return None
    return words + [current] if current else words


def command_lines(text: str, columns: int, indent: str = "  ", more: str | None = None) -> list[str]:
    """A shell command (as quoted text) on lines of at most ``columns`` display columns, each but
    the last ending in `` \\`` so the whole still pastes into a shell; continuation lines start
    with ``more`` (``indent`` and four spaces). An argument wider than a line stays whole."""
    args = _shell_words(text)
    if args is None:  # not shell syntax after all: show it as it is
        return [indent + text]
    words: list[str] = []  # an option and its value stay on one line: "--lr 0.1", "-m pkg"
    for index, arg in enumerate(args):
        joined = (index > 0 and args[index - 1].startswith("-") and "=" not in args[index - 1]
                  and not arg.startswith("-") and bool(words))
        if joined:
            words[-1] += " " + arg
        else:
            words.append(arg)
    lines: list[str] = []
    current, more = indent, indent + "    " if more is None else more
    for word in words:
        if current.strip() and display_width(current) + 1 + display_width(word) + 2 > columns:
            lines.append(current + " \\")
            current = more + word
        else:
            current += (" " if current.strip() else "") + word
    return lines + [current]


def command(console: Console, text: str, *, indent: str = "  ", more: str | None = None,
            to_err: bool = False, keep: bool = False) -> None:
    """A shell command to read or paste, fitted to the console's width (:func:`command_lines`);
    on stderr a log line unless ``keep`` (a command the user must run)."""
    indent = shown(indent)
    for part in command_lines(shown(text), console.width, indent, more):
        _err(console, part, keep) if to_err else _out(console, part)


def log(console: Console, text: str) -> None:
    """A log or progress line on stderr (never mixed into a JSON document); not with -q."""
    _err(console, shown(text), False)


def result(console: Console, text: str) -> None:
    """A line on stderr that -q keeps: a command's outcome, or what the user must act on."""
    _err(console, shown(text), True)


def status(console: Console, text: str, *, prefix: str = "ddpkit: ", keep: bool = False) -> None:
    """A progress or status line of ddpkit's own on stderr, wrapped to the console's width;
    continuation lines keep the prefix, indented. -q hides it unless ``keep`` (an outcome)."""
    wrapped(console, text, first=prefix, indent=prefix + "  " if prefix else "  ", to_err=True,
            keep=keep)


def warn(console: Console, text: str) -> None:
    """A warning paragraph on stderr, wrapped to the console's width."""
    label = shown(_("warning:"))
    wrapped(console, Styled(style(console, label, "warn") + _after(label) + shown(text)),
            indent="  ", to_err=True)


def emit_json(console: Console, doc: dict[str, Any]) -> None:
    """One JSON document on stdout."""
    console.out.write(json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n")
    console.out.flush()


_GAP = 2  # spaces between columns
_MIN_COLUMN = 8  # in the last resort a column is squeezed to this (or its own natural width)
_MIN_WRAPPED = 24  # the last column (often prose) down to this width before the others shrink
_SHORT_CELL = 12  # a cell this narrow is never wrapped while others can give up space
_MIN_HEADING = 4  # a heading longer than its column's words is cut down to this


def fit_columns(natural: Sequence[int], words: Sequence[int], columns: int) -> list[int]:
    """Column widths that fit ``columns`` display columns, widest first: first no column below
    its longest word (``words``: cells wrap between words; headings are cut) and the last column
    (often prose) not below ``_MIN_WRAPPED``; then the other columns down to ``_MIN_COLUMN``,
    their long words (paths, addresses) broken; then the last column too. A very narrow width
    may still be exceeded."""
    widths = list(natural)
    excess = sum(widths) + _GAP * (len(widths) - 1) - columns
    last = len(widths) - 1
    least = [min(w, _MIN_COLUMN) for w in widths]
    by_words = [min(w, max(words[i], _MIN_HEADING)) for i, w in enumerate(widths)]
    for floors in ([max(f, min(widths[i], _MIN_WRAPPED)) if i == last else f
                    for i, f in enumerate(by_words)],
                   [max(by_words[i], min(widths[i], _MIN_WRAPPED)) if i == last else f
                    for i, f in enumerate(least)],
                   least):
        while excess > 0:
            shrinkable = [i for i, w in enumerate(widths) if w > floors[i]]
            if not shrinkable:
                break
            widest = max(shrinkable, key=lambda i: widths[i])
            widths[widest] -= 1
            excess -= 1
    return widths


def _unbreakable(cell: str) -> int:
    """The narrowest a cell wraps to without breaking a word; a short cell ("10 Gb/s") whole."""
    width = display_width(cell)
    return width if width <= _SHORT_CELL else max((display_width(w) for w in cell.split()),
                                                  default=0)


def table_lines(headers: Sequence[str], rows: Sequence[Sequence[Any]],
                columns: int) -> list[str]:
    """An aligned text table in at most ``columns`` display columns: the widest columns shrink
    first (:func:`fit_columns`); a cell wider than its column wraps onto more lines, nothing of it
    lost, and a heading wider than its column is cut with ``…``."""
    cells = [[shown(h) for h in headers]] + [
        ["" if c is None else shown(c if isinstance(c, str) else str(c)) for c in r]
        for r in rows]
    natural = [max(display_width(r[i]) for r in cells) for i in range(len(headers))]
    words = [max((_unbreakable(r[i]) for r in cells[1:]), default=0) for i in range(len(headers))]
    widths = fit_columns(natural, words, columns)
    out: list[str] = []
    for index, row in enumerate(cells):
        parts = [[truncate(cell, widths[i])] if index == 0 or display_width(cell) <= widths[i]
                 else wrap(cell, widths[i], break_long_words=True) or [""]
                 for i, cell in enumerate(row)]
        for depth in range(max(len(p) for p in parts)):
            texts = [p[depth] if depth < len(p) else "" for p in parts]
            out.append((" " * _GAP).join(pad(t, widths[i]) for i, t in enumerate(texts)).rstrip())
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
        _out(console, style(console, Styled(text), "bold") if index == 0 else text)


def error(console: Console, exc: DdpkitError, *, as_json: bool) -> None:
    """A user-facing error: one paragraph with id, cause and fix (or a JSON error document)."""
    if as_json:
        from ddpkit.report import document

        emit_json(console, document("error", 1, {"error": exc.to_dict()}))
    label = shown(_("error [{id}]:", id=exc.error_id))
    head = style(console, label, "error")
    wrapped(console, Styled(head + _after(label) + shown(exc.message)), indent="  ", to_err=True,
            keep=True)
    if exc.hint:
        wrapped(console, _("fix: {hint}", hint=exc.hint), first="  ", indent="       ",
                to_err=True, keep=True)
    wrapped(console, _("more: {link} (offline: `ddpkit explain {id}`)",
                       link=error_link(exc.error_id), id=exc.error_id),
            first="  ", indent="  ", to_err=True, keep=True)


def _after(label: str) -> str:
    """The gap after a label: none after a full-width colon (Chinese), a space otherwise."""
    return "" if label.endswith("：") else " "


def error_link(error_id: str) -> str:
    """Where an error id is explained: its anchor in docs/errors.md (the zh twin in Chinese)."""
    page = "errors.zh-CN" if current_language() == "zh" else "errors"
    return f"{DOCS_URL}/{page}#{error_id}"
