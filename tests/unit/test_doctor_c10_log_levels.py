"""The level of a line c10's own logger printed, in the months January to September.

c10/util/Logging.cpp (torch v2.x, the MessageLogger of builds without glog) prints a line's head
as "[" + severity letter + ``(tm_mon + 1) * 100 + tm_mday`` + " " + HH:MM:SS.nanoseconds + " " +
pid + " " + file:line + "] ": an integer, so "[W506 00:43:56.240378877 ...]" on 6 May and
"[W1204 ...]" on 4 December. A warning-level line is no failure of its own whatever month it is;
an error-level one is. The message is TCPStore.cpp's client warning "recvValue failed on %s: %s"
(torch v2.7) that the client retries after.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

RESET = ("[{level}{month_day} 00:43:56.240378877 TCPStore.cpp:125] [c10d] recvValue failed on "
         "SocketImpl(fd=3, addr=[node-a]:47466, remote=[node-a]:29500): Connection reset by peer")
STACK = ["Exception raised from recvBytes at /pytorch/torch/csrc/distributed/c10d/Utils.hpp:679 "
         "(most recent call first):",
         "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x80 (0x1468a2869c10 in "
         "/pytorch/torch/lib/libc10.so)"]


@pytest.mark.parametrize("month_day", ["506", "1204", "101"])
def test_a_warning_level_reset_is_no_failure_of_its_own(tmp_path: Path, month_day: str) -> None:
    found = top(tmp_path, [RESET.format(level="W", month_day=month_day), *STACK])
    assert found.severity != "error"


@pytest.mark.parametrize("month_day", ["506", "1204"])
def test_an_error_level_reset_is_a_failure(tmp_path: Path, month_day: str) -> None:
    found = top(tmp_path, [RESET.format(level="E", month_day=month_day), *STACK])
    assert (found.id, found.severity) == ("connection-lost", "error")
