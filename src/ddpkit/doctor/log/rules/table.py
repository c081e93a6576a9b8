"""Events in, findings out: the rule table of ``ddpkit doctor --log``.

``Diagnosis.feed`` keeps bounded facts per event (and hands each event's typed facts, from
:mod:`ddpkit.doctor.log.facts`, to the causes of :mod:`ddpkit.doctor.log.causes.registry`);
``Diagnosis.findings`` decides once all logs are read (that is what lets it correlate across
files): the rule families below, then the causes, in the one ranking of
:func:`ddpkit.doctor.log.causes.registry.rank`, most likely root cause first.
"""

from __future__ import annotations

from ddpkit.doctor.addresses import is_unreachable
from ddpkit.doctor.catalogue import entry
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.base import Context
from ddpkit.doctor.log.causes.registry import Causes, rank
from ddpkit.doctor.log.evidence import Bag, Capped, merge, origins_text
from ddpkit.doctor.log.facts.extract import facts_of
from ddpkit.doctor.log.facts.kinds import FactKind
from ddpkit.doctor.log.init_model import InitModel
from ddpkit.doctor.log.patterns import FAILURE_KINDS
from ddpkit.doctor.log.rules.hosts import SharedDevices
from ddpkit.doctor.log.rules.init_phase import init_hang, unreached_peers
from ddpkit.doctor.log.rules.jobs import JobRules
from ddpkit.doctor.log.rules.local_rank import LocalRankRule
from ddpkit.doctor.log.rules.network import SOCKET_ITEM, NetworkRules
from ddpkit.doctor.log.rules.nodes import node_mismatch, versions
from ddpkit.doctor.log.rules.run_end import RUN_END_KINDS, RunEnd
from ddpkit.doctor.log.rules.shell_signals import SIGNAL_KINDS, ShellSignals, bus_error_finding
from ddpkit.doctor.log.rules.simple import Facts, simple_finding
from ddpkit.doctor.log.rules.unexplained import UNEXPLAINED_KINDS, UnexplainedRule, warning_line
from ddpkit.doctor.log.scan import Event
from ddpkit.doctor.wording import specific_then_general
from ddpkit.i18n import _, _n
from ddpkit.wording import clauses, commas

# Events that show a failure (a warning-level line among them does not)
_FAILED_KINDS = FAILURE_KINDS | {"killed", "fatal-signal", "death-signal", "summary-signal"}
# Variables whose value may rightly differ per node (interface names do).
_PER_NODE_VARS = frozenset({"NCCL_SOCKET_IFNAME", "NCCL_DEBUG_FILE", "NCCL_IB_HCA"})
_SIMPLE = {
    "shm-error": "shm", "duplicate-gpu": "duplicate-gpu", "root-mismatch": "rank-assignment",
    "p2p-error": "p2p", "oom": "out-of-memory", "ib-error": "ib-error",
    "version-error": "version-mismatch", "port-in-use": "port-in-use",
    "rdzv-timeout": "rendezvous-timeout", "rdzv-config": "rendezvous-config", "benign": "benign",
}


