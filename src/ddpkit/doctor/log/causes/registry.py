"""The table of causes, and the one ranking of findings.

Adding a cause: a file in this folder with a :class:`~.base.Cause` subclass, its class in
``CAUSES``, and a test whose lines are made from the printing program's template.

The whole table is :data:`RULES` (the older rule families' entries, in the order stated in
:mod:`ddpkit.doctor.log.rules.order`) and then ``CAUSES``, which need no place in that order:
:func:`judge` evaluates both and :func:`rank` places every finding.
"""

from __future__ import annotations

from collections.abc import Sequence

from ddpkit.doctor.catalogue import GENERIC, entry
from ddpkit.doctor.findings import SEVERITY_ORDER, Finding
from ddpkit.doctor.log.causes.address_family import AddressFamily
from ddpkit.doctor.log.causes.barrier_waiting import BarrierWaiting
from ddpkit.doctor.log.causes.base import Cause, Context
from ddpkit.doctor.log.causes.build_library import BuildLibrary
from ddpkit.doctor.log.causes.bus_error import BusError
from ddpkit.doctor.log.causes.c10d_store_host import C10dStoreHost
from ddpkit.doctor.log.causes.ccl_local_rank import CclLocalRank
from ddpkit.doctor.log.causes.collective_check import CollectiveCheck
from ddpkit.doctor.log.causes.collective_mismatch import CollectiveMismatch
from ddpkit.doctor.log.causes.communicator_device import CommunicatorDevice
from ddpkit.doctor.log.causes.config_undefined import ConfigUndefined
from ddpkit.doctor.log.causes.container_bridge import ContainerBridge
from ddpkit.doctor.log.causes.cuda_check import CudaCheck
from ddpkit.doctor.log.causes.cuda_meaning import CudaMeaning
from ddpkit.doctor.log.causes.cuda_toolkit import CudaToolkit
from ddpkit.doctor.log.causes.ddp_checks import DdpChecks
from ddpkit.doctor.log.causes.ddp_optimizer import DdpOptimizer
from ddpkit.doctor.log.causes.device_ordinal import DeviceOrdinal
from ddpkit.doctor.log.causes.empty_address import EmptyAddress
from ddpkit.doctor.log.causes.empty_rank_log import EmptyRankLog
from ddpkit.doctor.log.causes.empty_rank_value import EmptyRankValue
from ddpkit.doctor.log.causes.endpoint_port import EndpointWithoutPort
from ddpkit.doctor.log.causes.firewall import Firewall
from ddpkit.doctor.log.causes.gdr_one_side import GdrOneSide
from ddpkit.doctor.log.causes.gloo_hostname import GlooHostname
from ddpkit.doctor.log.causes.gloo_no_address import GlooNoAddress
from ddpkit.doctor.log.causes.gpu_assert import GpuAssert
from ddpkit.doctor.log.causes.gpu_build import GpuBuild
from ddpkit.doctor.log.causes.in_place_change import InPlaceChange
from ddpkit.doctor.log.causes.internal_assert import InternalAssert
from ddpkit.doctor.log.causes.ipoib_without_verbs import IpoibWithoutVerbs
from ddpkit.doctor.log.causes.kernel_fault import KernelFault
from ddpkit.doctor.log.causes.launcher_arguments import LauncherArguments
from ddpkit.doctor.log.causes.launchers_conflict import LaunchersConflict
from ddpkit.doctor.log.causes.loader_worker import LoaderWorkerKilled
from ddpkit.doctor.log.causes.loopback import Loopback
from ddpkit.doctor.log.causes.master_address import MasterAddress
from ddpkit.doctor.log.causes.misplaced_option import MisplacedOption
from ddpkit.doctor.log.causes.mpi_launcher_arguments import MpiLauncherArguments
from ddpkit.doctor.log.causes.nccl_result import NcclResult
from ddpkit.doctor.log.causes.no_backend import NoBackend
from ddpkit.doctor.log.causes.no_gpu import NoGpu
from ddpkit.doctor.log.causes.no_route import NoRoute
from ddpkit.doctor.log.causes.node_never_joined import NodeNeverJoined
from ddpkit.doctor.log.causes.node_rank_claims import NodeRankClaims
from ddpkit.doctor.log.causes.nvls_bind import NvlsBind
from ddpkit.doctor.log.causes.open_mpi_tcp import OpenMpiTcp
from ddpkit.doctor.log.causes.own_failure import OwnFailure
from ddpkit.doctor.log.causes.parallel_layout import ParallelLayout
from ddpkit.doctor.log.causes.peer_access import PeerAccess
from ddpkit.doctor.log.causes.port_zero import PortZero
from ddpkit.doctor.log.causes.pyspy_dump import PySpyDump
from ddpkit.doctor.log.causes.raise_site import RaiseSite
from ddpkit.doctor.log.causes.rank_claims import RankClaims
from ddpkit.doctor.log.causes.rank_never_joined import RankNeverJoined
from ddpkit.doctor.log.causes.rdma_completion import RdmaCompletion
from ddpkit.doctor.log.causes.resolved_later import ResolvedLater
from ddpkit.doctor.log.causes.restarted_workers import RestartedWorkers
from ddpkit.doctor.log.causes.restarts import RendezvousRestarts
from ddpkit.doctor.log.causes.service_mesh import ServiceMesh
from ddpkit.doctor.log.causes.shared_device import SharedDevice
from ddpkit.doctor.log.causes.shm_full import ShmFull
from ddpkit.doctor.log.causes.shm_small import ShmSmall
from ddpkit.doctor.log.causes.silent_kill import SilentKill
from ddpkit.doctor.log.causes.spawned_failure import SpawnedFailure
from ddpkit.doctor.log.causes.ssh_unresolved import SshUnresolved
from ddpkit.doctor.log.causes.stale_store import StaleStore
from ddpkit.doctor.log.causes.store_address import StoreAddress
from ddpkit.doctor.log.causes.store_arguments import StoreArguments
from ddpkit.doctor.log.causes.store_lost_meeting import StoreLostMeeting
from ddpkit.doctor.log.causes.store_port_forbidden import StorePortForbidden
from ddpkit.doctor.log.causes.store_without_libuv import StoreWithoutLibuv
from ddpkit.doctor.log.causes.topology_file import TopologyFile
from ddpkit.doctor.log.causes.torch_api_missing import TorchApiMissing
from ddpkit.doctor.log.causes.unhandled_cuda import UnhandledCuda
from ddpkit.doctor.log.causes.unique_id_wait import UniqueIdWait
from ddpkit.doctor.log.causes.unset_variable import UnsetVariable
from ddpkit.doctor.log.causes.versions_differ import VersionsDiffer
from ddpkit.doctor.log.causes.worker_store_override import WorkerStoreOverride
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.rules.entry import evaluate
from ddpkit.doctor.log.rules.order import CATALOGUE_RULES, RULES
from ddpkit.doctor.log.rules.reading import Reading
from ddpkit.doctor.log.rules.unexplained import warning_line
from ddpkit.doctor.log.scan import Event

