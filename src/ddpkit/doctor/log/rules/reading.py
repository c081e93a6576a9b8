"""The facts of ``ddpkit doctor --log``: what every log says, kept bounded.

:class:`Reading` feeds each event to the rule families' state (network, jobs, NCCL's init, the
run's end, ...) and keeps the few facts of its own the table's entries read (NCCL settings per
node, communicators, the machines seen); it decides nothing. The decisions are the entries of
:data:`ddpkit.doctor.log.rules.order.RULES`, each reading this once every log is read.
"""

from __future__ import annotations

from typing import Protocol

from ddpkit.doctor.addresses import is_unreachable
from ddpkit.doctor.log.causes.base import Context
from ddpkit.doctor.log.evidence import Bag, Capped
from ddpkit.doctor.log.facts.extract import facts_of
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.facts.winsock import error_class
from ddpkit.doctor.log.init_model import InitModel
from ddpkit.doctor.log.patterns import FAILURE_KINDS
from ddpkit.doctor.log.rules.exit_barrier import ExitBarrierLines
from ddpkit.doctor.log.rules.hosts import SharedDevices
from ddpkit.doctor.log.rules.ignored import IgnoredExceptions
from ddpkit.doctor.log.rules.jobs import JobRules
from ddpkit.doctor.log.rules.local_rank import LocalRankRule
from ddpkit.doctor.log.rules.network import SOCKET_ITEM, NetworkRules
from ddpkit.doctor.log.rules.run_end import RUN_END_KINDS, RunEnd
from ddpkit.doctor.log.rules.shell_signals import SIGNAL_KINDS, ShellSignals
from ddpkit.doctor.log.rules.simple import Facts
from ddpkit.doctor.log.rules.unexplained import UNEXPLAINED_KINDS, UnexplainedRule, warning_line
from ddpkit.doctor.log.scan import FACTS_READ, Event

_FAMILIES = 2  # c10d tries a name's addresses in IPv6, then IPv4 (a v4-mapped address in both)

# Events that show a failure (a warning-level line among them does not)
FAILED_KINDS = FAILURE_KINDS | {"killed", "fatal-signal", "death-signal", "summary-signal"}
SIMPLE = {
    "shm-error": "shm", "duplicate-gpu": "duplicate-gpu", "root-mismatch": "rank-assignment",
    "p2p-error": "p2p", "oom": "out-of-memory", "ib-error": "ib-error",
    "version-error": "version-mismatch", "port-in-use": "port-in-use",
    "rdzv-timeout": "rendezvous-timeout", "rdzv-config": "rendezvous-config", "benign": "benign",
}


class CauseFeed(Protocol):
    """The causes (:class:`ddpkit.doctor.log.causes.registry.Causes`): fed each event's facts."""

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None: ...


