"""Terminal I/O as an object, so tests can capture it and nothing else writes to the terminal."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from typing import Literal, TextIO

Verbosity = Literal["quiet", "normal", "verbose"]
QUIET: Verbosity = "quiet"  # -q: results and errors only
NORMAL: Verbosity = "normal"  # ddpkit's own progress; torch's internals folded or condensed
VERBOSE: Verbosity = "verbose"  # -v: torch's C++ log lines raw as well


@dataclass
class Console:
    """Where a command's output goes: documents and tables on ``out``, logs and progress on ``err``."""

    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    color: bool | None = None  # None: decide from the stream (a TTY without NO_COLOR)
    verbosity: Verbosity = NORMAL  # set once from -q/-v by the entry
    width: int = 0  # display columns human output fits in; 0: decide from ``out`` (terminal_width)

    def __post_init__(self) -> None:
        isatty = getattr(self.out, "isatty", None)
        if self.color is None:
            self.color = bool(isatty and isatty()) and "NO_COLOR" not in os.environ
        if self.width <= 0:
            self.width = terminal_width(bool(isatty and isatty()))

    @property
    def is_tty(self) -> bool:
        isatty = getattr(self.err, "isatty", None)
        return bool(isatty and isatty())


DEFAULT_WIDTH = 100  # columns when the output is not a terminal (a file, a pipe, a CI log)
MIN_WIDTH = 40  # narrower terminals get lines this wide rather than unreadable tables


def terminal_width(is_terminal: bool) -> int:
    """Columns to lay human output out in: ``COLUMNS`` when set (the usual override), else the
    terminal's width when the output is a terminal, else 100."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return max(MIN_WIDTH, int(columns))
    if is_terminal:
        return max(MIN_WIDTH, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)
    return DEFAULT_WIDTH
