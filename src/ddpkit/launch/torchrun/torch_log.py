"""torch's own C++ log lines in what torchrun and its ranks print: recognised, folded, condensed.

torch's C++ code (c10d's store and sockets, ProcessGroupGloo/NCCL) logs through c10's logger to
the process's stderr, one record per message: a prefixed first line (torch 2.x
``[W1204 12:00:00.000000000 socket.cpp:207] msg``, older ``[W socket.cpp:207] msg``, or glog's
``W1204 12:00:00.000000 123 socket.cpp:207] msg``), and, when the message carries a C++
exception, its location and backtrace (``Exception raised from ...``, ``frame #N: ...``,
``<omitting python frames>``, a blank line). torchrun's agent prints such records unprefixed;
a rank's come through torchrun's files as ``[default0]:...``.

:class:`TorchLog` reads the lines one by one (pure: no I/O, no clock) and says what a console
shows for each (:class:`Shown`): the line as it is (the script's own output and every line that is
not torch's C++ log), a condensed line of ddpkit's own for an unknown C++ record (its message
without the prefix and without the backtrace), or nothing: a backtrace, a known-harmless warning
(:data:`HARMLESS`, folded: counted, summarised once), or a store client's connect retry, which
becomes :attr:`TorchLog.connect_problem` for the status line of the wait it belongs to. Every line
stays in the run directory's ``torchrun.log`` as torch printed it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ddpkit.i18n import _, _n
from ddpkit.wording import clauses

RANK_PREFIX = re.compile(r"^(\[[A-Za-z_][\w-]*\d+\]:)")  # torchrun's "[default0]:"
# The month-day and time after a c10/glog line's level letter ("[W1204 09:50:12.118000"). c10's
# own logger (c10/util/Logging.cpp, builds without glog) writes the month-day as an integer,
# (tm_mon + 1) * 100 + tm_mday: "[W506 ..." on 6 May, three digits from January to September.
MONTH_DAY_TIME = r"\d{3,4} \d\d:\d\d:\d\d\.\d+"
_SOURCE_FILE = r"[\w.+-]+\.(?:cpp|cc|h|hpp|cu|py)"


def glog_header(level: str = "[IWEF]", *, source: str = _SOURCE_FILE, line: str = r"\d+",
                timed: bool = False) -> str:
    """glog's record header as a regex, as c10 (c10/util/Logging.cpp, with glog or without) and
    torchelastic's Python loggers print it: the level letter, from torch 2.2 the month-day, time
    and thread id (``timed``: required), then the file, its path and line ("[W socket.cpp:464]",
    "[E1204 09:50:12.1 123 torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1856]"). The one
    grammar of a c10/glog line's header; ``level``, ``source`` and ``line`` may be groups."""
    when = f"{MONTH_DAY_TIME}(?: +\\d+)? +" if timed else f"(?:{MONTH_DAY_TIME})?(?: +\\d+)? +"
    return rf"\[?{level}{when}/?(?:[\w.+-]+/)*{source}:{line}\]"


# a regex may hold GLOG_HEADER once: it names its groups
GLOG_HEADER = glog_header("(?P<level>[IWEF])", source=f"(?P<file>{_SOURCE_FILE})",
                          line=r"(?P<line>\d+)")
CPP_RECORD = re.compile(rf"^(?P<key>{GLOG_HEADER}) ?(?P<message>.*)$")
# ^ torchelastic's own Python loggers (torchrun's agent: ``W1204 10:22:33.984000 21088
#   torch/distributed/run.py:874] ...``) use the same glog shape, one prefix per line of a message
BACKTRACE = re.compile(r"^(?:Exception raised from .* \(most recent call first\):|frame #\d+: |"
                       r"<omitting python frames>$)")

# Known-harmless C++ warnings: (what it means, a pattern of its message).
HARMLESS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # c10d names a peer in its log lines by reverse DNS; an address without a name is harmless
    (_("a peer address without reverse DNS"),
     re.compile(r"The hostname of the client socket cannot be retrieved")),
    # torchrun's agents leave their exit barrier once every node arrived; the master's agent
    # then exits and closes the job's store, sometimes before another agent has read the last
    # arrival: that agent logs the closed connection (C++) and the barrier's error (Python),
    # and exits 0 all the same. A store that closes during a job fails the job, which ddpkit's
    # own summary explains.
    (_("the job's store closed under a waiting client"),
     re.compile(r"recvValue(?:WithTimeout)? failed on SocketImpl")),
    (_("torchrun's exit barrier ended as the master's store closed"),
     re.compile(r"Error waiting on exit barrier")),
    # (once its timeout ran out, the same line means another node never came: TorchLog's
    # barrier_gave_up, not folded)
    # torchrun's own banner with more than one rank per node and no OMP_NUM_THREADS
    (_("torchrun's OMP_NUM_THREADS=1 default for the ranks"),
     re.compile(r"Setting OMP_NUM_THREADS environment variable for each process")),
)


def is_harmless(message: str) -> bool:
    """Whether ``message`` is one of the known-harmless ones (:data:`HARMLESS`)."""
    return any(pattern.search(message) for _meaning, pattern in HARMLESS)


