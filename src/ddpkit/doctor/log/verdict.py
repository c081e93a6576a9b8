"""The one engine behind ``ddpkit launch``'s failure summary and ``ddpkit doctor --log RUN_DIR``
(issue 24): a node's run directory read within a bound (:class:`NodeLogs`), and the verdict over
every node's reading (:func:`verdict`).

A node reads its own run directory (:func:`read_node`): every failed rank's end
(:mod:`ddpkit.doctor.log.rank_ends`) and the events of its launcher and rank logs
(:mod:`ddpkit.doctor.log.scan`), a file's first ``HEAD_BYTES`` and last ``TAIL_BYTES`` only, at
most ``FILE_EVENTS`` events a file (the first and last halves) and ``NODE_EVENTS`` a node. That
reading is plain JSON (:meth:`NodeLogs.to_dict`): a launch's node sends it to the master with its
outcome. :func:`verdict` feeds every node's reading to the rule table
(:class:`~ddpkit.doctor.log.rules.table.Diagnosis`) and names the top finding and the root rank.
``doctor --log`` reads the run directories it is given with the same :func:`read_node`, so the two
see the same lines and cannot disagree.
"""

from __future__ import annotations

import io
import os
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ddpkit.doctor.findings import Finding, clip
from ddpkit.doctor.log import run_dir as run_dir_files
from ddpkit.doctor.log.rank_ends import MAX_LOG_BYTES, RankEnd, root_end, run_ends
from ddpkit.doctor.log.rules.table import Diagnosis
from ddpkit.doctor.log.scan import Event, crafted_number, scan
from ddpkit.launch.torchrun.command import RankFailure
from ddpkit.launch.torchrun.tracebacks import PythonException

HEAD_BYTES = 2 << 20  # of each log: where NCCL's and torchrun's setup lines are
TAIL_BYTES = MAX_LOG_BYTES  # of each log: where it failed (as rank_ends reads a rank's end)
FILE_EVENTS = 256  # events kept of one file: its first and last halves
NODE_EVENTS = 512  # events kept of one node: a reading stays well under the job store's 1 MiB
TEXT_LIMIT = 240  # characters of an event's line kept (its evidence)
COUNT_CHUNK = 8 << 20
RANK_FINDINGS = ("rank-failed", "no-failure")  # a summary's own sentence about the rank says these


@dataclass(frozen=True)
class NodeLogs:
    """What one node's run directory says, read within the bounds above."""

    run_dir: str
    ends: tuple[RankEnd, ...]
    first: RankFailure | None  # torchrun's own first observed failure on that node
    events: tuple[Event, ...]
    cut: bool = False  # some events were left out (FILE_EVENTS / NODE_EVENTS)
    node_rank: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"run_dir": self.run_dir, "cut": self.cut, "node_rank": self.node_rank,
                "ends": [_end_dict(e) for e in self.ends],
                "first": _failure_dict(self.first) if self.first is not None else None,
                "events": [[e.kind, e.file, e.line, e.text, e.host, e.node, e.rank,
                            dict(e.data), e.repeat] for e in self.events]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], node_rank: int | None = None) -> NodeLogs:
        """The reading a node sent (ValueError/TypeError/KeyError on a malformed one)."""
        events = []
        for item in list(data.get("events") or [])[:NODE_EVENTS]:
            kind, file, line, text, host, node, rank, values, repeat = item
            if crafted_number(str(v) for v in dict(values).values()):
                continue  # (a node's event with a number no program prints: not read)
            events.append(Event(str(kind), str(file), int(line), clip(str(text), TEXT_LIMIT),
                                _opt_str(host), _opt_str(node), _opt_int(rank),
                                {str(k): str(v) for k, v in dict(values).items()}, int(repeat)))
        first = data.get("first")
        return cls(run_dir=str(data.get("run_dir", "")),
                   ends=tuple(_end_from(e) for e in list(data.get("ends") or [])[:64]),
                   first=_failure_from(first) if isinstance(first, Mapping) else None,
                   events=tuple(events), cut=bool(data.get("cut")),
                   node_rank=node_rank if node_rank is not None else
                   _opt_int(data.get("node_rank")))


