"""Where a run's log ends (issue 24): a run that finished, a log that just stops, a rank the shell
saw killed.

- End markers (``run-complete`` events: torchrun's agent reporting its workers SUCCEEDED, ddpkit's
  own summary, NCCL's ``Destroy COMPLETE``, nccl-tests' ``# Avg bus bandwidth``) say the run
  finished: only then, or when the log shows no stage of a run at all, is ``no-failure`` the
  answer.
- A log that shows a stage of the run (NCCL's bootstrap or init lines, nccl-tests' device table)
  and neither a failure nor an end marker answers ``no-result``: it stops partway, as a hang or a
  cut log does; it says where it stops and how to find out which.
- The shell's ``Killed`` (SIGKILL, the kernel's OOM killer's usual signature) is the rank's death,
  named ahead of the lost connections it causes on the other ranks.
"""

from __future__ import annotations

import re

from ddpkit.doctor.catalogue import entry
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.rules.jobs import sigkill_fix
from ddpkit.doctor.log.scan import Event
from ddpkit.doctor.wording import specific_then_general
from ddpkit.i18n import _, _n
from ddpkit.wording import commas

# Lines that show the run under way: NCCL's init sequence and nccl-tests' table of devices.
STAGE_KINDS = frozenset({"nccl-bootstrap", "nccl-socket-ifaces", "nccl-socket-item",
                         "nccl-network", "nccl-trees", "nccl-comm", "nccltests-rank"})
RUN_END_KINDS = STAGE_KINDS | {"run-complete", "killed"}
KILL_PRIORITY = 85  # a kill outranks its network consequences (as in rules/jobs.py)
# horovodrun/mpirun's "[1]<stderr>:" prefix: the rank's number.
_RANK_TAG = re.compile(r"^\s*\[(\d+)\]<std(?:out|err)>:")


class RunEnd:
    """Feed it the events of ``RUN_END_KINDS``; ask whether the run finished, and for the kill."""

    def __init__(self) -> None:
        self.completed = Bag(2)
        self.stages = 0
        self.last_stage: dict[str, Event] = {}  # per file, the last stage line
        self.killed = Bag()
        self.killed_ranks: set[int] = set()

    def feed(self, event: Event) -> None:
        kind = event.kind
        if kind == "run-complete":
            self.completed.add(event)
        elif kind == "killed":
            self.killed.add(event)
            tag = _RANK_TAG.match(event.text)
            rank = event.rank if event.rank is not None else int(tag.group(1)) if tag else None
            if rank is not None and len(self.killed_ranks) < 64:
                self.killed_ranks.add(rank)
        elif kind in STAGE_KINDS:
            self.stages += event.repeat
            if event.file in self.last_stage or len(self.last_stage) < 256:
                self.last_stage[event.file] = event

    def kill_finding(self) -> tuple[Finding, int] | None:
        """rank-failed for the ranks the shell reported ``Killed``, ahead of the connections
        their death closed on the other ranks (the caller leaves this to ``out-of-memory`` when
        the log shows the OOM killer or a memory error)."""
        if not self.killed:
            return None
        e = entry("rank-failed")
        first = self.killed.items[0]
        ranks = sorted(self.killed_ranks)
        who = (_n("Rank {ranks} was killed by SIGKILL", "Ranks {ranks} were killed by SIGKILL",
                  len(ranks), ranks=commas([str(r) for r in ranks[:8]]))
               if ranks else _("A process was killed by SIGKILL"))
        text = _("{who}: the shell reported it `Killed` ({file}:{line}). A lost or closed "
                 "connection on the other ranks after it is a consequence. A SIGKILL with no "
                 "error of the process's own is most often the kernel's OOM killer reclaiming "
                 "host memory.", who=who, file=first.file, line=first.line)
        return (Finding(e.id, e.severity, e.title, specific_then_general(text, e.explanation),
                        sigkill_fix(e.fix), merge(self.killed.items)), KILL_PRIORITY)

    def no_result(self, waited_on: str) -> Finding | None:
        """``no-result`` when the log shows a stage of a run and no end marker; None otherwise.
        ``waited_on`` says where the run was when the log stops (rules/table.py's stage words)."""
        if self.completed or not self.stages:
            return None
        e = entry("no-result")
        text = _("The log shows no error and no sign that the run finished: it stops in "
                 "{waited_on}.", waited_on=waited_on)
        last = sorted(self.last_stage.values(), key=lambda ev: (ev.file, ev.line))
        bag = Bag()
        for event in last:
            bag.add(event)
        return Finding(e.id, e.severity, e.title, specific_then_general(text, e.explanation),
                       e.fix, merge(bag.items))

    def completion_text(self) -> str:
        """A sentence for no-failure: the line that shows the run finished (empty if none)."""
        first = self.completed.items[0] if self.completed else None
        if first is None:
            return ""
        return _("The run finished: `{text}` ({file}:{line}).", text=first.text[:160],
                 file=first.file, line=first.line)
