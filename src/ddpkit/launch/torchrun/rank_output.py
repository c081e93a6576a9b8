"""The ranks' output, followed by ddpkit from the files torchrun writes (``--redirects 3``).

torchrun's ``--tee 3`` would copy every rank's ``stdout.log``/``stderr.log`` to its own output, but
its tailer sleeps 0.1 s between reads and, at the end, stops its stdout and its stderr tailer one
after the other, each waiting out its sleep: measured here, torchrun with ``--tee`` ended 0.1 to
0.2 s after its workers later than without. ddpkit reads the same files itself instead, more
often, and drains them at once when torchrun has ended; each line gets the prefix torchrun's tee
gives it (``[default0]:``, the role and the local rank), so what the console, ``torchrun.log`` and
the failure parser see is unchanged. Used only when the user gave none of torchrun's
``--tee``/``--redirects``/``--local-ranks-filter`` (then torchrun shows the output as told).
"""

from __future__ import annotations

import glob
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

FOLLOW_INTERVAL_S = 0.05
# Once files are followed, the directory tree is looked at again only every this many polls (0.5
# s): a glob of the three-level layout was most of a poll's cost, and torchrun makes every rank's
# files at once when it starts them (a restart's new files still show within half a second, and
# none of their lines is lost). Before any file is found, every poll looks.
DISCOVER_EVERY = 10
STREAMS = ("stdout.log", "stderr.log")
MAX_FILES = 4096  # a run has two files per local rank and start; beyond this something else is there
_READ_CHUNK = 1 << 16
MAX_LINE = 1 << 20  # a rank that prints this much without a line end has it shown as one line
# Line ends as torchrun's tee reads them (text mode, universal newlines): \n, \r\n and a lone \r
# (a progress bar redrawing itself), so each redraw is a line, as with torchrun.
_LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclass
class _Followed:
    path: str
    prefix: str
    offset: int = 0
    partial: bytes = b""


class RankOutputTail:
    """Follows the rank log files that appear under torchrun's ``--log-dir`` after ``start``.

    ``<log dir>/<run id>/attempt_<n>/<local rank>/{stdout,stderr}.log`` is torchrun's layout; files
    already there when this tail is made (an earlier start's) are not shown again.
    """

    def __init__(self, log_dir: str, role: str = "default",
                 interval: float = FOLLOW_INTERVAL_S) -> None:
        self.log_dir = log_dir
        self.role = role
        self.interval = interval
        self._pattern = os.path.join(glob.escape(log_dir), "*", "attempt_*", "*", "std*.log")
        self._known = set(self._paths())
        self._followed: dict[str, _Followed] = {}
        self._polls = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._emit: Callable[[str], None] = lambda _line: None

    @property
    def found_any(self) -> bool:
        """A rank's log file of this start has appeared: its ranks have started (one that lived
        between two scans of the process tree leaves at least this)."""
        return bool(self._followed)

    def start(self, emit: Callable[[str], None]) -> None:
        """Hand every new complete line to ``emit`` from a thread of its own until :meth:`stop`."""
        self._emit = emit
        self._thread = threading.Thread(target=self._run, name="ddpkit-rank-output", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop following, then show whatever the files still hold (a last line without its
        newline included): torchrun has ended, so its ranks have too."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.poll(final=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()

    def _paths(self) -> list[str]:
        return sorted(glob.glob(self._pattern))[:MAX_FILES]

    def poll(self, *, final: bool = False) -> None:
        """Read what was added to every followed file since the last poll (new files are looked
        for on every poll until one is found, then every ``DISCOVER_EVERY`` polls, and always on
        the final one)."""
        if final or not self._followed or self._polls % DISCOVER_EVERY == 0:
            self._discover()
        self._polls += 1
        for followed in self._followed.values():
            self._read(followed, final)

    def _discover(self) -> None:
        for path in self._paths():
            if path not in self._known and path not in self._followed \
                    and os.path.basename(path) in STREAMS:
                local_rank = os.path.basename(os.path.dirname(path))
                self._followed[path] = _Followed(path, f"[{self.role}{local_rank}]:")

    def _read(self, followed: _Followed, final: bool) -> None:
        try:
            if os.stat(followed.path).st_size <= followed.offset and not final:
                return  # nothing new: no open, seek and read
            with open(followed.path, "rb") as handle:
                handle.seek(followed.offset)
                while chunk := handle.read(_READ_CHUNK):
                    followed.offset += len(chunk)
                    data = followed.partial + chunk
                    keep_cr = data.endswith(b"\r")  # its \n may be in the next chunk
                    *complete, rest = _LINE_END.split(data[:-1] if keep_cr else data)
                    followed.partial = rest + (b"\r" if keep_cr else b"")
                    if len(followed.partial) > MAX_LINE:
                        complete.append(followed.partial)
                        followed.partial = b""
                    for raw in complete:
                        self._emit(followed.prefix + _text(raw))
        except OSError:
            return  # removed or unreadable: nothing more to show from it
        if final and followed.partial.rstrip(b"\r"):
            self._emit(followed.prefix + _text(followed.partial))
            followed.partial = b""


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").rstrip("\r")
