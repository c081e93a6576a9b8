"""Exceptions Python reports and then ignores.

CPython's unraisable hook (Python/errors.c: ``_PyErr_WriteUnraisableDefaultHook`` from 3.8,
``PyErr_WriteUnraisable`` before) prints "Exception ignored in: <object>", the exception's
traceback and its line for an exception it cannot raise: one from a finalizer such as
``__del__``, a weakref callback, or the interpreter's shutdown. The process goes on (or goes on
exiting), so that exception is no failure of the run: a DataLoader iterator's ``__del__`` at
exit, a CUDA stream freed after CUDA unloaded.
"""

from __future__ import annotations

from ddpkit.doctor.log.prefixes import raised
from ddpkit.doctor.log.scan import Event

REACH = 64  # lines from that head to its exception (the traceback's frames between)
Where = tuple[str, str, int | None]  # a process: its file, launcher tag and rank


def reported_ignored(head: int | None, line: int) -> bool:
    """Whether ``line`` falls in the report an ignored exception's head at ``head`` opened."""
    return head is not None and 0 < line - head <= REACH


class IgnoredExceptions:
    """Feed it every event; it says which events come from the line a report of an ignored
    exception ends with (the first exception after the report's head, from the same process:
    the same file, launcher tag and rank). That line may be several events: the exception, and
    what its words say besides (a connection reset, an NCCL error, NCCL's version), whichever
    comes first."""

    def __init__(self) -> None:
        self.heads: dict[Where, int] = {}  # the open reports' head lines
        self.ended: dict[Where, int] = {}  # the line each report ended with, its other events'

    def hides(self, event: Event) -> bool:
        where = (event.file, event.origin, event.rank)
        if event.kind == "benign":  # (no failure: a line read as benign says why it is none)
            if event.get("ignored") and (where in self.heads or len(self.heads) < 256):
                self.heads[where] = event.line
            return False
        if self.ended.get(where) == event.line:
            return True
        if not reported_ignored(self.heads.get(where), event.line) or (
                event.kind != "exception" and not raised(event.text)):
            return False
        del self.heads[where]
        if where in self.ended or len(self.ended) < 256:
            self.ended[where] = event.line
        return True