class Reading:
    """What every log says, kept bounded: feed it every event of every log."""

    def __init__(self, causes: CauseFeed) -> None:
        self.net = NetworkRules()
        self.job = JobRules()
        self.local_rank = LocalRankRule()
        self.init = InitModel()
        self.shared_devices = SharedDevices()
        self.unexplained = UnexplainedRule()
        self.ignored = IgnoredExceptions()
        self.exit_barrier = ExitBarrierLines()
        self.run_end = RunEnd()
        self.signals = ShellSignals()
        self.simple: dict[str, Facts] = {}
        self.machines: set[str] = set()
        self.env: Capped[str, dict[str, str]] = Capped()
        self.env_bag = Bag()
        self.host_addresses: Capped[str, set[tuple[str, str, str]]] = Capped()
        self.host_bag = Bag()
        self.comm_started = Bag()
        self.comm_completed = 0
        self.nranks: Capped[str, set[str]] = Capped(16)
        self.nranks_bag = Bag()
        self.comm_ranks: Capped[tuple[str, str], set[str]] = Capped(4096)
        self.duplicate_rank_bag = Bag()
        self.max_nodes = 0
        self.single_node_multi_gpu = False
        self.causes = causes
        self.fact_nodes = 0  # the largest node count a line stated (--nnodes, nNodes, ...)
        self.event_failed = False  # an event showed a failure (not a warning-level line)
        # a connection lost, said above warning level (c10d's TCPStore client warns of a reset
        # it then retries: "[W ... TCPStore.cpp:125] [c10d] recvValue failed on ...")
        self.lost_failed = False
        # a failed connect that shows a failure: said above warning level, refused, timed out or
        # unroutable (the peer or the network said no), or tried again. c10d warns of each
        # address of a name it tries, once in each address family (socket.cpp, SocketConnectOp:
        # only a refused, reset or timed-out connect is retried; another error moves on to the
        # next address, and when none is left c10d raises at error level): attempts that failed
        # otherwise ("Invalid argument", Windows' 10049 "The requested address is not valid in
        # its context") before another address answers are no failure, unless one address is
        # warned of more often than its two families explain (something retries it).
        self.other_connects: dict[str, int] = {}  # address -> attempts that failed otherwise
        self.connect_failed_loudly = False

    def feed(self, event: Event) -> None:
        if self.ignored.hides(event):
            return  # an exception Python reported and ignored (rules/ignored.py): no failure
        if self.exit_barrier.hides(event):
            return  # torchrun's agent after its workers succeeded (rules/exit_barrier.py)
        facts = () if event.get(FACTS_READ) else facts_of(event.whole or event.text)
        for fact in facts:
            if fact.kind is FactKind.NNODES:
                self.fact_nodes = max(self.fact_nodes, int(fact.value))
        self.causes.feed(event, facts)  # (a cause that needs no fact reads its kinds' events)
        if not self.event_failed and event.kind in FAILED_KINDS and (
                event.kind == "death-signal" or not warning_line(event.text)):
            self.event_failed = True  # (a job stopped from outside is a failure, at any level)
        if event.kind == "connection-lost" and not self.lost_failed:
            self.lost_failed = not warning_line(event.text)
        if event.kind == "connect-error":
            if not warning_line(event.text) or error_class(event.get("err")) != "other":
                self.connect_failed_loudly = True
            elif (address := event.get("addr")) in self.other_connects or len(
                    self.other_connects) < 64:
                self.other_connects[address] = self.other_connects.get(address, 0) + event.repeat
        if (event.host or event.node) and len(self.machines) < 256:
            self.machines.add(event.host or event.node or "")
        self.net.feed(event)
        self.job.feed(event)
        self.local_rank.feed(event)
        self.init.feed(event)
        self.shared_devices.feed(event)
        kind = event.kind
        if kind in UNEXPLAINED_KINDS:
            self.unexplained.feed(event)
        if kind in RUN_END_KINDS:
            self.run_end.feed(event)
        if kind in SIGNAL_KINDS:
            self.signals.feed(event)
        if kind in SIMPLE and not (kind == "rdzv-config" and any(
                f.kind is FactKind.UNSET_VARIABLE for f in facts)):  # (causes/unset_variable.py
            self.simple.setdefault(SIMPLE[kind], Facts()).add(event)  # reads that one closer)
        elif kind == "nccl-env":
            values = self.env.slot(event.origin, dict)
            if values is not None and len(values) < 64:
                values[event.get("var")] = event.get("value")
                self.env_bag.add(event)
        elif kind in ("nccl-bootstrap", "nccl-socket-ifaces") and event.host:
            self._note_host_address(event)
        elif kind == "nccl-comm":
            self._note_comm(event)

    def _note_host_address(self, event: Event) -> None:
        pairs = ([(event.get("iface"), event.get("addr"))] if event.kind == "nccl-bootstrap"
                 else SOCKET_ITEM.findall(event.get("ifaces")))
        seen = self.host_addresses.slot(event.host or "", set)
        if seen is None:
            return
        for name, address in pairs:
            if not is_unreachable(address, name) and len(seen) < 32:
                seen.add((event.file, name, address))
                self.host_bag.add(event)

    def _note_comm(self, event: Event) -> None:
        phase = event.get("phase")
        if phase == "START":
            self.comm_started.add(event)
        elif phase == "COMPLETE":
            self.comm_completed += event.repeat
        nranks = event.get("nranks")
        origins = self.nranks.slot(nranks, set)
        if origins is not None and len(origins) < 64:
            origins.add(event.origin)
            self.nranks_bag.add(event)
        self.job.note_rank(int(event.get("rank")))
        if event.get("nnodes"):
            nodes = int(event.get("nnodes"))
            self.max_nodes = max(self.max_nodes, nodes)
            if nodes == 1 and int(event.get("local_ranks", "1")) > 1:
                self.single_node_multi_gpu = True
        commid = event.get("commid")
        if commid and phase != "COMPLETE":
            holders = self.comm_ranks.slot((commid, event.get("rank")), set)
            if holders is not None:
                holders.add(event.origin)
                if len(holders) > 1:
                    self.duplicate_rank_bag.add(event)

    # --- what the facts say, once every log is read ----------------------------------------------

    @property
    def multi_node(self) -> bool:
        return len(self.machines) >= 2 or self.max_nodes > 1

    @property
    def single_node(self) -> bool:
        """NCCL reported a single node (its socket transport then carries nothing)."""
        return self.max_nodes == 1 and len(self.machines) < 2

    def world_size(self) -> int | None:
        sizes = sorted(int(n) for n in self.nranks.data)
        return sizes[-1] if sizes else None

    def init_started(self) -> bool:
        """A communicator's init started: its ``Init START`` line, or (releases 2.4 to 2.11) the
        trees NCCL laid out."""
        return bool(self.comm_started) or self.init.started_without_comm_line()

    def init_hung(self) -> bool:
        """NCCL init started and no communicator completed (a silent wrong address)."""
        return self.init_started() and not self.comm_completed

    def failing(self) -> bool:
        """Whether the facts show a failure: a failed rank, an NCCL error, a lost or refused
        connection, a timeout (the rules' error findings aside)."""
        job = self.job
        return self.connect_failed() or bool(job.root_causes() or job.nccl_errors
                                             or self.lost_failed or job.timeout_bag)

    def connect_failed(self) -> bool:
        """A connect failed as a failure: said above warning level, refused, timed out or
        unroutable, or one address tried more often than once in each address family."""
        return self.connect_failed_loudly or any(
            count > _FAMILIES for count in self.other_connects.values())

    def shown(self) -> bool:
        """The logs show a failure (a hang in NCCL's init is one too)."""
        return (self.event_failed or self.failing() or self.job.root_end() is not None
                or self.init_hung())

    def network_failed(self) -> bool:
        """The failure is the network's: a refused, lost or timed-out connection, an NCCL
        error, a collective or rendezvous timeout, an init that never completed."""
        net, job = self.net, self.job
        return bool(self.connect_failed() or net.rdzv_connection or net.gloo_mesh_failed
                    or net.bootstrap_failed or job.lost or job.timeout_bag or job.nccl_errors
                    or self.init_hung())

    def context(self) -> Context:
        """What the whole reading says, for the causes."""
        return Context(self.multi_node or self.fact_nodes > 1, self.shown(),
                       self.network_failed())