CAUSES: tuple[type[Cause], ...] = (
    PortZero, MasterAddress, Loopback, WorkerStoreOverride, ContainerBridge, StaleStore,
    EndpointWithoutPort, EmptyAddress,
    RendezvousRestarts, LoaderWorkerKilled, SilentKill, BusError, PeerAccess, Firewall, ShmFull,
    ShmSmall,
    RdmaCompletion,
    ResolvedLater, NoBackend, AddressFamily, UnsetVariable, DeviceOrdinal, SharedDevice, NvlsBind,
    ConfigUndefined,
    UnhandledCuda, CudaMeaning, KernelFault, NcclResult, RankClaims, NoRoute, OpenMpiTcp, StoreWithoutLibuv,
    CommunicatorDevice, DdpChecks, InPlaceChange, CollectiveMismatch, BuildLibrary, NoGpu,
    CudaCheck, GpuAssert, InternalAssert, DdpOptimizer, VersionsDiffer, CudaToolkit, LauncherArguments,
    MpiLauncherArguments, BarrierWaiting,
    TorchApiMissing, RaiseSite, GlooNoAddress, GpuBuild, StoreAddress, SshUnresolved,
    CollectiveCheck, MisplacedOption, StorePortForbidden, GlooHostname, ParallelLayout,
    StoreArguments, EmptyRankValue,
    UniqueIdWait, IpoibWithoutVerbs, TopologyFile, PySpyDump, OwnFailure, RankNeverJoined, SpawnedFailure,
    EmptyRankLog, RestartedWorkers, NodeNeverJoined, NodeRankClaims, StoreLostMeeting, CclLocalRank,
    C10dStoreHost, LaunchersConflict, GdrOneSide, ServiceMesh,
)

Scored = tuple[Finding, int]
# (finding, priority, the ids it supersedes, the ids it yields to, whether it reads its lines more
# closely than the message catalogue: a specificity above 0)
CauseFinding = tuple[Finding, int, frozenset[str], frozenset[str], bool]


