"""Findings about the job's ranks: rank-failed, collective-timeout, connection-lost.

torchrun's error summary is read as a small state machine per file: ``Failures:`` and
``Root Cause (first observed failure):`` open sections; ``host``, ``rank``, ``exitcode`` and
``Signal N (SIGX)`` lines fill one record each.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field

from ddpkit.doctor.catalogue import entry
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.evidence import Bag, Capped, merge
from ddpkit.doctor.log.facts.printed import EXIT_BARRIER_KEY
from ddpkit.doctor.log.prefixes import raised
from ddpkit.doctor.log.rank_ends import RankEnd, explain, root_end
from ddpkit.doctor.log.scan import Event
from ddpkit.doctor.wording import specific_then_general
from ddpkit.i18n import _, _n
from ddpkit.launch.torchrun.command import RankFailure
from ddpkit.launch.torchrun.tracebacks import LAUNCHER_REPORTS
from ddpkit.wording import commas

MAX_RECORDS = 32
_REMOTE_ERROR = "remote process exited or there was a network error"


def sigkill_fix(fix: str) -> str:
    """``fix`` after where a SIGKILL comes from and how to confirm the OOM killer."""
    return _("A SIGKILL comes from outside the program: most often the kernel's OOM killer "
             "(dmesg -T | grep -i -E 'killed process|oom'), or a scheduler/user kill.\n{fix}",
             fix=fix)


@dataclass
class FailureRecord:
    """One failed rank as torchrun reported it."""

    root: bool
    host: str = ""
    rank: int | None = None
    local_rank: int | None = None
    code: int | None = None
    pid: str = ""
    signal: str = ""
    bag: Bag = field(default_factory=Bag)

    @property
    def killed(self) -> bool:
        """Killed by a signal other than the SIGTERM torchrun sends to the survivors."""
        return self.signal_name not in ("", "SIGTERM")

    @property
    def signal_name(self) -> str:
        if self.signal:
            return self.signal
        if self.code is not None and self.code < 0:
            try:
                return signal.Signals(-self.code).name
            except ValueError:
                return f"signal {-self.code}"
        return ""

    def describe(self) -> str:
        who = _("Rank {rank}", rank=self.rank) if self.rank is not None else _("A rank")
        where: list[str] = []
        if self.local_rank is not None:
            where.append(_("local rank {rank}", rank=self.local_rank))
        if self.host:
            where.append(_("on {hosts}", hosts=self.host))
        if self.pid:
            where.append(_("pid {pid}", pid=self.pid))
        place = _(" ({where})", where=commas(where)) if where else ""
        if self.signal_name:
            how = _("was killed by {signal}", signal=self.signal_name)
        else:
            how = (_("exited with code {code}", code=self.code) if self.code is not None
                   else _("failed"))
        return _("{who}{place} {how}", who=who, place=place, how=how)


@dataclass
class _Timeout:
    rank: int | None
    op: str
    seq: str
    ms: str


class JobRules:
    def __init__(self) -> None:
        self.section: dict[str, str] = {}
        self.current: dict[str, FailureRecord] = {}
        self.records: list[FailureRecord] = []
        self.exceptions: Capped[int, tuple[str, Bag]] = Capped()
        self.anonymous_exception: tuple[str, Bag] | None = None
        # the uncaught exceptions' texts (a few): one alone is every failing process's error
        self.uncaught_texts: dict[str, None] = {}
        self.uncaught_seen = False  # an exception line that starts a line: a traceback's end
        self.child_failed = Bag()
        self.ranks_seen: set[int] = set()
        self.timeouts: list[_Timeout] = []
        self.timeout_bag = Bag()
        self.progress: Capped[int, tuple[int, int]] = Capped()  # rank -> (enqueued, completed)
        self.barrier_ranks: set[int] = set()
        self.barrier_ms = ""  # how long a monitored barrier waited for them
        self.lost = Bag()
        self.lost_peers: set[str] = set()
        self.lost_details: set[str] = set()
        self.nccl_errors: set[str] = set()
        self.nccl_error_bag = Bag()
        self.nccl_warn = Bag(3)
        self.ends: list[RankEnd] = []  # each failed rank's end, read from run directories
        self.end_firsts: list[RankFailure] = []  # torchrun's first observed failure per node

    def use_ends(self, ends: list[RankEnd], firsts: list[RankFailure]) -> None:
        """Run directories were read: name the cause from the ranks' own ends (rank_ends)."""
        self.ends, self.end_firsts = ends, firsts

    def root_end(self) -> RankEnd | None:
        """The rank end that started the failure, when run directories were read."""
        return root_end(self.ends, self.end_firsts)

    def note_rank(self, rank: int | None) -> None:
        if rank is not None and len(self.ranks_seen) < 4096:
            self.ranks_seen.add(rank)

    def feed(self, event: Event) -> None:
        kind = event.kind
        self.note_rank(event.rank)
        if kind.startswith("summary-") or kind in ("agent-failed", "mpi-rank-signaled"):
            self._summary(event)
        elif kind == "exception":
            if EXIT_BARRIER_KEY in event.text:
                return  # (the agent's wait at its exit barrier: its workers had succeeded)
            text = event.exception_text()
            if raised(event.text, results=True):
                self.uncaught_seen = True
                if (len(self.uncaught_texts) < 4
                        and event.get("type").rsplit(".", 1)[-1] not in LAUNCHER_REPORTS):
                    self.uncaught_texts.setdefault(text)
            if event.rank is not None:
                slot = self.exceptions.slot(event.rank, lambda: (text, Bag(2)))
                if slot is not None:
                    self.exceptions.data[event.rank] = (text, slot[1])
                    slot[1].add(event)
            elif self.anonymous_exception is None:
                bag = Bag(2)
                bag.add(event)
                self.anonymous_exception = (text, bag)
        elif kind == "child-failed":
            self.child_failed.add(event)
        elif kind == "watchdog":
            rank = int(event.get("rank"))
            self.note_rank(rank)
            if len(self.timeouts) < 256:
                self.timeouts.append(_Timeout(rank, event.get("op"), event.get("seq"),
                                              event.get("timeout_ms")))
            self.timeout_bag.add(event)
        elif kind == "watchdog-frame":
            self.timeout_bag.add(event)
        elif kind == "work-progress":
            rank = int(event.get("rank"))
            self.note_rank(rank)
            self.progress.slot(rank, lambda: (int(event.get("enqueued")),
                                              int(event.get("completed"))))
            self.timeout_bag.add(event)
        elif kind == "gloo-timeout":
            if len(self.timeouts) < 256:
                self.timeouts.append(_Timeout(event.rank, event.get("op"), "", event.get("ms")))
            self.timeout_bag.add(event)
        elif kind == "barrier-failed":
            for part in event.get("ranks").split(","):
                if part.strip().isdigit() and len(self.barrier_ranks) < 256:
                    self.barrier_ranks.add(int(part))
            self.barrier_ms = self.barrier_ms or event.get("ms")
            self.timeout_bag.add(event)
        elif kind == "connection-lost":
            self.lost.add(event)
            if event.get("addr") and len(self.lost_peers) < 16:
                self.lost_peers.add(f"{event.get('addr')}:{event.get('port')}")
            if len(self.lost_details) < 8:
                self.lost_details.add(event.get("detail"))
        elif kind == "nccl-error":
            self.nccl_error_bag.add(event)
            if len(self.nccl_errors) < 8:
                self.nccl_errors.add(event.get("detail"))
        elif kind == "nccl-warn":
            self.nccl_warn.add(event)

    def _summary(self, event: Event) -> None:
        kind, name = event.kind, event.file
        if kind == "summary-root":
            self.section[name] = "root"
            self.current.pop(name, None)
            return
        if kind == "summary-failures":
            self.section[name] = "failures"
            self.current.pop(name, None)
            return
        if kind == "agent-failed":
            record = FailureRecord(root=False, local_rank=int(event.get("local_rank")),
                                   code=int(event.get("code")), pid=event.get("pid"))
            self._keep(record, event)
            return
        if kind == "mpi-rank-signaled":  # (a signal's number as a launcher's negative code)
            rank = int(event.get("rank"))
            record = FailureRecord(root=False, rank=rank, host=event.get("host"),
                                   pid=event.get("pid"), code=-int(event.get("signum")))
            self.note_rank(rank)
            self._keep(record, event)
            return
        section = self.section.get(name)
        if section is None:
            return
        current = self.current.get(name)
        if (
            current is None
            or (kind == "summary-host" and current.host != "")
            or (kind == "summary-rank" and current.rank is not None)
        ):
            record = FailureRecord(root=section == "root")
            self.current[name] = record
            self._keep(record, None)
        else:
            record = current
        record.bag.add(event)
        if kind == "summary-host":
            record.host = event.get("host")
        elif kind == "summary-rank":
            record.rank = int(event.get("rank"))
            local_rank = event.get("local_rank")  # (an MPI launcher's names no local rank)
            record.local_rank = int(local_rank) if local_rank else None
            self.note_rank(record.rank)
        elif kind == "summary-exit":
            record.code = int(event.get("code"))
            record.pid = event.get("pid")
        elif kind == "summary-signal":
            record.signal = event.get("signal")

    def _keep(self, record: FailureRecord, event: Event | None) -> None:
        if event is not None:
            record.bag.add(event)
        if len(self.records) < MAX_RECORDS:
            self.records.append(record)

    # --- decisions -------------------------------------------------------------------------------

    def root_causes(self) -> list[FailureRecord]:
        roots = [r for r in self.records if r.root and (r.rank is not None or r.code is not None)]
        if not roots:  # no summary (a truncated log): the agent's own "failed (exitcode" lines
            roots = [r for r in self.records if not r.root and r.code not in (None, 0)
                     and r.signal_name != "SIGTERM"][:1]
        return roots

    def killed_by_signal(self) -> bool:
        end = self.root_end()
        if end is not None:  # killed of its own accord, not after losing a peer
            return end.is_cause and end.exitcode < 0 and end.signal != "SIGTERM"
        return any(r.killed for r in self.root_causes())

    def silent_sigkills(self) -> list[FailureRecord]:
        """The root causes, when every one was a SIGKILL and no rank said anything first (no
        exception, NCCL error, timeout or lost connection): the kernel's OOM killer's signature."""
        roots = self.root_causes()
        quiet = not (self.exceptions.data or self.anonymous_exception or self.nccl_errors
                     or self.lost or self.timeout_bag)
        if roots and quiet and all(r.signal_name == "SIGKILL" for r in roots):
            return roots
        return []

    def rank_failed(self, other_errors: bool) -> tuple[Finding, int] | None:
        """The finding and its priority (a kill by signal outranks its network consequences)."""
        if self.ends:
            return self._from_ends()
        e = entry("rank-failed")
        roots = self.root_causes()
        parts, bags = [], []
        for record in roots[:4]:
            sentence = _("{who} first.", who=record.describe())
            if record.rank is not None and record.rank in self.exceptions.data:
                text, bag = self.exceptions.data[record.rank]
                sentence = _("{who} first. Its last error: {error}", who=record.describe(),
                             error=text + ("" if text[-1:] in ".!?" else "."))
                bags.append(bag)
            elif (only := self._one_error()) is not None:  # (its lines carry no rank)
                text, bag = only
                sentence = _("{who} first. The only error the processes printed: {error}",
                             who=record.describe(), error=text + ("" if text[-1:] in ".!?" else "."))
                bags.append(bag)
            parts.append(sentence)
            bags.append(record.bag)
        if not parts and self.nccl_errors and not other_errors:
            parts.append(_("A rank stopped with an NCCL error: {errors}.",
                           errors="; ".join(sorted(self.nccl_errors))))
            bags += [self.nccl_error_bag, self.nccl_warn]
        if not parts and not other_errors and self.uncaught_seen:
            first = self.anonymous_exception or next(iter(self.exceptions.data.values()), None)
            if first is not None:
                parts.append(_("A process stopped with an uncaught {exception}.",
                               exception=first[0].rstrip(".")))
                bags.append(first[1])
        if not parts:
            return None
        if any(r.killed for r in roots):
            parts.append(_("The other ranks were stopped because of it."))
        fix = e.fix
        if any(r.signal_name == "SIGKILL" for r in roots):
            fix = sigkill_fix(fix)
        elif self.nccl_errors and not roots:
            fix = _("Rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET to see the call that "
                    "failed, then ddpkit doctor --log on that output.\n{fix}", fix=fix)
        priority = 85 if any(r.killed for r in roots) else e.priority
        evidence = merge(*(b.items for b in bags), self.child_failed.items)
        return Finding(e.id, e.severity, e.title, specific_then_general(parts, e.explanation),
                       fix, evidence), priority

    def _one_error(self) -> tuple[str, Bag] | None:
        """The uncaught exception every process that printed one printed (its text, its line),
        where the log holds one text only and no process's line names its rank."""
        if len(self.uncaught_texts) != 1 or self.exceptions.data or self.anonymous_exception is None:
            return None
        return self.anonymous_exception if self.anonymous_exception[0] in self.uncaught_texts \
            else None

    def _from_ends(self) -> tuple[Finding, int] | None:
        """rank-failed from the ranks' ends: the cause named first, ahead of the lost
        connections and timeouts it brought (priority 85); a consequence alone (the cause is on
        a node whose logs were not given) stays below them."""
        e = entry("rank-failed")
        root = self.root_end()
        if root is None:
            return None
        text = explain(self.ends, self.end_firsts)
        bags = [r.bag for r in self.records]
        if root.rank in self.exceptions.data:
            bags.insert(0, self.exceptions.data[root.rank][1])
        fix = e.fix
        if root.is_cause and root.signal == "SIGKILL":
            fix = sigkill_fix(fix)
        return (Finding(e.id, e.severity, e.title,
                        specific_then_general(text, e.explanation) if root.is_cause else text,
                        fix,
                        merge(*(b.items for b in bags), self.child_failed.items)),
                85 if root.is_cause else e.priority)

    def collective_timeout(self, world_size: int | None) -> Finding | None:
        if not self.timeout_bag:
            return None
        e = entry("collective-timeout")
        timed_out = sorted({t.rank for t in self.timeouts if t.rank is not None})
        ops = sorted({f"{t.op}" + (f" (SeqNum {t.seq})" if t.seq else "") for t in self.timeouts
                      if t.op})
        ms = sorted({t.ms for t in self.timeouts if t.ms} | ({self.barrier_ms} - {""}), key=int)
        what: str
        if timed_out:
            what = _n("Rank {ranks} timed out", "Ranks {ranks} timed out", len(timed_out),
                      ranks=", ".join(map(str, timed_out)))
        elif self.barrier_ranks and not self.timeouts:
            # (ProcessGroupGloo::monitoredBarrier: rank 0 waits for each other rank in turn and
            # names those that did not arrive, "Rank %d failed to pass monitoredBarrier in %d ms")
            what = _("Rank 0's monitored barrier (dist.monitored_barrier) gave up waiting")
        elif not self.timeouts and not self.progress.data:
            what = _("Only the NCCL watchdog's stack, or its timeout message without a rank, "
                     "was posted: a collective timed out; the log does not say on which rank or "
                     "in which operation")
        else:
            what = _("A rank timed out")
        op_text = ", ".join(ops)
        if ops and ms:
            what = _("{what} in {ops} after {ms} ms.", what=what, ops=op_text, ms=ms[-1])
        elif ops:
            what = _("{what} in {ops}.", what=what, ops=op_text)
        elif ms:
            what = _("{what} after {ms} ms.", what=what, ms=ms[-1])
        else:
            what = _("{what}.", what=what)
        parts = [what]
        lagging = self._lagging(timed_out, world_size)
        if lagging:
            parts.append(_n("Rank {ranks} never completed it: it is the lagging rank; look there "
                            "first.", "Ranks {ranks} never completed it: they are the lagging "
                            "ranks; look there first.", len(lagging),
                            ranks=", ".join(map(str, lagging))))
        return Finding(e.id, e.severity, e.title, specific_then_general(parts, e.explanation),
                       e.fix,
                       merge(self.timeout_bag.items))

    def _lagging(self, timed_out: list[int], world_size: int | None) -> list[int]:
        if self.barrier_ranks:
            return sorted(self.barrier_ranks)
        progress = self.progress.data
        if len(progress) >= 2:
            top = max(enqueued for enqueued, _ in progress.values())
            behind = sorted(r for r, (enqueued, _) in progress.items() if enqueued < top)
            if behind:
                return behind
        world = set(range(world_size)) if world_size else set(self.ranks_seen)
        if timed_out and world:
            missing = sorted(world - set(timed_out))
            if missing and len(missing) < len(world):
                return missing
        return []

    def connection_lost(self, other_errors: bool, connect_failed: bool) -> Finding | None:
        """None when nothing was lost, or when NCCL's generic ncclRemoteError text is all there is
        and failed connection attempts already explain it."""
        if not self.lost:
            return None
        if connect_failed and self.lost_details <= {_REMOTE_ERROR}:
            return None
        e = entry("connection-lost")
        details = sorted(self.lost_details)
        said = "; ".join(details)
        said = said[:1].upper() + said[1:]
        parts: list[str] = [_("{details} (peer {peers}).", details=said,
                              peers=", ".join(sorted(self.lost_peers)))
                            if self.lost_peers else said + "."]
        end = self.root_end()
        if end is not None and end.is_cause:
            parts.append(_("Rank {rank} failed on its own account first, which explains it: see "
                           "rank-failed.", rank=end.rank))
        elif end is not None:
            parts.append(_("The rank that reported it failed after it: the cause is on the "
                           "peer."))
        elif self.killed_by_signal():
            parts.append(_("A rank was killed just before, which explains it: see rank-failed."))
        elif other_errors:
            parts.append(_("It is most likely a consequence of the failure reported above."))
        return Finding(e.id, e.severity, e.title, specific_then_general(parts, e.explanation),
                       e.fix,
                       merge(self.lost.items))
