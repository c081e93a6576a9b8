"""``doctor --log`` on torch's flight-recorder dumps: which rank stopped at which collective.

The workers of a ``ddpkit launch`` with a hang timeout record their last collectives (``TORCH_FR_*``,
:func:`ddpkit.launch.node.plan.flight_recorder_env`); NCCL's watchdog writes one dump per rank,
``<run dir>/flight-recorder/rank_<R>``, when a collective times out. A dump is a pickled document
of plain values (dicts, lists, strings, numbers, tuples). It is read here with an unpickler that
refuses every global, so no code in a dump can run, and it is capped in size: a file that needs a
class, or is not a dump at all, is refused as unreadable. torch's own analyser
(``python -m torch.distributed.flight_recorder.fr_trace``) reads the same files with plain
``pickle.load`` and goes deeper; this reader answers the first question only, without torch.

Per process group, the ranks' recorded collectives are compared by sequence number: the first
number at which ranks called different collectives (another operation, or other sizes), else the
ranks whose last collective is behind the others' (they never entered the one the others wait in),
else every rank inside the same unfinished collective. That becomes a ``job-hung`` finding with the
odd ranks named; dumps that show every collective finished give no finding.

Nothing from a dump is trusted: every field is read through :mod:`ddpkit.doctor.log.bounded`
(shared references, nesting, long strings and huge integers cost no more than what is shown,
control characters are removed), only the last ``MAX_ENTRIES`` entries of a dump and the first
``MAX_FRAMES`` frames of an entry are looked at, and a dump that cannot be read is one
``dump-unreadable`` finding next to what the other dumps and logs show, never the end of the
diagnosis.
"""

from __future__ import annotations

import io
import os
import pickle
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ddpkit.doctor.catalogue import entry
from ddpkit.doctor.findings import Evidence, Finding
from ddpkit.doctor.log.bounded import small_int, text
from ddpkit.doctor.log.refusal import unreadable
from ddpkit.errors import ConfigError
from ddpkit.i18n import _, _n
from ddpkit.launch.config import FLIGHT_RECORDER_DIR
from ddpkit.plain_text import shown
from ddpkit.wording import clauses

MAX_DUMP_BYTES = 256 * 1024 * 1024  # 2000 entries with their frames are a few MB
MAX_DUMPS = 4096
MAX_ENTRIES = 100_000  # the newest of a dump's entries looked at (torch keeps 2000 by default)
MAX_FRAMES = 256  # of one entry, innermost first
MAX_GROUPS_SHOWN = 16  # process groups described in one finding
_OP_CHARS, _SIZES_CHARS, _PATH_CHARS, _NAME_CHARS, _GROUP_CHARS = 80, 160, 300, 80, 64
_DUMP_NAME = re.compile(r"(\d+)$")  # TORCH_FR_DUMP_TEMP_FILE + the rank
_PICKLE_PROTOCOL_2_PLUS = b"\x80"
_TORCH_FRAME = re.compile(r"[/\\]torch[/\\]")