class Causes:
    """One instance of every cause of the table, fed the events that carry what it needs."""

    def __init__(self) -> None:
        self.causes = tuple(cause() for cause in CAUSES)
        # the causes that need one of a set of fact kinds (a log repeats few such sets)
        self._needing: dict[frozenset[FactKind], tuple[Cause, ...]] = {}
        # the causes that need no fact, by the event kinds they read (every event of those)
        self._reading: dict[str, tuple[Cause, ...]] = {}
        for cause in self.causes:
            if not cause.needs:
                for kind in cause.kinds:
                    self._reading[kind] = (*self._reading.get(kind, ()), cause)

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        kinds = frozenset(f.kind for f in facts)
        needing = self._needing.get(kinds)
        if needing is None:
            needing = tuple(c for c in self.causes if c.needs & kinds)
            if len(self._needing) < 256:
                self._needing[kinds] = needing
        for cause in needing:
            if not cause.kinds or event.kind in cause.kinds:
                cause.feed(event, facts)
        for cause in self._reading.get(event.kind, ()):
            cause.feed(event, facts)

    def findings(self, context: Context) -> list[CauseFinding]:
        """The :data:`CauseFinding` of every cause that fires."""
        out = []
        for cause in self.causes:
            finding = cause.finding(context)
            if finding is not None:
                out.append((finding, entry(finding.id).priority + cause.specificity,
                            cause.supersedes, (cause.yields_to | {finding.id}) - cause.supersedes,
                            cause.specificity > 0))
        return out


def judge(reading: Reading, causes: Causes) -> list[Finding]:
    """The table on a whole reading: every entry of ``RULES`` in its order, asked when its
    conditions hold, then every cause, in the one ranking."""
    hits = evaluate(RULES, reading)
    found = [(finding, priority) for _rule, finding, priority in hits]
    # the message catalogue's reading of a line (its template's finding, with its general words)
    read_by_catalogue = [finding for rule, finding, _p in hits if rule in CATALOGUE_RULES]
    context = reading.context()
    return rank(found, causes.findings(context), context.failed, read_by_catalogue)


def rank(scored: list[Scored], causes: list[CauseFinding],
         failed: bool, read_by_catalogue: Sequence[Finding] = ()) -> list[Finding]:
    """The one order of findings: the causes' findings replace those they supersede and the
    other rules' findings of their own id (but give way to another rule's error of their own
    id or of an id they yield to; a cause of its own words, a specificity above 0, not to the
    message catalogue's reading of a line under its own id, which it reads more closely; not to
    a rule's error that another firing cause supersedes, unless a firing cause gave its id); a
    cause's finding of an id another cause names among those it supersedes (beyond the generic
    ones) is replaced too; an
    error from warning-level lines needs a failure in the logs (without one it is at most a
    warning); two causes of one id give one finding, the likelier; then errors before warnings
    before info, higher priority first, then where the evidence starts."""
    errors = {f.id for f, _p in scored if f.severity == "error"}
    # ids whose only error is the message catalogue's reading of a line: a cause of its own words
    # and of that id reads the line more closely (it still gives way to the catalogue's other ids)
    catalogue_only = errors - {f.id for f, _p in scored if f.severity == "error"
                               and not any(f is r for r in read_by_catalogue)}

    def says_more(errors: set[str]) -> list[CauseFinding]:
        return [c for c in causes  # another rule's error says more
                if not c[3] & (errors - (catalogue_only & {c[0].id} if c[4] else set()))]

    # a rule's error that a firing cause supersedes is dropped, so it says no more: the causes
    # that gave way to it alone add their findings, of ids no firing cause gave (a loopback
    # refusal that a restart explains no longer hides the first attempt's failure)
    firing = says_more(errors)
    given = {c[0].id for c in firing}
    firing += [c for c in says_more(errors - frozenset().union(*(c[2] for c in firing)))
               if c[0].id not in given]
    dropped = frozenset().union(*(c[2] | {c[0].id} for c in firing)) if firing else frozenset()
    kept = [(f, p) for f, p in scored if f.id not in dropped]
    # a cause that names another cause's id among those it supersedes (beyond the generic ones,
    # which every cause supersedes) explains that finding too, unless each names the other's
    firing = [c for c in firing
              if not any(d[0].id != c[0].id and c[0].id in d[2] - GENERIC and d[0].id not in c[2]
                         for d in firing)]
    best: dict[str, tuple[Finding, int]] = {}  # one finding per id of the causes: the likeliest
    for f, p, _s, _y, _c in firing:
        if f.id not in best or (f.severity == "error", p) > (best[f.id][0].severity == "error",
                                                            best[f.id][1]):
            best[f.id] = (f, p)
    kept += best.values()
    if not failed:
        kept = [(_at_most_warning(f), p) for f, p in kept]
    kept.sort(key=_order)
    return [finding for finding, _score in kept]


def _at_most_warning(finding: Finding) -> Finding:
    """An error whose every line was printed at warning level, in logs that show no failure,
    is a warning (a finding from facts that contradict each other keeps its severity)."""
    if finding.severity != "error" or not finding.evidence or not all(
            warning_line(e.text) for e in finding.evidence):
        return finding
    return Finding(finding.id, "warning", finding.title, finding.explanation, finding.fix,
                   finding.evidence)


def _order(item: Scored) -> tuple[int, int, str, int]:
    finding, priority = item
    first = finding.evidence[0] if finding.evidence else None
    return (SEVERITY_ORDER[finding.severity], -priority, first.file if first else "",
            first.line if first else 0)
