"""A process's Python stack as py-spy prints it (``py-spy dump --pid N``), posted in a log: where
each dumped process's main thread was.

py-spy's text dump (src/dump.rs, write_trace) prints a line per thread, ``Thread 2812 (active):
"MainThread"`` (the native thread id, or the pthread id as ``0x7F81445A8440``; its status "idle",
"active" or "active+gil"), then that thread's frames innermost first, ``    <function>
(<file>:<line>)``, the file as its package-relative short name. A process has one main thread;
each dump of one starts a process of its own.

A main thread inside a torch.distributed call (``launch.hang.stacks.locate``, the reading of
ddpkit's own hang dumps) was waiting for its peers when it was dumped: a dump is what a user
takes of a job that stopped making progress. Where several processes were dumped and one is not
inside a collective while others wait in one, that one holds them up. The dump alone is no
failure: the finding is a warning unless the log shows one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ddpkit.doctor.catalogue import entry
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Cause, Context
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.facts.kinds import Fact
from ddpkit.doctor.log.kinds import EventKind
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _, _n
from ddpkit.launch.hang.stacks import NAME_CHARS, PATH_CHARS, Frame, Place, RankStack, ThreadStack
from ddpkit.launch.hang.stacks import locate as locate_rank
from ddpkit.plain_text import shown
from ddpkit.wording import commas

_DUMPS = 64  # processes' dumps kept (a log of every rank of a large job's dumps)
_FRAMES = 64  # frames kept of a main thread
_REACH = 8  # lines from a thread's header or frame to its next frame (--locals prints some between)


@dataclass
class _Dump:
    """One process's main thread as the log printed it."""

    head: Event
    copies: int = 1  # identical dumps in a row, which the scan folds into one (repeats.py)
    frames: list[Frame] = field(default_factory=list)
    last_line: int = 0
    bag: Bag = field(default_factory=Bag)

    def place(self) -> Place | None:
        thread = ThreadStack(0, "MainThread", None, True, tuple(self.frames))
        return locate_rank(RankStack(local_rank=0, pid=0, threads=(thread,)))


class PySpyDump(Cause):
    kinds = frozenset({EventKind.STACK_THREAD.value, EventKind.STACK_FRAME.value})
    specificity = 10

    def __init__(self) -> None:
        self.dumps: list[_Dump] = []
        self.open: dict[str, _Dump | None] = {}  # per file, the main thread being read

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        if event.kind == EventKind.STACK_THREAD:
            dump = None
            if event.get("name") == "MainThread" and len(self.dumps) < _DUMPS:
                dump = _Dump(event, copies=event.repeat, last_line=event.line)
                dump.bag.add(event)
                self.dumps.append(dump)
            if event.file in self.open or len(self.open) < _DUMPS:
                self.open[event.file] = dump  # (another thread's frames are not the main one's)
            return
        dump = self.open.get(event.file)
        if dump is None or not 0 < event.line - dump.last_line <= _REACH:
            return
        dump.last_line = event.line
        if len(dump.frames) < _FRAMES:
            path = shown(event.get("file"), PATH_CHARS)
            dump.frames.append(Frame(shown(event.get("func"), NAME_CHARS), path, path,
                                     int(event.get("line") or 0)))
            if len(dump.frames) <= 2:
                dump.bag.add(event)

    def finding(self, context: Context) -> Finding | None:
        placed = [(d, d.place()) for d in self.dumps]
        waiting = [(d, p) for d, p in placed if p is not None and p.collective]
        if not waiting:
            return None
        others = [(d, p) for d, p in placed if p is not None and not p.collective]
        calls = commas(sorted({p.call or "?" for _d, p in waiting}))
        count = sum(d.copies for d, _p in waiting)
        if others:
            dump, place = others[0]
            text = _n(
                "py-spy's dumps show {count} process waiting in {calls}, while the process "
                "dumped at line {line} is not inside a collective: it {where}. The waiting one "
                "waits for it: what keeps it there (a loop, I/O, a branch only some ranks take, "
                "an exception it caught) holds the job up.",
                "py-spy's dumps show {count} processes waiting in {calls}, while the process "
                "dumped at line {line} is not inside a collective: it {where}. The waiting ones "
                "wait for it: what keeps it there (a loop, I/O, a branch only some ranks take, "
                "an exception it caught) holds the job up.",
                count, calls=calls, line=dump.head.line, where=place.describe())
            bags = [dump.bag, *(d.bag for d, _p in waiting[:2])]
        else:
            dump, place = waiting[0]
            text = _n(
                "py-spy's dump shows the main thread of the process dumped at line {line} "
                "blocked in torch.distributed: it {where}. A process stays there while a peer "
                "has not reached the same call (the peer failed, exited, or is elsewhere in the "
                "program); the peers' own output or dumps say which.",
                "py-spy's dumps show {count} processes blocked in torch.distributed ({calls}); "
                "the one dumped at line {line} {where}. A process stays there while a peer has "
                "not reached the same call (the peer failed, exited, or is elsewhere in the "
                "program); the peers' own output or dumps say which.",
                count, calls=calls, line=dump.head.line, where=place.describe())
            bags = [d.bag for d, _p in waiting[:3]]
        # (a dump is what a hang makes one take, not a failure: the log's own failure makes it one)
        severity = context.severity
        fix = _("Dump every rank while the job hangs (py-spy dump --pid <pid> for each rank's "
                "process; ddpkit launch dumps them all itself when no rank makes progress) and "
                "find the rank that is not where the others wait: make every rank reach the same "
                "torch.distributed calls in the same order, or fix what stopped that rank.")
        e = entry("job-hung")
        return Finding(e.id, severity, e.title, text, fix, merge(*(b.items for b in bags)))
