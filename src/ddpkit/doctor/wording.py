"""Findings' prose put together from translatable parts (the doctor's own joins).

A rule writes what it saw (a :class:`~ddpkit.i18n.Text`) in front of the catalogue's general
explanation; joining them with ``+`` or ``" ".join`` would give plain English, so these build one
template whose values are the parts: each part is translated, and the language decides the glue
(Chinese sentences take no space after the full stop).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ddpkit.i18n import Text
from ddpkit.wording import Sentences, sentences


def specific_then_general(specific: str | Sequence[str], general: str) -> Text:
    """What a rule saw (one text, or sentences), then the catalogue's general explanation."""
    seen = specific if isinstance(specific, str) else sentences(specific)
    return Sentences("{first} {rest}", first=seen, rest=general)


class _Replaced(Text):
    """A text with one literal part (a port, a name) replaced, in every language."""

    old: str
    new: str

    def localized(self, clean: Callable[[str], str] | None = None) -> str:
        return super().localized(clean).replace(self.old, self.new)


def replaced(text: str, old: str, new: str) -> str:
    """``text.replace(old, new)`` that stays translatable (``str.replace`` gives plain English):
    for a literal in a catalogue text, such as a default port in a fix."""
    if not isinstance(text, Text):
        return text.replace(old, new)
    result = str.__new__(_Replaced, str.__str__(text).replace(old, new))
    result.template, result.plural = text.template, text.plural
    result.number, result.values = text.number, text.values
    result.old, result.new = old, new
    return result
