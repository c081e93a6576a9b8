"""How each failed rank of a run ended, and which end is the cause: the one reading that both
``ddpkit launch``'s failure summary and ``ddpkit doctor --log RUN_DIR`` give (issue 24).

A rank's end is a *consequence* when it did not fail on its own account: torchrun (or a user)
stopped it with SIGTERM/SIGINT/SIGHUP, its exception reports a peer gone (a connection closed or
reset, a broken pipe, an aborted communicator, a timeout: :data:`PEER_GONE`), or it died of a
signal or exit code with no exception after printing such a line (torch/Gloo 2.13 aborts at
interpreter exit after "Connection closed by peer": SIGABRT). Every other failure is a *cause*: an
exception of its own, or a signal with no peer-gone line before it (a silent SIGKILL or SIGSEGV).
Causes come before consequences, whichever exited first; then the earliest end.

Pure functions over lines and records; :func:`run_ends` is the file edge.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddpkit.doctor.log.run_dir import LAUNCHER_LOG, mtime, newest_start, start_logs
from ddpkit.i18n import _
from ddpkit.launch.outcomes import CONSEQUENCE_PATTERNS, STOP_SIGNALS, describe_exit
from ddpkit.launch.torchrun.command import RankFailure, parse_failures
from ddpkit.launch.torchrun.torch_log import GLOG_HEADER
from ddpkit.launch.torchrun.tracebacks import (
    TRACEBACK_HEAD,
    PythonException,
    last_exception,
    without_warnings,
)
from ddpkit.wording import clauses, sentences

PEER_GONE = CONSEQUENCE_PATTERNS  # one list: launch.outcomes orders nodes by the same words
LAST_LINES = 3
MAX_LOG_BYTES = 4 << 20  # of a rank's stderr read (its end): a rank that printed more is cut
_RANK_PREFIX = re.compile(r"^\[rank(\d+)\]:")  # torch's prefix on a rank's stderr lines
_GLOG_RECORD = re.compile(rf"^(?:\[rank\d+\]:\s?)?{GLOG_HEADER}")  # c10d's "[W1204 ... f.cpp:9]"


def _glog_warning(line: str) -> bool:
    """Whether ``line`` is a c10/glog record at warning level ("[W1204 ... socket.cpp:9]")."""
    record = _GLOG_RECORD.match(line)
    return record is not None and record.group("level") == "W"


@dataclass(frozen=True)
class RankEnd:
    """One failed rank: where, how it exited, what it raised and said last, cause or not."""

    rank: int
    local_rank: int
    host: str
    exitcode: int
    signal: str | None
    raised: PythonException | None
    last_lines: tuple[str, ...]
    consequence: str  # "" for a cause; else why this end follows another's
    order: float = 0.0  # when it ended, as well as known (the rank log's last write)
    stderr: str = ""

    @property
    def is_cause(self) -> bool:
        return not self.consequence

    def how(self) -> str:
        return describe_exit(self.exitcode, self.signal)

    def sentence(self) -> str:
        """'It raised ValueError: x (at train.py:8 in <module>). Its last output: a | b'"""
        raised = _("It raised {exception}", exception=str(self.raised)) if self.raised is not None else ""
        output = (_("Its last output: {lines}", lines=" | ".join(self.last_lines))
                  if self.last_lines else "")
        if raised and output:
            return _("{raised}. {output}", raised=raised, output=output)
        return raised or output

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "local_rank": self.local_rank, "host": self.host,
                "exitcode": self.exitcode, "signal": self.signal, "how": self.how(),
                "exception": self.raised.to_dict() if self.raised is not None else None,
                "last_lines": list(self.last_lines), "cause": self.is_cause,
                "consequence": self.consequence or None, "stderr": self.stderr or None}


def _peer_gone(text: str) -> str | None:
    lowered = text.lower()
    return next((p for p in PEER_GONE if p in lowered), None)


def _strip(lines: Iterable[str]) -> list[str]:
    """Meaningful lines: no blanks, no Python warnings, no c10d/glog warning lines."""
    return [line.strip() for line in without_warnings(lines)
            if line.strip() and not _glog_warning(line.strip())]


def consequence_of(lines: Sequence[str], exitcode: int, signal: str | None,
                   raised: PythonException | None) -> str:
    """Why this end follows another's ("" when it is a cause of its own)."""
    name = signal or (describe_exit(exitcode).removeprefix("killed by ") if exitcode < 0 else "")
    if name in STOP_SIGNALS:
        return _("stopped by {signal} (torchrun stops the surviving ranks with it)", signal=name)
    if raised is not None:
        word = _peer_gone(f"{raised.type}: {raised.message}")
        return _("its exception reports a peer gone ({word})", word=word) if word else ""
    for line in lines:
        word = _peer_gone(line)
        if word:
            return _("it {how} after reporting a peer gone ({word})",
                     how=describe_exit(exitcode, signal), word=word)
    return ""


def last_words(lines: Sequence[str], raised: PythonException | None,
               count: int = LAST_LINES) -> tuple[str, ...]:
    """The last meaningful lines: with an exception, those before its traceback (the traceback is
    quoted as the exception); else the last lines of all."""
    kept = list(lines)
    if raised is not None:
        starts = [i for i, line in enumerate(kept) if line.rstrip().endswith(TRACEBACK_HEAD)]
        if starts:
            kept = kept[: starts[-1]]
    return tuple(_strip(kept)[-count:])


