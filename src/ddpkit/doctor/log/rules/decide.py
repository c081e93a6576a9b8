"""The findings of the table's entries that are not one rule family's own method.

Each function is an entry's ``make`` (:data:`ddpkit.doctor.log.rules.order.RULES`): it reads
the :class:`~ddpkit.doctor.log.rules.reading.Reading` and, in ``read``, the truth of the
conditions its entry ``reads``; when it is asked is its entry's business, not its own.
"""

from __future__ import annotations

from collections.abc import Callable

from ddpkit.doctor.catalogue import entry
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.end_lines import PG_SHUTDOWN
from ddpkit.doctor.log.evidence import Bag, merge, origins_text
from ddpkit.doctor.log.facts.kinds import CUDA_UNLOADED
from ddpkit.doctor.log.rules.init_phase import init_hang, unreached_peers
from ddpkit.doctor.log.rules.nodes import node_mismatch, versions
from ddpkit.doctor.log.rules.reading import Reading
from ddpkit.doctor.log.rules.shell_signals import bus_error_finding
from ddpkit.doctor.log.rules.simple import Facts, simple_finding
from ddpkit.doctor.wording import specific_then_general
from ddpkit.i18n import _, _n
from ddpkit.launch.torchrun.tracebacks import IGNORED_HEAD
from ddpkit.wording import commas, sentences

Read = tuple[bool, ...]
# Variables whose value may rightly differ per node (interface names do).
_PER_NODE_VARS = frozenset({"NCCL_SOCKET_IFNAME", "NCCL_DEBUG_FILE", "NCCL_IB_HCA"})


def simple(finding_id: str) -> Callable[[Reading, Read], Finding | None]:
    """The ``make`` of an entry for the lines of one kind (the scan's simple kinds)."""

    def make(r: Reading, read: Read) -> Finding | None:
        facts = r.simple.get(finding_id)
        return simple_finding(finding_id, facts) if facts else None

    return make


def firewall(r: Reading, read: Read) -> Finding | None:
    """``read``: (the gloo-loopback entry fired,)."""
    return r.net.firewall(r.net.unexplained_conns(r.multi_node, r.init_hung(), read[0]))


def peer_unreachable(r: Reading, read: Read) -> Finding | None:
    """``read``: (the gloo-loopback entry fired, a finding came before)."""
    rest = r.net.unexplained_conns(r.multi_node, r.init_hung(), read[0])
    return r.net.peer_unreachable(rest, read[1])


def rank_assignment(r: Reading, read: Read) -> Finding | None:
    e = entry("rank-assignment")
    facts = r.simple.get("rank-assignment")
    parts: list[str] = []
    bags: list[Bag] = []
    if facts:
        parts.append(_("NCCL's bootstrap root reports: {details}.",
                       details="; ".join(facts.details)))
        bags.append(facts.bag)
    if len(r.nranks.data) > 1:
        sizes = commas([_("{size} (on {hosts})", size=n, hosts=origins_text(o))
                        for n, o in sorted(r.nranks.items(), key=lambda i: int(i[0]))])
        parts.append(_("The ranks disagree on the world size: {sizes}.", sizes=sizes))
        bags.append(r.nranks_bag)
    duplicates = sorted(k[1] for k, v in r.comm_ranks.items() if len(v) > 1)
    if duplicates:
        parts.append(_n("Rank {ranks} was claimed by more than one machine in the same "
                        "communicator.", "Ranks {ranks} were claimed by more than one machine "
                        "in the same communicator.", len(duplicates),
                        ranks=", ".join(duplicates)))
        bags.append(r.duplicate_rank_bag)
    if not parts:
        return None
    return Finding(e.id, e.severity, e.title, specific_then_general(parts, e.explanation),
                   e.fix, merge(*(b.items for b in bags)))


def version_mismatch(r: Reading, read: Read) -> Finding | None:
    """``read``: (trouble,): the job failed or its init hung."""
    driver = r.simple.get("version-mismatch")
    return versions(r.init, driver.bag if driver else None, read[0])


def node_differences(r: Reading, read: Read) -> Finding | None:
    """``read``: (trouble, init hung)."""
    trouble, init_hung = read
    finding = node_mismatch(r.init, r.env.data, r.env_bag, r.host_addresses.data, r.host_bag,
                            _PER_NODE_VARS, trouble)
    stopped = r.init.where_each_stopped() if init_hung else ""
    if finding is None or not stopped or finding.severity != "error":
        return finding
    text = _("NCCL init hangs: {stopped}. {general}", stopped=stopped,
             general=finding.explanation)
    return Finding(finding.id, finding.severity, finding.title, text, finding.fix,
                   finding.evidence)


def p2p_suspect(r: Reading, read: Read) -> Finding | None:
    if not any(t.seq for t in r.job.timeouts) or any(
        values.get("NCCL_P2P_DISABLE") == "1" for values in r.env.data.values()
    ):
        return None
    e = entry("p2p")
    text = _("The NCCL watchdog fired in a job whose communicators span a single node with "
             "several GPUs, where the ranks talk over CUDA peer-to-peer: broken P2P is the "
             "usual cause of such hangs.")
    return Finding(e.id, "warning", e.title, specific_then_general(text, e.explanation), e.fix,
                   merge(r.job.timeout_bag.items, r.comm_started.items))