@dataclass(frozen=True)
class Verdict:
    """The findings, most likely root cause first, and the failed rank that started it."""

    findings: tuple[Finding, ...]
    root: RankEnd | None
    root_node: int | None = None  # the node rank whose reading holds ``root``, when known

    @property
    def top(self) -> Finding | None:
        return self.findings[0] if self.findings else None

    def to_dict(self) -> dict[str, Any]:
        top, root = self.top, self.root
        return {"finding": top.id if top else None, "severity": top.severity if top else None,
                "title": top.title if top else None, "node_rank": self.root_node,
                "rank": root.rank if root else None,
                "local_rank": root.local_rank if root else None,
                "host": root.host if root else None, "cause": root.is_cause if root else None,
                "how": root.how() if root else None,
                "exception": str(root.raised) if root and root.raised else None}


def read_node(path: str, node_rank: int | None = None) -> NodeLogs:
    """A run directory's failed ranks and the events of its logs (their names as under
    ``path``), within the module's bounds."""
    ends, first = run_ends(path)
    per_file = [_file_events(name) for name in run_dir_files.run_dir_logs(path)]
    shares = fair_shares([len(kept) for kept, _cut in per_file], NODE_EVENTS)
    events: list[Event] = []
    cut = False
    for (kept, file_cut), share in zip(per_file, shares, strict=True):
        cut = cut or file_cut or share < len(kept)
        if share < len(kept):  # its first and last events, as a file's own cap keeps them
            kept = kept[:share // 2] + kept[len(kept) - (share - share // 2):]
        events += kept
    return NodeLogs(path, tuple(ends), first, tuple(events), cut, node_rank)


def fair_shares(counts: Sequence[int], budget: int) -> list[int]:
    """How many of each file's events to keep within ``budget``: a file with few keeps all of
    them, the rest share what is left equally (no file crowds out the others)."""
    shares = [0] * len(counts)
    left, todo = budget, sorted(range(len(counts)), key=lambda i: counts[i])
    while todo:
        even = left // len(todo)
        index = todo.pop(0)
        shares[index] = min(counts[index], even)
        left -= shares[index]
    return shares


def use(diagnosis: Diagnosis, nodes: Sequence[NodeLogs]) -> None:
    """Feed every node's reading to ``diagnosis``: the ranks' ends, then the events."""
    ends = [end for node in nodes for end in node.ends]
    firsts = [node.first for node in nodes if node.first is not None]
    if ends:
        diagnosis.job.use_ends(ends, firsts)
    for node in nodes:
        for event in node.events:
            diagnosis.feed(event)


def verdict(nodes: Sequence[NodeLogs]) -> Verdict:
    """The job's verdict from every node's reading: what ``doctor --log`` on their run
    directories tops, and the rank it names."""
    diagnosis = Diagnosis()
    use(diagnosis, nodes)
    return judged(diagnosis.findings(), nodes)


def judged(findings: Sequence[Finding], nodes: Sequence[NodeLogs]) -> Verdict:
    """``findings`` with the root rank the nodes' ends name (and its node, when known)."""
    ends = [end for node in nodes for end in node.ends]
    root = root_end(ends, [node.first for node in nodes if node.first is not None])
    node_rank = next((node.node_rank for node in nodes if root is not None and
                      any(end is root for end in node.ends)), None)
    return Verdict(tuple(findings), root, node_rank)


# --- bounded reading -----------------------------------------------------------------------------


def _file_events(path: str) -> tuple[list[Event], bool]:
    """The events of one log, its head and tail only; (events, whether some were left out)."""
    try:
        with open(path, "rb") as handle:
            found = list(_bounded_scan(handle, path))
    except OSError:
        return [], False
    found = [replace(e, text=clip(e.text, TEXT_LIMIT)) for e in found]
    if len(found) <= FILE_EVENTS:
        return found, False
    half = FILE_EVENTS // 2
    return found[:half] + found[-half:], True


def _bounded_scan(handle: io.BufferedReader, name: str) -> Iterator[Event]:
    """The events of the file's first HEAD_BYTES and last TAIL_BYTES (whole lines; the tail's
    line numbers counted through the part skipped, without parsing it)."""
    size = handle.seek(0, os.SEEK_END)
    handle.seek(0)
    if size <= HEAD_BYTES + TAIL_BYTES:
        yield from scan(handle, name)
        return
    head = handle.read(HEAD_BYTES)
    head = head[: head.rfind(b"\n") + 1]
    yield from _last_half(scan(io.BytesIO(head), name, quiet=False), FILE_EVENTS)
    lines = head.count(b"\n")
    position, tail_start = len(head), size - TAIL_BYTES
    handle.seek(position)
    while position < tail_start:  # count the newlines skipped, a chunk at a time
        chunk = handle.read(min(COUNT_CHUNK, tail_start - position))
        if not chunk:
            break
        lines += chunk.count(b"\n")
        position += len(chunk)
    tail = handle.read(TAIL_BYTES)
    newline = tail.find(b"\n")
    lines += 1 if newline >= 0 else 0  # the partial line the tail starts in
    for event in scan(io.BytesIO(tail[newline + 1:]), name):
        data = event.data
        if event.kind == "log-read":  # the whole log's counts and line numbers, not the tail's
            data = {**data, "lines": str(int(event.get("lines", "0")) + lines)}
            if "last_line" in data:
                data["last_line"] = str(int(data["last_line"]) + lines)
        yield replace(event, line=event.line + lines, data=data)


def _last_half(events: Iterator[Event], limit: int) -> Iterator[Event]:
    """``events`` as they come, but at most ``limit`` of them from a huge head (first half)
    and its last half kept in a bounded deque."""
    last: deque[Event] = deque(maxlen=limit // 2)
    for count, event in enumerate(events):
        if count < limit // 2:
            yield event
        else:
            last.append(event)
    yield from last


# --- JSON ----------------------------------------------------------------------------------------


def _end_dict(end: RankEnd) -> dict[str, Any]:
    raised = end.raised
    return {"rank": end.rank, "local_rank": end.local_rank, "host": end.host,
            "exitcode": end.exitcode, "signal": end.signal, "last_lines": list(end.last_lines),
            "consequence": end.consequence, "order": end.order, "stderr": end.stderr,
            "exception": None if raised is None else
            [raised.type, raised.message, raised.file, raised.line, raised.function]}


def _end_from(data: Mapping[str, Any]) -> RankEnd:
    raised = data.get("exception")
    exception = None
    if raised is not None:
        kind, message, file, line, function = raised
        exception = PythonException(clip(str(kind), TEXT_LIMIT), clip(str(message), TEXT_LIMIT),
                                    _opt_str(file), _opt_int(line), _opt_str(function))
    return RankEnd(rank=int(data["rank"]), local_rank=int(data["local_rank"]),
                   host=str(data["host"]), exitcode=int(data["exitcode"]),
                   signal=_opt_str(data.get("signal")), raised=exception,
                   last_lines=tuple(clip(str(x), TEXT_LIMIT)
                                    for x in list(data.get("last_lines") or [])[:8]),
                   consequence=str(data.get("consequence") or ""),
                   order=float(data.get("order") or 0.0), stderr=str(data.get("stderr") or ""))


def _failure_dict(failure: RankFailure) -> dict[str, Any]:
    return {"host": failure.host, "rank": failure.rank, "local_rank": failure.local_rank,
            "exitcode": failure.exitcode, "pid": failure.pid, "signal": failure.signal,
            "message": clip(failure.message, TEXT_LIMIT)}


def _failure_from(data: Mapping[str, Any]) -> RankFailure:
    return RankFailure(str(data["host"]), int(data["rank"]), int(data["local_rank"]),
                       int(data["exitcode"]), _opt_int(data.get("pid")),
                       _opt_str(data.get("signal")), str(data.get("message") or ""))


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


def _opt_int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        return int(value)
    except ValueError:
        return None
