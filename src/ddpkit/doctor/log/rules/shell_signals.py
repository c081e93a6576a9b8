"""The shell's report of a rank's death (issue 24): ``Killed`` (SIGKILL, the kernel's OOM
killer's usual signature) and a crash's fatal signal (``Segmentation fault (core dumped)``,
``Aborted``, ...: bash prints strsignal()'s text for a job a signal ended). The rank died of it;
the lost or closed connections the other ranks report after it are its consequences, so it is
named ahead of them (``KILL_PRIORITY``).
"""

from __future__ import annotations

import re

from ddpkit.doctor.catalogue import entry
from ddpkit.doctor.findings import Evidence, Finding
from ddpkit.doctor.log.end_lines import FATAL_SIGNALS, TERMINATE
from ddpkit.doctor.log.evidence import Bag, merge
from ddpkit.doctor.log.rules.jobs import sigkill_fix
from ddpkit.doctor.log.scan import Event
from ddpkit.doctor.wording import specific_then_general
from ddpkit.i18n import _, _n
from ddpkit.wording import commas

# what :meth:`ShellSignals.feed` reads (a failure line: std::terminate's, before its abort)
SIGNAL_KINDS = frozenset({"killed", "fatal-signal", "failure-line"})
KILL_PRIORITY = 85  # a kill outranks its network consequences (as in rules/jobs.py)
# horovodrun/mpirun's "[1]<stderr>:" prefix: the rank's number.
_RANK_TAG = re.compile(r"^\s*\[(\d+)\]<std(?:out|err)>:")


class ShellSignals:
    """Feed it the events of ``SIGNAL_KINDS``; ask for the finding."""

    def __init__(self) -> None:
        self.killed = Bag()
        self.crashed = Bag()
        self.signal_text = ""  # the first crash's strsignal() text
        self.said = ""  # and as the shell printed it ("... (core dumped)")
        self.terminated = False  # std::terminate's line: an exception nothing caught
        self.ranks: dict[str, set[int]] = {"killed": set(), "fatal-signal": set()}

    def feed(self, event: Event) -> None:
        if event.kind == "failure-line":
            self.terminated = self.terminated or TERMINATE in event.text
            return
        (self.killed if event.kind == "killed" else self.crashed).add(event)
        if event.kind == "fatal-signal":
            said = event.get("detail") or event.get("signal_text") + event.get("core")
            self.said = self.said or said
            # a crash handler's "received signal" names none; its next line does
            self.signal_text = self.signal_text or event.get("signal_text")
        tag = _RANK_TAG.match(event.text)
        rank = event.rank if event.rank is not None else int(tag.group(1)) if tag else None
        ranks = self.ranks[event.kind]
        if rank is not None and len(ranks) < 64:
            ranks.add(rank)

    def finding(self) -> tuple[Finding, int] | None:
        """rank-failed for the ranks the shell reported dead: killed (SIGKILL) first, else
        crashed (the caller leaves a kill to ``out-of-memory`` when the log shows the OOM killer
        or a memory error). Not an abort that follows std::terminate's ``terminate called after
        throwing``: terminate aborts, so the exception it quotes (``what():``) is the cause."""
        if self.killed:
            return self._killed()
        if self.crashed and not (self.terminated and self.signal_text == "Aborted"):
            return self._crashed()
        return None  # an abort after std::terminate: the exception it names is the cause

    def _killed(self) -> tuple[Finding, int]:
        e = entry("rank-failed")
        first = self.killed.items[0]
        ranks = sorted(self.ranks["killed"])
        who = (_n("Rank {ranks} was killed by SIGKILL", "Ranks {ranks} were killed by SIGKILL",
                  len(ranks), ranks=commas([str(r) for r in ranks[:8]]))
               if ranks else _("A process was killed by SIGKILL"))
        text = _("{who}: the shell reported it `Killed` ({file}:{line}). A lost or closed "
                 "connection on the other ranks after it is a consequence. A SIGKILL with no "
                 "error of the process's own is most often the kernel's OOM killer reclaiming "
                 "host memory.", who=who, file=first.file, line=first.line)
        return (Finding(e.id, e.severity, e.title, specific_then_general(text, e.explanation),
                        sigkill_fix(e.fix), merge(self.killed.items)), KILL_PRIORITY)

    def _crashed(self) -> tuple[Finding, int]:
        first = self.crashed.items[0]
        signal = (FATAL_SIGNALS.get(self.signal_text, self.signal_text) if self.signal_text
                  else _("a fatal signal"))
        ranks = sorted(self.ranks["fatal-signal"])
        who = (_n("Rank {ranks} died of {signal}", "Ranks {ranks} died of {signal}", len(ranks),
                  ranks=commas([str(r) for r in ranks[:8]]), signal=signal)
               if ranks else _("A process died of {signal}", signal=signal))
        text = _("{who}: `{said}` ({file}:{line}). A lost or closed connection on the other "
                 "ranks after it is a consequence.", who=who, said=self.said, file=first.file,
                 line=first.line)
        if signal == "SIGBUS":
            return bus_error_finding(text, merge(self.crashed.items))
        e = entry("rank-failed")
        if signal == "SIGABRT":
            why = _("An abort comes from the process itself: a C++ exception nothing caught "
                    "(`terminate called ...` and its `what():` just above it), a failed "
                    "assertion, glibc finding memory corrupted (`double free or corruption`, "
                    "`stack smashing detected`: native code wrote where it must not), or torch "
                    "or Gloo aborting at exit. Read the lines above it in "
                    "that rank's output.\n{fix}", fix=e.fix)
        else:
            why = _("A crash in native code: a bug in a C++/CUDA extension or library, memory "
                    "corrupted earlier, or a build for another CPU or GPU (SIGILL). Rerun with "
                    "PYTHONFAULTHANDLER=1 (python -X faulthandler) to get the Python stack "
                    "where it crashed; for the native stack, run the rank under gdb or read its "
                    "core dump.\n{fix}", fix=e.fix)
        return (Finding(e.id, e.severity, e.title, specific_then_general(text, e.explanation),
                        why, merge(self.crashed.items)), KILL_PRIORITY)


def bus_error_finding(text: str, evidence: tuple[Evidence, ...]) -> tuple[Finding, int]:
    """``shm`` for a rank a SIGBUS ended (``text`` says which and where): in a training process
    a bus error is most often a file mapped from /dev/shm that the filesystem cannot back when it
    is touched (NCCL's shared-memory transport, DataLoader workers); torch's DataLoader says so
    of its workers' bus errors (csrc/DataLoader.cpp: "This might be caused by insufficient
    shared memory (shm)")."""
    e = entry("shm")
    why = _("{text} A bus error in a training process is most often shared memory running out: "
            "a file mapped from /dev/shm that the filesystem cannot back once it is full "
            "(NCCL's shared-memory transport, DataLoader workers); torch's DataLoader says the "
            "same of its workers' bus errors. {general}", text=text, general=e.explanation)
    return Finding(e.id, e.severity, e.title, why, e.fix, evidence), e.priority