# torchrun's agent (agent/server/api.py, _exit_barrier): "Error waiting on exit barrier. Elapsed:
# %s seconds" both when the master's store closed under it (a fraction of a second: harmless) and
# when its exit_barrier_timeout (300 s) ran out because some node's agent never arrived
BARRIER_ELAPSED = re.compile(r"Error waiting on exit barrier\. Elapsed: (\d+(?:\.\d*)?)")
BARRIER_GAVE_UP_S = 30.0  # an exit barrier that ended after this long ended by its timeout


def barrier_gave_up_warning(seconds: float) -> str:
    """What a node says when torchrun's exit barrier ran out of time."""
    return _("torchrun waited {seconds:.0f} s at its exit barrier and gave up: this node's ranks "
             "finished, but not every node did (another node failed, hung or was stopped; its "
             "own output says why), so the job as a whole did not complete", seconds=seconds)


_DECORATION = re.compile(r"^[\s*=-]*$")  # a message's blank or ***** lines

_TARGET = re.compile(r"(?:to host |network address of \(|while trying to connect to \()"
                     r"(?P<host>[^,\s)]+?)(?:, |:)(?P<port>\d+)")
_ERRNO = re.compile(r"errno: \d+ - (?P<why>[^)]+)\)")
_CONNECT = re.compile(r"client socket has (?:failed to connect|timed out)|TCP client failed to "
                      r"connect/validate")


@dataclass(frozen=True)
class Shown:
    """What a console shows for one line: ``text`` (None: nothing) and whether the line was one of
    torch's C++ log records (shown raw only when asked, ``-v``)."""

    text: str | None
    internal: bool


@dataclass
class TorchLog:
    """Reads torchrun's and the ranks' lines in order (one instance per run of torchrun)."""

    folded: dict[str, int] = field(default_factory=dict)  # HARMLESS meaning -> times seen
    connect_problem: str | None = None  # the last store connect failure, e.g. "refused"
    connect_target: str | None = None  # its "host:port"
    barrier_gave_up: float | None = None  # seconds torchrun's exit barrier waited in vain
    records: int = 0  # log records seen
    _in_record: set[str] = field(default_factory=set)  # rank prefixes inside a C++ backtrace
    _record: dict[str, tuple[str, bool]] = field(default_factory=dict)
    # ^ per rank prefix: the record being read (its prefix) and whether it was decided (shown
    #   condensed, folded or taken as a connect failure): its later lines are hidden

    def feed(self, line: str) -> Shown:
        prefix, text = _split(line)
        record = CPP_RECORD.match(text)
        if record is None:
            if prefix in self._in_record:
                if BACKTRACE.match(text):
                    return Shown(None, True)
                self._in_record.discard(prefix)
                if not text.strip():  # the blank line that ends a backtrace
                    return Shown(None, True)
            return Shown(line, False)
        self._in_record.add(prefix)
        key, message = record.group("key"), record.group("message")
        current = self._record.get(prefix)
        if current is not None and current[0] == key and current[1]:
            return Shown(None, True)  # a later line of a message already decided
        if current is None or current[0] != key:
            self.records += 1
        if _DECORATION.match(message):
            self._record[prefix] = (key, False)
            return Shown(None, True)
        self._record[prefix] = (key, True)
        if (waited := BARRIER_ELAPSED.search(message)) is not None and \
                float(waited.group(1)) >= BARRIER_GAVE_UP_S:
            self.barrier_gave_up = float(waited.group(1))
            return Shown(None, True)  # said once, after the run (barrier_gave_up_warning)
        for meaning, pattern in HARMLESS:
            if pattern.search(message):
                self.folded[meaning] = self.folded.get(meaning, 0) + 1
                return Shown(None, True)
        if _CONNECT.search(message):
            self._connect_failed(message)
            return Shown(None, True)
        level = {"I": "info", "W": "warning", "E": "error", "F": "fatal"}[record.group("level")]
        return Shown(f"{prefix}torch {level} ({record.group('file')}): {_first(message)}", True)

    def folded_summary(self) -> str | None:
        """One line for every known-harmless warning folded so far, or None."""
        if not self.folded:
            return None
        parts = clauses([_("{meaning} ×{count}", meaning=meaning, count=count)
                         for meaning, count in self.folded.items()])
        return _n("folded {count} harmless torch warning into torchrun.log: {parts}",
                  "folded {count} harmless torch warnings into torchrun.log: {parts}",
                  sum(self.folded.values()), parts=parts)

    def _connect_failed(self, message: str) -> None:
        found = _ERRNO.search(message)
        if found is not None:
            why = found.group("why").strip().lower()
            self.connect_problem = _("refused") if "refused" in why else why
        elif "timed out" in message:
            self.connect_problem = _("timed out")
        elif self.connect_problem is None:
            self.connect_problem = _("no connection")
        target = _TARGET.search(message)
        if target is not None:
            self.connect_target = f"{target.group('host')}:{target.group('port')}"


def _split(line: str) -> tuple[str, str]:
    found = RANK_PREFIX.match(line)
    return (found.group(1), line[found.end():]) if found else ("", line)


def _first(message: str, most: int = 300) -> str:
    text = message.strip()
    text = re.sub(r"^\[c10d\] ", "", text)
    return text if len(text) <= most else text[:most - 1] + "…"
