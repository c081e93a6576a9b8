"""Terminal I/O as an object, so tests can capture it and nothing else writes to the terminal."""

from __future__ import annotations

import os
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

    def __post_init__(self) -> None:
        if self.color is None:
            isatty = getattr(self.out, "isatty", None)
            self.color = bool(isatty and isatty()) and "NO_COLOR" not in os.environ

    @property
    def is_tty(self) -> bool:
        isatty = getattr(self.err, "isatty", None)
        return bool(isatty and isatty())
