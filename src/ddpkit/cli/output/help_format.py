"""How ``--help`` looks: wrapped at the terminal's width without breaking words or paths, every
option's default shown, and indented example lines kept as written."""

from __future__ import annotations

import argparse
import re
import shutil
import textwrap

_MENTIONS_DEFAULT = re.compile(r"\bdefault\b", re.IGNORECASE)


class HelpFormatter(argparse.HelpFormatter):
    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 28,
                 width: int | None = None) -> None:
        if width is None:
            width = max(60, min(shutil.get_terminal_size((100, 24)).columns, 120)) - 2
        super().__init__(prog, indent_increment, max_help_position, width)

    def _split_lines(self, text: str, width: int) -> list[str]:
        text = " ".join(text.split())
        return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """Paragraphs are re-wrapped; lines that start with a space (examples) stay as written."""
        out: list[str] = []
        paragraph: list[str] = []

        def flush() -> None:
            if paragraph:
                out.extend(textwrap.wrap(" ".join(paragraph), width, initial_indent=indent,
                                         subsequent_indent=indent, break_long_words=False,
                                         break_on_hyphens=False))
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

    def _get_help_string(self, action: argparse.Action) -> str | None:
        """The help text, plus ``(default X)`` when it names no default itself."""
        text = action.help or ""
        if text == argparse.SUPPRESS or _MENTIONS_DEFAULT.search(text):
            return text
        default = action.default
        if not action.option_strings or action.nargs == 0 or default is argparse.SUPPRESS:
            return text
        if default in (None, [], ""):
            shown = "not set"
        elif isinstance(default, (list, tuple)):
            shown = ", ".join(str(v) for v in default)
        else:
            shown = str(default)
            if len(shown) > 40 and " " not in shown:  # a long comma list wraps after its commas
                shown = shown.replace(",", ", ")
        return f"{text} (default {shown})" if text else f"default {shown}"

    def start_section(self, heading: str | None) -> None:
        """A long group title wraps like any text (argparse prints it on one line)."""
        if heading and len(heading) > self._width:
            heading = "\n".join(textwrap.wrap(heading, self._width - 1, break_long_words=False,
                                              break_on_hyphens=False))
        super().start_section(heading)
