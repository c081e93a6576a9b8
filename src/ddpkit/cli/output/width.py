"""Display width of console text: how many terminal columns a string takes, and cutting or wrapping
it to a number of columns.

A terminal shows East Asian wide and fullwidth characters (``unicodedata.east_asian_width`` W or
F: CJK ideographs, kana, hangul, fullwidth punctuation) in two columns, combining marks and other
zero-width characters in none, and ANSI escape sequences (colours) not at all, so ``len()`` is
wrong for all three. Ambiguous-width characters count one column, as terminals outside CJK locales
show them. Standard library only (no wcwidth); no I/O. The escape sequences are those
:mod:`ddpkit.plain_text` removes from other people's text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

from ddpkit.plain_text import CONTROL_SEQUENCE as _ANSI
from ddpkit.plain_text import CUT as MARKER

RESET = "\x1b[0m"

_ZERO_WIDTH_CATEGORIES = frozenset({"Mn", "Me", "Cf", "Cc"})
_WIDE = frozenset({"W", "F"})
# No line starts with these (closing brackets and punctuation) and none ends with the openers.
_NO_BREAK_BEFORE = frozenset("、。，．：；！？）］｝〕〉》」』】〙〗〟’”｠»ー…‥々ゝゞ・,.;:!?)]}%")
_NO_BREAK_AFTER = frozenset("（［｛〔〈《「『【〘〖〝‘“｟«([{")
_SEPARATORS = "/,:=-_."
_WHITESPACE = re.compile(r"(\s+)")  # where a word too long for a line is broken, when it must be


def strip_ansi(text: str) -> str:
    """``text`` without its ANSI escape sequences."""
    return _ANSI.sub("", text) if "\x1b" in text else text


def char_width(char: str) -> int:
    """Columns one character takes: 2 for wide and fullwidth, 0 for combining and control."""
    if " " <= char < "\x7f":
        return 1
    if unicodedata.category(char) in _ZERO_WIDTH_CATEGORIES or unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in _WIDE else 1


def display_width(text: str) -> int:
    """Columns ``text`` takes on a terminal (ANSI escape sequences take none)."""
    if text.isascii() and "\x1b" not in text and text.isprintable():
        return len(text)
    return sum(char_width(c) for c in strip_ansi(text))


def _pieces(text: str) -> Iterator[tuple[str, int]]:
    """``text`` as (piece, columns): escape sequences whole (0 columns), other characters one by
    one."""
    pos = 0
    for match in _ANSI.finditer(text):
        for char in text[pos:match.start()]:
            yield char, char_width(char)
        yield match.group(), 0
        pos = match.end()
    for char in text[pos:]:
        yield char, char_width(char)


def pad(text: str, columns: int) -> str:
    """``text`` followed by spaces up to ``columns`` display columns (``str.ljust`` by width)."""
    return text + " " * max(0, columns - display_width(text))


def truncate(text: str, columns: int, marker: str = MARKER) -> str:
    """``text`` cut to at most ``columns`` display columns, ending in ``marker`` when cut.

    Escape sequences before the cut are kept, and a reset follows when any were, so a cut
    coloured cell does not colour what comes after it.
    """
    if display_width(text) <= columns:
        return text
    room = columns - display_width(marker)
    if room < 0:
        return truncate(marker, columns, "")
    kept: list[str] = []
    used, styled = 0, False
    for piece, width in _pieces(text):
        if piece.startswith("\x1b"):
            kept.append(piece)
            styled = True
        elif used + width > room:
            break
        else:
            kept.append(piece)
            used += width
    return "".join(kept) + marker + (RESET if styled else "")


def elide(text: str, columns: int, marker: str = MARKER) -> str:
    """``text`` in at most ``columns`` display columns with its middle replaced by ``marker``
    when too wide: both ends of a path stay readable. Text with escape sequences is cut at its
    end instead (:func:`truncate`)."""
    if display_width(text) <= columns or "\x1b" in text:
        return truncate(text, columns, marker)
    room = columns - display_width(marker)
    if room < 2:
        return truncate(text, columns, marker)
    head, _ = _cut(text, (room + 1) // 2)
    tail_room, start = room - display_width(head), len(text)
    while start > len(head) and display_width(text[start - 1:]) <= tail_room:
        start -= 1
    return head + marker + text[start:]


def _cut_at_separator(chunk: str, columns: int) -> tuple[str, str]:
    """:func:`_cut`, moved back to just after a ``/``, ``,`` or the like in its second half, so a
    broken path or list breaks between its parts."""
    head, rest = _cut(chunk, columns)
    if not rest:
        return head, rest
    at = max(head.rfind(sep) for sep in _SEPARATORS)
    if at + 1 > len(head) // 2 and "\x1b" not in head:
        return chunk[:at + 1], chunk[at + 1:]
    return head, rest


def _can_break(before: str, after: str) -> bool:
    """A line may break between two adjacent characters of one word: next to a wide character
    (CJK text has no spaces), never before closing or after opening punctuation."""
    if not before or not after or char_width(after) == 0:
        return False
    if after in _NO_BREAK_BEFORE or before in _NO_BREAK_AFTER:
        return False
    return char_width(before) == 2 or char_width(after) == 2


def _chunks(word: str) -> list[str]:
    """A word cut where a line may break inside it (only next to wide characters)."""
    if word.isascii():
        return [word]
    chunks: list[str] = []
    current, last = "", ""
    for piece, _ in _pieces(word):
        if piece.startswith("\x1b"):
            current += piece
            continue
        if current and _can_break(last, piece):
            chunks.append(current)
            current = ""
        current += piece
        last = piece
    if current:
        chunks.append(current)
    return chunks


def _cut(chunk: str, columns: int) -> tuple[str, str]:
    """``chunk`` cut after at most ``columns`` display columns (at least one character)."""
    used, end = 0, 0
    for piece, width in _pieces(chunk):
        if used and used + width > columns:
            break
        used += width
        end += len(piece)
    return chunk[:end], chunk[end:]


def wrap(text: str, columns: int, *, initial_indent: str = "", subsequent_indent: str = "",
         break_long_words: bool = False) -> list[str]:
    """``text`` as lines of at most ``columns`` display columns (``textwrap.wrap`` by width).

    As with ``textwrap``, every whitespace character becomes a space, the spaces between words
    stay as they are ("x  # comment" keeps both), the text's own leading spaces stay on its first
    line, and a line break drops the spaces it falls on. Lines break at spaces and between CJK
    characters; a word wider than a line (a path, a URL) stays whole unless
    ``break_long_words``. Blank text gives no lines.
    """
    lines: list[str] = []
    current, used, empty = initial_indent, display_width(initial_indent), True
    first, gap = True, ""
    for token in _WHITESPACE.split(text):
        if not token:
            continue
        if token.isspace():
            gap = " " * len(token)
            continue
        for index, chunk in enumerate(_chunks(token)):
            sep = gap if index == 0 and (not empty or first) else ""
            width = display_width(chunk)
            if not empty and used + len(sep) + width > columns:
                lines.append(current)
                current, used, empty = subsequent_indent, display_width(subsequent_indent), True
                sep = ""
            while empty and break_long_words and used + len(sep) + width > columns:
                head, rest = _cut_at_separator(chunk, max(1, columns - used - len(sep)))
                if not rest:
                    break
                lines.append(current + sep + head)
                current, used, sep = subsequent_indent, display_width(subsequent_indent), ""
                chunk, width = rest, display_width(rest)
            current += sep + chunk
            used += len(sep) + width
            empty, first = False, False
        gap = ""
    if not empty:
        lines.append(current)
    return lines