def read_end(failure: RankFailure, lines: Sequence[str], *, order: float = 0.0,
             stderr: str = "") -> RankEnd:
    """Pure: one failed rank's end from torchrun's record of it and its stderr lines."""
    raised = last_exception(lines)
    return RankEnd(rank=failure.rank, local_rank=failure.local_rank, host=failure.host,
                   exitcode=failure.exitcode, signal=failure.signal, raised=raised,
                   last_lines=last_words(lines, raised),
                   consequence=consequence_of(lines, failure.exitcode, failure.signal, raised),
                   order=order, stderr=stderr)


def root_end(ends: Sequence[RankEnd], first: RankFailure | Sequence[RankFailure] | None = None
             ) -> RankEnd | None:
    """The end that started it: a cause before any consequence, then torchrun's own first
    observed failure (``first``: one per node read), then the earliest."""
    if not ends:
        return None
    firsts = {(f.rank, f.host) for f in ([] if first is None else
                                         [first] if isinstance(first, RankFailure) else first)}

    def key(end: RankEnd) -> tuple[bool, bool, float, int]:
        return (not end.is_cause, (end.rank, end.host) not in firsts, end.order, end.rank)

    return min(ends, key=key)


def where(end: RankEnd) -> str:
    return _("Rank {rank} (local rank {local_rank}, on {host})", rank=end.rank,
             local_rank=end.local_rank, host=end.host)


def explain(ends: Sequence[RankEnd], first: RankFailure | Sequence[RankFailure] | None = None
            ) -> str:
    """Which rank's end is the cause and what it said, then how the others followed: the
    sentence both ``doctor --log RUN_DIR`` and ``launch``'s summary rest on."""
    root = root_end(ends, first)
    if root is None:
        return ""
    parts: list[str] = []
    if root.is_cause:
        parts.append(_("{who} failed first, on its own account: {how}.", who=where(root),
                       how=root.how()))
    else:
        parts.append(_("{who} failed ({how}), but {consequence}: it followed another rank's "
                       "failure, which none of these logs shows. Read the other nodes' logs "
                       "(ddpkit doctor --log on each node's run directory).", who=where(root),
                       how=root.how(), consequence=root.consequence))
    words = root.sentence()
    if words:
        parts.append(words if words[-1:] in ".!?" else _("{sentence}.", sentence=words))
    after = [e for e in ends if e is not root]
    if after:  # each built apart: Babel does not extract a _() inside another's arguments
        others = [_("rank {rank} ({host}) {how}, {consequence}", rank=e.rank, host=e.host,
                    how=e.how(), consequence=e.consequence) if e.consequence
                  else _("rank {rank} ({host}) {how}", rank=e.rank, host=e.host, how=e.how())
                  for e in sorted(after, key=lambda e: (e.order, e.rank))[:4]]
        parts.append(_("Then: {others}.", others=clauses(others)))
    return sentences(parts)


# --- the file edge -------------------------------------------------------------------------------


def newest_rank_logs(log_dir: str) -> dict[int, list[str]]:
    """Per local rank: the log files torchrun wrote for it in its last start under ``log_dir``
    (each start, a job-wide restart included, makes its own directory there; run_dir.py)."""
    found: dict[int, list[str]] = {}
    newest = newest_start(log_dir)
    for path in start_logs(newest) if newest is not None else []:
        found.setdefault(int(Path(path).parent.name), []).append(path)
    return found


def stderr_path(logs: Mapping[int, list[str]], local_rank: int) -> str | None:
    return next((p for p in logs.get(local_rank, []) if p.endswith("stderr.log")), None)


def read_lines(path: str | None) -> list[str]:
    """The end of a rank's log as lines ([] when it cannot be read)."""
    if path is None:
        return []
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - MAX_LOG_BYTES))
            return handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []


def ends_of(failures: Sequence[RankFailure], log_dir: str) -> list[RankEnd]:
    """Every failed rank's end, read from its stderr under torchrun's ``log_dir``."""
    logs = newest_rank_logs(log_dir)
    ends = []
    for failure in failures:
        path = stderr_path(logs, failure.local_rank)
        ends.append(read_end(failure, read_lines(path), order=mtime(path) if path else 0.0,
                             stderr=path or ""))
    return ends


def unreported_ends(log_dir: str, host: str) -> list[RankEnd]:
    """Ranks of a node stopped before torchrun reported them (no failure report) whose stderr
    ends in an uncaught exception of their own: Python exits with code 1 on one. A rank whose
    exception reports a peer gone is left out: it is no cause, and a stop explains it."""
    ends = []
    for local_rank in sorted(logs := newest_rank_logs(log_dir)):
        path = stderr_path(logs, local_rank)
        lines = read_lines(path)
        raised = last_exception(lines)
        rank = next((int(m[1]) for line in lines if (m := _RANK_PREFIX.match(line))), None)
        if raised is None or rank is None or _peer_gone(f"{raised.type}: {raised.message}"):
            continue
        failure = RankFailure(host, rank, local_rank, 1, None, None, "")
        ends.append(read_end(failure, lines, order=mtime(path or ""), stderr=path or ""))
    return ends


def run_ends(run_dir: str) -> tuple[list[RankEnd], RankFailure | None]:
    """A ddpkit run directory's failed ranks (torchrun's report in its launcher log), and
    torchrun's own first observed failure; ([], None) when no rank failed."""
    root, failures = parse_failures(read_lines(os.path.join(run_dir, LAUNCHER_LOG)))
    return ends_of(failures, os.path.join(run_dir, "torchrun")), root