class _PlainValues(pickle.Unpickler):
    """Unpickles plain values only: any global (a class, a function) is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"it asks for {module}.{name}; a dump holds plain values only")


@dataclass(frozen=True)
class Call:
    """One recorded collective of one rank."""

    group: str  # the process group's id as the recorder names it ("0" is the default group)
    seq: int  # collective_seq_id: the n-th collective of that group on this rank
    op: str  # e.g. "nccl:all_reduce", "gloo:broadcast"
    sizes: str  # the input sizes, e.g. "[[1000]]"
    done: bool
    where: str  # the innermost frame outside torch: "train.py:41 (step)"
    entry: int  # 1-based position in the dump's entries

    def describe(self) -> str:
        if self.where:
            return _("{op} {sizes} at {where}", op=self.op, sizes=self.sizes, where=self.where)
        return f"{self.op} {self.sizes}"

    def same_call(self, other: Call) -> bool:
        return (self.op, self.sizes) == (other.op, other.sizes)


@dataclass(frozen=True)
class RankTrace:
    rank: int
    path: str
    calls: tuple[Call, ...]  # collectives only (not point-to-point), by group and sequence number


def _unreadable(path: str, reason: str) -> ConfigError:
    return unreadable(path, reason, what=_("flight-recorder dump"),
                      fix=_("pass the dumps torch wrote (TORCH_FR_DUMP_TEMP_FILE<rank>, e.g. "
                            "<run dir>/flight-recorder/rank_0), or a log file"))


def _looks_like_dump(path: str) -> bool:
    if not (_DUMP_NAME.search(os.path.basename(path)) and os.path.isfile(path)):
        return False
    try:
        with open(path, "rb") as handle:
            return handle.read(1) == _PICKLE_PROTOCOL_2_PLUS
    except OSError:
        return False


def dump_files(path: str) -> list[str]:
    """The dumps a path holds: itself, the dumps in it, or those in its flight-recorder/."""
    if path == "-" or not os.path.exists(path):
        return []
    if not os.path.isdir(path):
        return [path] if _looks_like_dump(path) else []
    for folder in (os.path.join(path, FLIGHT_RECORDER_DIR), path):
        if os.path.isdir(folder):
            names = sorted(os.listdir(folder))[:MAX_DUMPS]
            found = [p for p in (os.path.join(folder, n) for n in names) if _looks_like_dump(p)]
            if found:
                return found
    return []


def split(paths: Sequence[str]) -> tuple[list[str], list[str]]:
    """(dump files, paths still to read as logs). A run directory is both; a dump or a folder of
    dumps is only the first."""
    dumps: list[str] = []
    rest: list[str] = []
    for path in paths:
        found = dump_files(path)
        dumps += found
        only_dumps = found and (found == [path] or os.path.dirname(found[0]) == path.rstrip("/"))
        if not only_dumps:
            rest.append(path)
    return dumps, rest


def read_dump(path: str) -> RankTrace:
    """One rank's dump, read without running anything in it (``log-unreadable`` when it is not a
    flight-recorder dump)."""
    try:
        size = os.path.getsize(path)
        if size > MAX_DUMP_BYTES:
            raise _unreadable(path, _("it is {size} bytes, more than the {limit} a dump of the "
                                      "last collectives can be", size=size, limit=MAX_DUMP_BYTES))
        with open(path, "rb") as handle:  # read(n) allocates n bytes first: the size, not the cap
            data = handle.read(size + 1)
    except OSError as exc:
        raise _unreadable(path, exc.strerror or str(exc)) from exc
    if len(data) > MAX_DUMP_BYTES:  # it grew since
        raise _unreadable(path, _("it is more than the {limit} bytes a dump of the last "
                                  "collectives can be", limit=MAX_DUMP_BYTES))
    try:
        doc = _PlainValues(io.BytesIO(data)).load()
    except Exception as exc:  # corrupt bytes can fail in any of the unpickler's opcodes
        raise _unreadable(path, _("not a readable flight-recorder dump ({why})",
                                  why=str(exc))) from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
        raise _unreadable(path, _("not a flight-recorder dump (no list of entries)"))
    match = _DUMP_NAME.search(os.path.basename(path))
    rank = int(match.group(1)) if match else -1
    return RankTrace(rank, path, tuple(_calls(doc)))


def _calls(doc: Mapping[str, Any]) -> Iterable[Call]:
    found = doc.get("pg_status")
    status: Mapping[Any, Any] = found if isinstance(found, dict) else {}
    entries = doc["entries"]
    first = max(0, len(entries) - MAX_ENTRIES)
    calls = []
    for number, item in enumerate(entries[first:], start=first + 1):
        if not isinstance(item, dict) or item.get("is_p2p") is True:
            continue
        seq = small_int(item.get("collective_seq_id"))
        group = _group_id(item)
        if seq is None or group is None:
            continue
        group_status = status.get(group)
        done_upto = (small_int(group_status.get("last_completed_collective"))
                     if isinstance(group_status, dict) else None)
        done = item.get("state") == "completed" or (done_upto is not None and seq <= done_upto)
        calls.append(Call(group, seq, text(item.get("profiling_name") or "?", _OP_CHARS),
                          _sizes(item.get("input_sizes")), done, _where(item.get("frames")), number))
    return sorted(calls, key=lambda c: (c.group, c.seq))


def _group_id(item: Mapping[str, Any]) -> str | None:
    group = item.get("process_group")
    if isinstance(group, (tuple, list)) and group:
        return text(group[0], _GROUP_CHARS)
    pg_id = small_int(item.get("pg_id"))
    return str(pg_id) if pg_id is not None else None


def _sizes(sizes: object) -> str:
    return text(sizes, _SIZES_CHARS) if isinstance(sizes, list) else "[]"


def _where(frames: object) -> str:
    for frame in frames[:MAX_FRAMES] if isinstance(frames, list) else ():
        if not isinstance(frame, dict):
            continue
        filename = text(frame.get("filename", "?"), _PATH_CHARS)
        if not _TORCH_FRAME.search(filename):
            line, name = text(frame.get("line", "?"), 12), text(frame.get("name", "?"), _NAME_CHARS)
            return f"{os.path.basename(filename)}:{line} ({name})"
    return ""


@dataclass(frozen=True)
class Verdict:
    """What the dumps show for one process group."""

    group: str
    lines: tuple[str, ...]  # the summary, the cause last
    evidence: tuple[Evidence, ...]
    odd_one_out: bool  # some ranks differ from the others (not: all inside one collective)


def analyse(traces: Sequence[RankTrace]) -> list[Verdict]:
    """Per process group where the ranks differ or are stuck, what the dumps show."""
    groups = sorted({c.group for t in traces for c in t.calls}, key=lambda g: (len(g), g))
    verdicts = []
    for group in groups:
        per_rank = {t.rank: [c for c in t.calls if c.group == group] for t in traces}
        per_rank = {rank: calls for rank, calls in sorted(per_rank.items()) if calls}
        verdict = _mismatch(group, per_rank, traces) or _behind(group, per_rank, traces)
        if verdict is not None:
            verdicts.append(verdict)
    return verdicts


def _ranks(ranks: Iterable[int]) -> str:
    items = sorted(ranks)
    return _n("rank {ranks}", "ranks {ranks}", len(items), ranks=", ".join(str(r) for r in items))


def _evidence(traces: Sequence[RankTrace], calls: Mapping[int, Call]) -> tuple[Evidence, ...]:
    paths = {t.rank: t.path for t in traces}
    return tuple(Evidence(paths[rank], call.entry, f"#{call.seq} {call.describe()}"
                          + ("" if call.done else " (not finished)"))
                 for rank, call in sorted(calls.items()))


def _mismatch(group: str, per_rank: Mapping[int, list[Call]],
              traces: Sequence[RankTrace]) -> Verdict | None:
    """The first sequence number every rank recorded at which they called different collectives."""
    by_seq = [{c.seq: c for c in calls} for calls in per_rank.values()]
    common = set.intersection(*(set(s) for s in by_seq)) if by_seq else set()
    for seq in sorted(common):
        calls = {rank: seqs[seq] for rank, seqs in zip(per_rank, by_seq)}
        kinds: dict[tuple[str, str], list[int]] = {}
        for rank, call in calls.items():
            kinds.setdefault((call.op, call.sizes), []).append(rank)
        if len(kinds) < 2:
            continue
        ordered = sorted(kinds.values(), key=lambda ranks: (-len(ranks), ranks))
        lines: list[str] = [_("{ranks} called {call}", ranks=_ranks(ranks),
                              call=calls[ranks[0]].describe()) for ranks in ordered]
        rule = _("collectives must be called in the same order, with the same sizes, on every "
                 "rank")
        if len(ordered[-1]) < len(ordered[-2]):
            lines.append(_("likely cause: {ranks} called a different collective at #{seq} of "
                           "process group {group} than the others ({rule})",
                           ranks=_ranks(ordered[-1]), seq=seq, group=group, rule=rule))
        else:  # as many on each side: no one group is the odd one
            lines.append(_("likely cause: the ranks called different collectives at #{seq} of "
                           "process group {group} ({rule})", seq=seq, group=group, rule=rule))
        return Verdict(group, tuple(lines), _evidence(traces, calls), True)
    return None


def _behind(group: str, per_rank: Mapping[int, list[Call]],
            traces: Sequence[RankTrace]) -> Verdict | None:
    last = {rank: calls[-1] for rank, calls in per_rank.items()}
    newest = max(call.seq for call in last.values())
    behind = sorted(rank for rank, call in last.items() if call.seq < newest)
    waiting = {rank: call for rank, call in last.items() if call.seq == newest}
    pending = next(iter(waiting.values()))
    if not behind:
        if all(call.done for call in last.values()):
            return None
        return Verdict(group, (
            _("{ranks} are all inside collective #{seq} of process group {group}, {call}, and "
              "it has not finished", ranks=_ranks(last), seq=newest, group=group,
              call=pending.describe()),
            _("likely cause: not one rank's code (every rank called it); the transport between "
              "the ranks: a peer that died, a network or GPU fault (see the ranks' logs)")),
            _evidence(traces, last), False)
    entered = dict(ranks=_ranks(waiting), seq=newest, group=group, call=pending.describe())
    lines = [_("{ranks} entered collective #{seq} of process group {group}, {call}", **entered)
             if pending.done else
             _("{ranks} entered collective #{seq} of process group {group}, {call}, and wait in "
               "it", **entered) if len(waiting) > 1 else
             _("{ranks} entered collective #{seq} of process group {group}, {call}, and waits "
               "in it", **entered)]
    for rank in behind:
        lines.append(_("rank {rank} stopped after #{seq}, {call}", rank=rank,
                       seq=last[rank].seq, call=last[rank].describe()))
    lines.append(_("likely cause: {ranks} never called collective #{seq} ({op}) that the others "
                   "wait in", ranks=_ranks(behind), seq=newest, op=pending.op))
    return Verdict(group, tuple(lines), _evidence(traces, last), True)


def findings(files: Sequence[str]) -> list[Finding]:
    """What the dumps in ``files`` show together (several nodes' dumps): a ``job-hung`` finding
    when a rank is held up, then one ``dump-unreadable`` finding per dump that cannot be read."""
    traces, bad = _read_all(files)
    hung = finding_of(traces)
    return [*([hung] if hung is not None else []), *bad]


def _read_all(files: Sequence[str]) -> tuple[list[RankTrace], list[Finding]]:
    """(the dumps that can be read, a ``dump-unreadable`` finding for each of the others)."""
    traces: list[RankTrace] = []
    bad: list[Finding] = []
    for path in files:
        try:
            traces.append(read_dump(path))
        except ConfigError as exc:
            bad.append(_unreadable_finding(path, exc.message))
        except Exception as exc:  # noqa: BLE001 - a crafted dump must not end the diagnosis
            bad.append(_unreadable_finding(path, _("cannot read flight-recorder dump {path}: "
                                                   "{why}", path=path,
                                                   why=type(exc).__name__)))
    return traces, bad


def _unreadable_finding(path: str, why: str) -> Finding:
    e = entry("dump-unreadable")
    reason = shown(why, 300)
    return Finding(e.id, e.severity, e.title,
                   _("{specific}. {general}", specific=reason, general=e.explanation), e.fix,
                   (Evidence(path, 0, reason),))


def finding(files: Sequence[str]) -> Finding | None:
    """The ``job-hung`` finding over the dumps in ``files`` that can be read, or None."""
    return finding_of(_read_all(files)[0])


def finding_of(traces: Sequence[RankTrace]) -> Finding | None:
    """One ``job-hung`` finding over these ranks' dumps, or None when they show no rank held
    up."""
    if not traces:
        return None
    files = [t.path for t in traces]
    verdicts = analyse(traces)
    if not verdicts:
        return None
    e = entry("job-hung")
    lines = [line for v in verdicts[:MAX_GROUPS_SHOWN] for line in v.lines]
    if len(verdicts) > MAX_GROUPS_SHOWN:
        lines.append(_n("{count} more process group differs (not shown)",
                        "{count} more process groups differ (not shown)",
                        len(verdicts) - MAX_GROUPS_SHOWN))
    recorded = {t.rank for t in traces}
    evidence = tuple(item for v in verdicts[:MAX_GROUPS_SHOWN] for item in v.evidence)
    title = (e.title if any(v.odd_one_out for v in verdicts)
             else _("The job hung: every rank waits in the same collective"))
    where = os.path.dirname(files[0]) or "."
    fix = _("Make every rank call the same collectives in the same order, with the same sizes: "
            "look at the named rank's line above. torch's analyser reads the same dumps in full "
            "(NCCL dumps): python -m torch.distributed.flight_recorder.fr_trace {where}",
            where=where)
    return Finding("job-hung", e.severity, title,
                   _("{lines}. (torch's flight-recorder dumps of {ranks}.)",
                     lines=clauses(lines), ranks=_ranks(recorded)),
                   fix, evidence)
