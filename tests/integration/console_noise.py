"""Asserting that a successful run's console shows nothing of torch's internals.

A line fails when it holds a C++ backtrace frame (``frame #3: ...``) or starts a record of torch's
C++ logger (``[W1204 12:00:00.000000000 socket.cpp:207] ...``, an older torch's
``[W socket.cpp:207]`` or glog's ``W1204 12:00:00.000000 123 file.cpp:12] ...``, which torchrun's
agent also uses for its Python loggers: ``E1204 ... torch/.../api.py:1008] ...``), after any
prefix that torchrun (``[default0]:``) or a job driver (``[10.0.0.3:1] ``) puts before a line.
The patterns are written here, independently of ddpkit's own reader
(launch/torchrun/torch_log.py), so a bug there cannot hide a line from this check.
"""

from __future__ import annotations

import re

_PREFIXES = r"^(?:\[[^\]\s]*\]:? ?)*"
_CPP = re.compile(_PREFIXES + r"\[?[IWEF](?:\d{4} \d\d:\d\d:\d\d\.\d+)?(?: +\d+)? +"
                  r"(?:[\w.+-]+/)*[\w.+-]+\.(?:cpp|cc|cu|h|hpp|py):\d+\]")
_FRAME = re.compile(r"frame #\d+: ")


def torch_internals(text: str) -> list[str]:
    """The lines of ``text`` that are torch's C++ log records or backtrace frames."""
    return [line for line in text.splitlines() if _CPP.match(line) or _FRAME.search(line)]


def assert_quiet_console(*texts: str) -> None:
    """No line of torch's C++ log or backtraces in any of ``texts`` (a run's stdout and stderr,
    without -v)."""
    found = [line for text in texts for line in torch_internals(text)]
    assert not found, f"torch's internals reached the console ({len(found)} lines):\n" + \
        "\n".join(found[:12])
