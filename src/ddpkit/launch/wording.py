"""Lists in user-facing text: the separators are words too (``a, b and 2 more``, ``x or y``),
so they are templates of the catalogue, nested one pair at a time, never ``", ".join`` of
:class:`~ddpkit.i18n.Text` values (a join gives plain English)."""

from __future__ import annotations

from collections.abc import Sequence

from ddpkit.i18n import _


def listed(items: Sequence[str]) -> str:
    """``a, b, c``: each item keeps its own translation; ``""`` for none."""
    if not items:
        return ""
    text: str = items[-1]
    for item in reversed(items[:-1]):
        text = _("{first}, {rest}", first=item, rest=text)
    return text


def either(items: Sequence[str]) -> str:
    """``a or b or c``."""
    if not items:
        return ""
    text: str = items[-1]
    for item in reversed(items[:-1]):
        text = _("{first} or {rest}", first=item, rest=text)
    return text


def some(items: Sequence[str], most: int) -> str:
    """The first ``most`` items listed, then ``and N more``."""
    shown = listed(items[:most])
    left = len(items) - most
    return _("{shown} and {count} more", shown=shown, count=left) if left > 0 else shown


def clauses(items: Sequence[str]) -> str:
    """``a; b; c``: clauses of one sentence."""
    if not items:
        return ""
    text: str = items[-1]
    for item in reversed(items[:-1]):
        text = _("{first}; {rest}", first=item, rest=text)
    return text


def bars(items: Sequence[str]) -> str:
    """``a | b | c``: separate reports in one line."""
    if not items:
        return ""
    text: str = items[-1]
    for item in reversed(items[:-1]):
        text = _("{first} | {rest}", first=item, rest=text)
    return text
