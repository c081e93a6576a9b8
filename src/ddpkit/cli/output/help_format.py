"""How ``--help`` looks: wrapped at the terminal's width (in display columns, so CJK text wraps
too) without breaking words or paths, every option's default shown, and indented example lines kept
as written."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from ddpkit.cli.output.console import terminal_width
from ddpkit.cli.output.width import char_width, display_width, wrap
from ddpkit.i18n import _, localized

_MENTIONS_DEFAULT = re.compile(r"\bdefault\b", re.IGNORECASE)


def _join(lines: list[str]) -> str:
    """Source lines of one paragraph as one text: a space between them, except where both sides
    are CJK (which has no spaces between words)."""
    text = ""
    for part in lines:
        if text and not (char_width(text[-1]) == 2 and char_width(part[0]) == 2):
            text += " "
        text += part
    return text


_CJK_HEADING = re.compile(r"(?m)^(\s*\S*[\u4e00-\u9fff]):$")


class HelpFormatter(argparse.HelpFormatter):
    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 28,
                 width: int | None = None) -> None:
        if width is None:
            isatty = getattr(sys.stdout, "isatty", None)
            width = max(60, min(terminal_width(bool(isatty and isatty())), 120)) - 2
        super().__init__(prog, indent_increment, max_help_position, width)

    def _split_lines(self, text: str, width: int) -> list[str]:
        text = " ".join(text.split())
        return wrap(text, width) or [""]

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """Paragraphs are re-wrapped; lines that start with a space (examples) stay as written."""
        out: list[str] = []
        paragraph: list[str] = []

        def flush() -> None:
            if paragraph:
                out.extend(wrap(_join(paragraph), width, initial_indent=indent,
                                subsequent_indent=indent))
                paragraph.clear()

        for line in text.strip("\n").splitlines():
            if not line.strip():
                flush()
                out.append("")
            elif line.startswith(" "):
                flush()
                out.append(indent + line)
            else:
                paragraph.append(line.strip())
        flush()
        return "\n".join(out)

    def _format_text(self, text: str) -> str:
        return super()._format_text(localized(text))

    def add_usage(self, usage: str | None, actions: Any, groups: Any,
                  prefix: str | None = None) -> None:
        super().add_usage(usage, actions, groups, localized(_("usage: ")) if prefix is None
                          else prefix)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        """The help text in the user's language, plus ``(default X)`` when it names no default
        itself."""
        text = localized(action.help or "")
        if text == argparse.SUPPRESS or _MENTIONS_DEFAULT.search(action.help or ""):
            return text
        default = action.default
        if not action.option_strings or action.nargs == 0 or default is argparse.SUPPRESS:
            return text
        if default in (None, [], ""):
            shown = localized(_("not set"))
        elif isinstance(default, (list, tuple)):
            shown = ", ".join(str(v) for v in default)
        else:
            shown = str(default)
            if len(shown) > 40 and " " not in shown:  # a long comma list wraps after its commas
                shown = shown.replace(",", ", ")
        if not text:
            return localized(_("default {value}", value=shown))
        suffix = localized(_("(default {value})", value=shown))
        # no blank next to a full-width bracket (CJK text has none between its words either)
        tight = char_width(text[-1]) == 2 or char_width(suffix[0]) == 2
        return text + ("" if tight else " ") + suffix

    def format_help(self) -> str:
        # argparse ends a heading with an ASCII colon; after Chinese (选项, 位置参数) it is the
        # full-width one, as beside 用法：.
        return _CJK_HEADING.sub("\\1：", super().format_help())

    def start_section(self, heading: str | None) -> None:
        """A long group title wraps like any text (argparse prints it on one line)."""
        heading = localized(heading) if heading else heading
        if heading and display_width(heading) > self._width:
            heading = "\n".join(wrap(heading, self._width - 1))
        super().start_section(heading)
