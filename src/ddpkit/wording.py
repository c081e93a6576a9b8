"""Lists in user-facing text, translatable as a whole.

``", ".join`` (or ``+``) of :class:`~ddpkit.i18n.Text` values gives plain English; here every
separator is a template of the catalogue (``{first}, {rest}``), nested one pair at a time, so each
part keeps its own translation and the language decides the glue (Chinese: ``、`` and ``；``, no
space after a full stop). Used by every layer: the one home of these joins."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ddpkit.i18n import Text, _, current_language

_CJK_STOPS = "。！？；：）」"
_ASCII_STOPS = ".!?;:)"


def _is_cjk(char: str) -> bool:
    return "\u3000" <= char <= "\u9fff" or "\uff00" <= char <= "\uffef"


class Sentences(Text):
    """Two sentences one after another. The glue depends on where they meet, not on one
    template: a part may stay English in Chinese output (a log's words, an untranslated detail),
    so after "。" nothing, after an English full stop a space, and after a sentence without its
    stop a full stop ("。" after Chinese, ". " between English words). English is " ".join."""

    def localized(self, clean: Callable[[str], str] | None = None) -> str:
        first, rest = (_part(self.values[name], clean) for name in ("first", "rest"))
        if current_language() == "en":
            return first + " " + rest  # " ".join, as the parts were written
        if not first or not rest:
            return first or rest
        if first[-1] in _CJK_STOPS:
            return first + rest
        if first[-1] in _ASCII_STOPS:
            return first + " " + rest
        if _is_cjk(first[-1]):
            return first + "。" + rest
        return first + (". " if not _is_cjk(rest[0]) else "。") + rest


def _part(value: object, clean: Callable[[str], str] | None) -> str:
    """One sentence as the renderer shows it (``clean``: its sanitiser for outside text)."""
    if isinstance(value, Text):
        return value.localized(clean)
    text = str(value)
    return clean(text) if clean is not None else text


def _nested(parts: Sequence[str], template: str) -> str:
    if not parts:
        return ""
    text: str = parts[-1]
    for part in reversed(parts[:-1]):
        text = _(template, first=part, rest=text)
    return text


def commas(parts: Sequence[str]) -> str:
    """``a, b, c``; ``""`` for none."""
    return _nested(parts, _("{first}, {rest}").template)


def either(parts: Sequence[str]) -> str:
    """``a or b or c``."""
    return _nested(parts, _("{first} or {rest}").template)


def clauses(parts: Sequence[str]) -> str:
    """``a; b; c``: clauses of one sentence."""
    return _nested(parts, _("{first}; {rest}").template)


def bars(parts: Sequence[str]) -> str:
    """``a | b | c``: separate reports on one line."""
    return _nested(parts, _("{first} | {rest}").template)


def lines(parts: Sequence[str]) -> str:
    """``parts`` one per line (``"\\n".join`` that keeps each part's translation)."""
    return _nested(parts, _("{first}\n{rest}").template)


def sentences(parts: Sequence[str]) -> str:
    """``parts`` one after another, as sentences (``" ".join`` in English; :class:`Sentences`)."""
    if not parts:
        return ""
    text: str = parts[-1]
    for part in reversed(parts[:-1]):
        text = Sentences("{first} {rest}", first=part, rest=text)
    return text


def some(parts: Sequence[str], most: int) -> str:
    """The first ``most`` parts listed, then ``and N more``."""
    shown = commas(parts[:most])
    left = len(parts) - most
    return _("{shown} and {count} more", shown=shown, count=left) if left > 0 else shown


def ranges(numbers: Iterable[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``0-2,5,7-8`` (node ranks at scale)."""
    ordered = sorted(set(numbers))
    runs: list[str] = []
    start = previous = None
    for number in [*ordered, None]:
        if start is not None and number is not None and previous is not None \
                and number == previous + 1:
            previous = number
            continue
        if start is not None:
            runs.append(f"{start}" if start == previous else f"{start}-{previous}")
        start = previous = number
    return ",".join(runs)
