"""What the init sequence says when no line names the cause (issue 12): a hang read from where each
machine stopped, and a bare NCCL system error read from which machines' ranks appear at all.

Both are inferences from :class:`~ddpkit.doctor.log.init_model.InitModel`, worded as such: the text says
what the log shows and why that points where it points.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import entry
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.evidence import Bag, display_origin, merge
from ddpkit.doctor.log.init_model import InitModel
from ddpkit.doctor.wording import specific_then_general
from ddpkit.i18n import _, _n

_SYSTEM_ERROR = ("unhandled system error", "ncclSystemError")


def _ranks_text(ranks: list[int]) -> str:
    shown = ", ".join(map(str, ranks[:8])) + (" ..." if len(ranks) > 8 else "")
    return _n("rank {ranks}", "ranks {ranks}", len(ranks), ranks=shown)


def init_hang(init: InitModel, started: Bag, one_machine: bool) -> Finding:
    """NCCL started initialising a communicator, never finished, and nothing failed.

    Across machines a silent drop of packets (a firewall) is the usual cause. On one machine with
    several ranks nothing crosses a network: the GPUs talk over P2P/shared memory, and P2P broken
    by ACS or the IOMMU hangs exactly like this."""
    parts: list[str] = [_("NCCL init hangs: it started initialising a communicator and never "
                          "finished, and nothing failed.")]
    stopped = init.where_each_stopped()
    if stopped:
        parts.append(_("Where each machine stopped: {stopped}.", stopped=stopped))
    missing = init.missing_ranks()
    if missing and len(missing) < init.world:
        shown_ranks = ", ".join(map(str, missing[:8])) + (" ..." if len(missing) > 8 else "")
        parts.append(_n("Rank {ranks} of {world} never reached init in this log: start there "
                        "(its log, or whether it was launched at all).",
                        "Ranks {ranks} of {world} never reached init in this log: start there "
                        "(its log, or whether it was launched at all).", len(missing),
                        ranks=shown_ranks, world=init.world))
    if one_machine:
        e = entry("p2p")
        parts.append(_("All its ranks run on one machine, so no packet crosses a network and a "
                       "firewall cannot explain it; the ranks reach each other over CUDA P2P or "
                       "shared memory, and P2P that the PCIe topology (ACS, the IOMMU) breaks "
                       "stalls init silently (if the log was cut off early, this is a guess)."))
    else:
        e = entry("firewall")
        parts.append(_("A silent drop of packets between the nodes looks exactly like this (if "
                       "the log was cut off early, this is a guess)."))
    shown = merge(started.items, init.placed_bag.items) if one_machine else merge(started.items)
    return Finding(e.id, "warning", e.title, specific_then_general(parts, e.explanation), e.fix,
                   shown)


def unreached_peers(init: InitModel, nccl_errors: set[str], errors: Bag, started: Bag,
                    machines: int) -> Finding | None:
    """NCCL init failed with a bare system error, and the ranks that started init are a part of a
    larger communicator, all on the one machine this log shows: the rest run on a machine the
    log does not show, and a system error during init is a socket call failing, so the likeliest
    cause is that the two machines cannot reach each other (or the other one failed first)."""
    if not any(marker in detail for detail in nccl_errors for marker in _SYSTEM_ERROR):
        return None
    hosts = [origin for origin, progress in init.progress.items() if progress.stage >= 2]
    missing = init.missing_ranks()
    if len(hosts) != 1 or machines > 1 or not missing or len(missing) >= init.world:
        return None
    seen = sorted(int(r) for r in init.ranks_started if r.isdigit())
    e = entry("peer-unreachable")
    text = _("NCCL init failed with an unhandled system error on {host}, where {seen} of a "
             "{world}-rank communicator started init; {missing} never appear in this log: they "
             "run on another machine. A system error during NCCL init is a socket call that "
             "failed, so the likeliest cause is that this machine and that one cannot reach each "
             "other (an interface the other cannot reach, a firewall, a wrong address), or that "
             "the other machine failed first: read its log.", host=display_origin(hosts[0]),
             seen=_ranks_text(seen), world=init.world, missing=_ranks_text(missing))
    fix = _("Check the path between the machines and the interface NCCL uses on each:\n"
            "  ddpkit nics --to <the other machine's address>\n"
            "  export NCCL_SOCKET_IFNAME==<the interface both machines share> (on every node)\n"
            "then rerun with NCCL_DEBUG=INFO on every node and give all logs to ddpkit doctor "
            "--log.")
    return Finding(e.id, e.severity, e.title, specific_then_general(text, e.explanation), fix,
                   merge(errors.items, started.items))