class Diagnosis:
    """Feed it every event of every log, then ask for the findings."""

    def __init__(self) -> None:
        self.net = NetworkRules()
        self.job = JobRules()
        self.local_rank = LocalRankRule()
        self.init = InitModel()
        self.shared_devices = SharedDevices()
        self.unexplained = UnexplainedRule()
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
        self.causes = Causes()
        self.fact_nodes = 0  # the largest node count a line stated (--nnodes, nNodes, ...)
        self.event_failed = False  # an event showed a failure (not a warning-level line)

    def feed(self, event: Event) -> None:
        facts = facts_of(event.text)
        if facts:
            for fact in facts:
                if fact.kind is FactKind.NNODES:
                    self.fact_nodes = max(self.fact_nodes, int(fact.value))
            self.causes.feed(event, facts)
        if not self.event_failed and event.kind in _FAILED_KINDS and (
                event.kind == "death-signal" or not warning_line(event.text)):
            self.event_failed = True  # (a job stopped from outside is a failure, at any level)
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
        if kind in _SIMPLE:
            self.simple.setdefault(_SIMPLE[kind], Facts()).add(event)
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

    # --- decisions -------------------------------------------------------------------------------

    @property
    def multi_node(self) -> bool:
        return len(self.machines) >= 2 or self.max_nodes > 1

    def world_size(self) -> int | None:
        sizes = sorted(int(n) for n in self.nranks.data)
        return sizes[-1] if sizes else None

    def findings(self) -> list[Finding]:
        scored: list[tuple[Finding, int]] = []

        def add(finding: Finding | None, priority: int | None = None) -> None:
            if finding is not None:
                scored.append((finding, entry(finding.id).priority if priority is None
                               else priority))

        init_hung = self._init_started() and not self.comm_completed
        single_node = self.max_nodes == 1 and len(self.machines) < 2
        for finding in self.net.findings(self.multi_node, init_hung, single_node):
            add(finding)
        for finding_id in ("shm", "duplicate-gpu", "p2p", "out-of-memory", "ib-error",
                           "port-in-use", "rendezvous-timeout", "rendezvous-config"):
            add(self._simple_finding(finding_id))
        add(self.local_rank.finding())
        add(self._rank_assignment())
        add(self.run_end.separate_tests())
        trouble = init_hung or self._failed(scored)
        driver = self.simple.get("version-mismatch")
        add(versions(self.init, driver.bag if driver else None, trouble))
        add(self._node_mismatch(trouble, init_hung))
        add(self.shared_devices.finding(), entry("duplicate-gpu").priority)
        add(self.job.collective_timeout(self.world_size()))
        add(self._p2p_suspect(scored))
        if not any(f.severity == "error" for f, _score in scored) and not self.comm_completed:
            add(unreached_peers(self.init, self.job.nccl_errors, self.job.nccl_error_bag,
                                self.comm_started, len(self.machines)))
        if "out-of-memory" not in self.simple:  # the shell's "Killed": the OOM finding's, if any
            add(*(self.signals.finding() or (None, None)))
        errors_so_far = any(f.severity == "error" for f, _score in scored)
        add(self.job.connection_lost(errors_so_far, bool(self.net.conns)))
        errors_so_far = any(f.severity == "error" for f, _score in scored)
        failed = self.job.rank_failed(errors_so_far)
        if failed is not None:
            add(*failed)
            if not errors_so_far:  # the library's raise site may name the failure's kind
                add(self.unexplained.named())
            if not any(f.id == "out-of-memory" for f, _score in scored):
                add(self._killed_without_a_word())
            if not any(f.id == "shm" for f, _score in scored):
                add(*(self._bus_error() or (None, None)))
        add(self._init_hang(scored))
        if not any(f.severity == "error" for f, _score in scored):
            add(self.unexplained.finding(self._waited_on()))
        if not scored:
            add(self.run_end.no_result(self._waited_on()))
        if not scored:
            e = entry("no-failure")
            benign = self.simple.get("benign")
            done = self.run_end.completion_text()
            text = specific_then_general(done, e.explanation) if done else e.explanation
            if benign:
                text = specific_then_general(
                    _("Only benign lines were found ({count}: {what}).", count=benign.bag.count,
                      what=", ".join(benign.one("what"))), text)
            add(Finding(e.id, e.severity, e.title, text, e.fix,
                        merge(benign.bag.items) if benign else ()))
        shown = (self.event_failed or self._failed([]) or self.job.root_end() is not None
                 or init_hung)  # a hang in NCCL's init is a failure too
        net, job = self.net, self.job
        network = bool(net.conns or net.rdzv_connection or net.gloo_mesh_failed
                       or net.bootstrap_failed or job.lost or job.timeout_bag or job.nccl_errors
                       or init_hung)
        context = Context(self.multi_node or self.fact_nodes > 1, shown, network)
        return rank(scored, self.causes.findings(context), shown)

    def _simple_finding(self, finding_id: str) -> Finding | None:
        facts = self.simple.get(finding_id)
        return simple_finding(finding_id, facts) if facts else None

    def _rank_assignment(self) -> Finding | None:
        e = entry("rank-assignment")
        facts = self.simple.get("rank-assignment")
        parts: list[str] = []
        bags: list[Bag] = []
        if facts:
            parts.append(_("NCCL's bootstrap root reports: {details}.",
                           details="; ".join(facts.details)))
            bags.append(facts.bag)
        if len(self.nranks.data) > 1:
            sizes = commas([_("{size} (on {hosts})", size=n, hosts=origins_text(o))
                            for n, o in sorted(self.nranks.items(), key=lambda i: int(i[0]))])
            parts.append(_("The ranks disagree on the world size: {sizes}.", sizes=sizes))
            bags.append(self.nranks_bag)
        duplicates = sorted(k[1] for k, v in self.comm_ranks.items() if len(v) > 1)
        if duplicates:
            parts.append(_n("Rank {ranks} was claimed by more than one machine in the same "
                            "communicator.", "Ranks {ranks} were claimed by more than one machine "
                            "in the same communicator.", len(duplicates),
                            ranks=", ".join(duplicates)))
            bags.append(self.duplicate_rank_bag)
        if not parts:
            return None
        return Finding(e.id, e.severity, e.title, specific_then_general(parts, e.explanation),
                       e.fix, merge(*(b.items for b in bags)))

    def _failed(self, scored: list[tuple[Finding, int]]) -> bool:
        """Whether anything in the logs failed: an error finding so far, a failed rank, an NCCL
        error, a lost or refused connection, a timeout."""
        job = self.job
        return (any(f.severity == "error" for f, _score in scored) or bool(self.net.conns)
                or bool(job.root_causes() or job.nccl_errors or job.lost or job.timeout_bag))

    def _node_mismatch(self, trouble: bool, init_hung: bool) -> Finding | None:
        finding = node_mismatch(self.init, self.env.data, self.env_bag, self.host_addresses.data,
                                self.host_bag, _PER_NODE_VARS, trouble)
        stopped = self.init.where_each_stopped() if init_hung else ""
        if finding is None or not stopped or finding.severity != "error":
            return finding
        text = _("NCCL init hangs: {stopped}. {general}", stopped=stopped,
                 general=finding.explanation)
        return Finding(finding.id, finding.severity, finding.title, text, finding.fix,
                       finding.evidence)

    def _p2p_suspect(self, scored: list[tuple[Finding, int]]) -> Finding | None:
        if any(f.id == "p2p" for f, _score in scored) or not self.single_node_multi_gpu:
            return None
        if not any(t.seq for t in self.job.timeouts) or any(
            values.get("NCCL_P2P_DISABLE") == "1" for values in self.env.data.values()
        ):
            return None
        e = entry("p2p")
        text = _("The NCCL watchdog fired in a job whose communicators span a single node with "
                 "several GPUs, where the ranks talk over CUDA peer-to-peer: broken P2P is the "
                 "usual cause of such hangs.")
        return Finding(e.id, "warning", e.title, specific_then_general(text, e.explanation), e.fix,
                       merge(self.job.timeout_bag.items, self.comm_started.items))

    def _killed_without_a_word(self) -> Finding | None:
        """A SIGKILL no rank explained: named as the likely cause, ahead of the rank it killed."""
        killed = self.job.silent_sigkills()
        if not killed:
            return None
        e = entry("out-of-memory")
        who = clauses([r.describe() for r in killed[:4]])
        text = _("{who}, and no rank printed an error first. A process killed by SIGKILL without "
                 "a word is most often the kernel's OOM killer reclaiming host memory (it could "
                 "also be a scheduler's or a user's kill).", who=who)
        fix = _("Confirm on that host: dmesg -T | grep -i -E 'killed process|out of memory'\n"
                "Then use less host memory per rank: fewer DataLoader workers, smaller prefetch, "
                "load the checkpoint on one rank, or give the job more RAM (--mem for Slurm).")
        return Finding(e.id, e.severity, e.title, specific_then_general(text, e.explanation), fix,
                       merge(*(r.bag.items for r in killed)))

    def _bus_error(self) -> tuple[Finding, int] | None:
        """A rank that started the failure and died of SIGBUS (torchrun's summary, or its end in
        a run directory): shared memory, ahead of the rank it ended."""
        end = self.job.root_end()
        if end is not None:
            if not (end.is_cause and end.signal == "SIGBUS"):
                return None
            text = _("{who} died of SIGBUS.", who=_("Rank {rank} (host {host})", rank=end.rank,
                                                     host=end.host))
            return bus_error_finding(text, ())
        buses = [r for r in self.job.root_causes() if r.signal_name == "SIGBUS"]
        if not buses:
            return None
        text = _("{who}.", who=clauses([r.describe() for r in buses[:4]]))  # "killed by SIGBUS"
        return bus_error_finding(text, merge(*(r.bag.items for r in buses)))

    def _waited_on(self) -> str:
        """What the job was doing when it was last heard of, as far as the log tells."""
        if self.comm_completed:
            return _("a collective or a later NCCL communicator: the first communicators had "
                     "been set up (Init COMPLETE)")
        if self._init_started():
            return _("NCCL init (ncclCommInitRank), which waits until every rank of the "
                     "communicator joins")
        stopped = self.init.where_each_stopped()
        if stopped:
            return _("NCCL's bootstrap, before any communicator started its init ({stopped})",
                     stopped=stopped)
        if self.init.placed:
            return _("nccl-tests, after it listed its ranks' devices and before its last line "
                     "(# Avg bus bandwidth)")
        return _("the rendezvous, process-group init or a collective: this log does not say "
                 "which (no NCCL INFO lines; ddpkit launch --debug records them)")

    def _init_started(self) -> bool:
        """A communicator's init started: its ``Init START`` line, or (releases 2.4 to 2.11) the
        trees NCCL laid out."""
        return bool(self.comm_started) or self.init.started_without_comm_line()

    def _init_hang(self, scored: list[tuple[Finding, int]]) -> Finding | None:
        if scored or not self._init_started() or self.comm_completed:
            return None
        several_ranks = (len(self.init.ranks_started) > 1 or self.single_node_multi_gpu
                         or self.init.placed_on_one_host())
        one_machine = (len(self.machines) <= 1 and self.max_nodes <= 1
                       and not self.init.missing_ranks() and several_ranks)
        started = self.comm_started if self.comm_started else self.init.trees
        return init_hang(self.init, started, one_machine)