def peers_unreached(r: Reading, read: Read) -> Finding | None:
    return unreached_peers(r.init, r.job.nccl_errors, r.job.nccl_error_bag, r.comm_started,
                           len(r.machines))


def bus_error(r: Reading, read: Read) -> tuple[Finding, int] | None:
    """A rank that started the failure and died of SIGBUS, by its end in a run directory:
    shared memory, ahead of the rank it ended. (A death the log's lines report is the cause
    ``causes/bus_error.py``'s, as a SIGKILL's is ``causes/silent_kill.py``'s.)"""
    end = r.job.root_end()
    if end is None or not (end.is_cause and end.signal == "SIGBUS"):
        return None
    text = _("{who} died of SIGBUS.", who=_("Rank {rank} (host {host})", rank=end.rank,
                                             host=end.host))
    return bus_error_finding(text, ())


def waited_on(r: Reading) -> str:
    """What the job was doing when it was last heard of, as far as the log tells."""
    if r.comm_completed:
        return _("a collective or a later NCCL communicator: the first communicators had "
                 "been set up (Init COMPLETE)")
    if r.init_started():
        return _("NCCL init (ncclCommInitRank), which waits until every rank of the "
                 "communicator joins")
    stopped = r.init.where_each_stopped()
    if stopped:
        return _("NCCL's bootstrap, before any communicator started its init ({stopped})",
                 stopped=stopped)
    if r.init.placed:
        return _("nccl-tests, after it listed its ranks' devices and before its last line "
                 "(# Avg bus bandwidth)")
    return _("the rendezvous, process-group init or a collective: this log does not say "
             "which (no NCCL INFO lines; ddpkit launch --debug records them)")


def init_hung(r: Reading, read: Read) -> Finding:
    several_ranks = (len(r.init.ranks_started) > 1 or r.single_node_multi_gpu
                     or r.init.placed_on_one_host())
    one_machine = (len(r.machines) <= 1 and r.max_nodes <= 1
                   and not r.init.missing_ranks() and several_ranks)
    started = r.comm_started if r.comm_started else r.init.trees
    return init_hang(r.init, started, one_machine)


AT_EXIT_WHATS = (CUDA_UNLOADED, PG_SHUTDOWN, IGNORED_HEAD)  # the benign lines worded below


def _at_exit_words(benign: Facts) -> list[str]:
    """Sentences for the benign lines a process prints at its exit or for an exception Python
    ignored (rules/ignored.py), one a kind found."""
    words: list[str] = []
    if CUDA_UNLOADED in benign.one("what"):
        words.append(_(
            "The only error is CUDA's \"{what}\" (cudaErrorCudartUnloading): a CUDA call made "
            "while the process was exiting, after the CUDA runtime had unloaded (an object such "
            "as a Gloo or NCCL context destroyed late). It came after the process's work, though "
            "its exit status may be non-zero; the run itself shows no failure.",
            what=CUDA_UNLOADED))
    if PG_SHUTDOWN in benign.one("what"):
        words.append(_(
            "The only error is the one ProcessGroupNCCL set itself as it shut down (\"{what}\"): "
            "its shutdown (destroy_process_group() does it) aborts its communicators with that "
            "reason, and its watchdog may still report it. The program was tearing down after its "
            "work; the run itself shows no failure.",
            what=PG_SHUTDOWN))
    if IGNORED_HEAD in benign.one("what"):
        where = ", ".join(benign.one("object"))[:160]
        words.append(_(
            "Python reported an exception it ignored (\"{report}\"): CPython prints this for an "
            "exception it cannot raise, in a finalizer such as __del__ or at the interpreter's "
            "shutdown, and the process goes on; it is no failure of the run.",
            report=IGNORED_HEAD + ": " + where if where else IGNORED_HEAD))
    return words


def no_failure(r: Reading, read: Read) -> Finding:
    e = entry("no-failure")
    benign = r.simple.get("benign")
    done = r.run_end.completion_text()
    warned = r.run_end.warnings_text()  # (empty where the run's end was read)
    text = specific_then_general(done, e.explanation) if done else e.explanation
    if warned:  # the entry's NCCL words fit warnings only beside NCCL's own benign lines
        text = specific_then_general(warned, text) if benign else warned
    if benign:
        exits = _at_exit_words(benign)
        others = [w for w in benign.one("what") if w not in AT_EXIT_WHATS]
        if others:
            text = specific_then_general(
                _("Only benign lines were found ({count}: {what}).", count=benign.bag.count,
                  what=", ".join(others)), text)
        elif exits:  # (the NCCL lines the entry's text names are not in the log)
            text = sentences([t for t in (done, warned) if t])
        if exits:
            text = specific_then_general(exits, text) if text else sentences(exits)
    evidence = (*(benign.bag.items if benign else ()), *r.run_end.warnings.items)
    return Finding(e.id, e.severity, e.title, text, e.fix, merge(evidence))
