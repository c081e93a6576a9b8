"""Pure: what is wrong with the cluster, as problems with catalogue ids, severities and fixes.

The ids are the finding catalogue's (:mod:`ddpkit.doctor.catalogue`), so ``doctor --log`` and
cluster mode speak one vocabulary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ddpkit.doctor.cluster.fingerprint import Difference
from ddpkit.doctor.cluster.matrix import CELL, Matrix, reach_counts
from ddpkit.doctor.cluster.model import NodeRecord, ProbeReport
from ddpkit.doctor.cluster.verdict import Verdict
from ddpkit.doctor.findings import Severity
from ddpkit.ncclconf.ifname import matching_interfaces

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
PATHS_SHOWN = 4  # failed paths quoted per unreachable pair


@dataclass(frozen=True)
class Problem:
    id: str  # a finding catalogue id
    severity: Severity
    message: str
    fix: str
    nodes: tuple[int, ...] = ()  # the nodes it is about

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "severity": self.severity, "message": self.message,
                "fix": self.fix, "nodes": list(self.nodes)}


def _nodes(ranks: Sequence[int]) -> str:
    return f"node{'s' if len(ranks) > 1 else ''} {', '.join(str(r) for r in ranks)}"


def missing_problem(missing: Sequence[int], nnodes: int, master: str, timeout_s: float,
                    present: Sequence[int]) -> Problem:
    shown = ", ".join(str(r) for r in present) or "none"
    message = (f"{_nodes(missing)} did not show up at the master's store {master} within "
               f"{timeout_s:g} s (present: {shown} of {nnodes})")
    rank = missing[0]
    address = master.rsplit(":", 1)[0].strip("[]")
    fix = (f"start `ddpkit doctor --nnodes {nnodes} --node-rank {rank} --master-addr {address}` "
           f"on node {rank} too, within --timeout of the others; if it did run, it cannot reach "
           f"{master}: on that node check `ddpkit nics --to {address}` (is its private NIC up?) "
           "and that no firewall blocks the port")
    return Problem("rendezvous-timeout", "error", message, fix, tuple(missing))


def duplicate_problem(rank: int, hostnames: Sequence[str]) -> Problem:
    return Problem("rank-assignment", "error",
                   f"node rank {rank} was claimed by more than one node "
                   f"({', '.join(hostnames)})",
                   "give every node its own --node-rank, 0 to N-1 (0 on the master)", (rank,))


def silent_problems(records: Sequence[NodeRecord], reports: Mapping[int, ProbeReport],
                    any_missing: bool) -> list[Problem]:
    """Nodes that came but never reported their probes (or gave up for another reason).

    Nothing when nodes are missing: then nobody probes, and the missing nodes are the problem.
    """
    found: list[Problem] = []
    if any_missing:
        return found
    for record in records:
        report = reports.get(record.rank)
        if report is None:
            found.append(Problem(
                "connection-lost", "error",
                f"node {record.rank} ({record.hostname}) showed up but never reported its probes "
                "(it stopped, or lost the master's store)",
                f"run the command again; if it repeats, look at node {record.rank}'s output",
                (record.rank,)))
        elif report.skipped:
            found.append(Problem("connection-lost", "error",
                                 f"node {record.rank} probed nothing: {report.skipped}",
                                 "run the command again on every node", (record.rank,)))
    return found


def _pair_paths(matrix: Matrix, left: NodeRecord, right: NodeRecord) -> str:
    """The paths between two nodes, interfaces without traps first, both directions."""
    shown: list[tuple[bool, int, str]] = []
    for src, dst in ((left, right), (right, left)):
        for a in src.candidates:
            for b in dst.candidates:
                path = matrix.get(src.rank, a.ifname, dst.rank, b.ifname)
                if path is not None:
                    shown.append((bool(a.traps or b.traps), len(shown),
                                  f"node{src.rank} {a.ifname} -> node{dst.rank} {b.ifname} "
                                  f"{b.address}: {CELL[path.status]}"))
    return "; ".join(text for *_, text in sorted(shown)[:PATHS_SHOWN]) or "nothing was probed"


def reachability_problems(records: Sequence[NodeRecord], matrix: Matrix,
                          verdict: Verdict) -> list[Problem]:
    by_rank = {r.rank: r for r in records}
    found = [Problem("interface-not-found", "error",
                     f"node {r.rank} ({r.hostname}) has no interface that is up with a routable "
                     "address: it cannot reach anyone",
                     f"on node {r.rank}: bring the private-network interface up and give it an "
                     "address (`ip addr`), then see `ddpkit nics`", (r.rank,))
             for r in records if not r.candidates]
    for left, right in verdict.unreachable:
        found.append(Problem(
            "peer-unreachable", "error",
            f"node {left} and node {right} cannot reach each other in both directions on any "
            f"pair of interfaces ({_pair_paths(matrix, by_rank[left], by_rank[right])})",
            f"allow all TCP between the nodes on the private network (security group, firewall); "
            f"check the route on node {left} with `ddpkit nics --to <node {right}'s private "
            "address>`", (left, right)))
    if not verdict.unreachable and len(records) == verdict.nnodes and not verdict.ok:
        found.append(Problem(
            "peer-unreachable", "error",
            "every two nodes reach each other somehow, but no choice of one interface per node "
            "reaches every peer (the working paths use different networks for different pairs)",
            "put every node on one private network that all of them reach, then run this again",
            tuple(sorted(by_rank))))
    return found


def trap_problems(records: Sequence[NodeRecord], matrix: Matrix) -> list[Problem]:
    """Addresses shared by several nodes (the NAT eth0 trap) that reach no peer: not counted."""
    holders: dict[tuple[str, str], list[int]] = {}
    for record in records:
        counts = reach_counts(record, records, matrix)
        for candidate in record.candidates:
            if counts[candidate.ifname] == 0:
                holders.setdefault((candidate.ifname, candidate.address), []).append(record.rank)
    found = []
    for (ifname, address), ranks in sorted(holders.items()):
        if len(ranks) < 2:
            continue
        found.append(Problem(
            "wrong-interface", "info",
            f"{ifname} {address} is the same address on {_nodes(ranks)} and reaches no peer "
            "(a container/NAT address): not counted. NCCL's bootstrap, and Gloo through the "
            "hostname, pick such an address when nothing pins the interface",
            "pin the interface on every node with the lines under 'verdict'", tuple(ranks)))
    return found


def setting_problems(records: Sequence[NodeRecord], verdict: Verdict) -> list[Problem]:
    """A node whose NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME would not select its working NIC."""
    chosen = {c.rank: c.ifname for c in verdict.choices}
    found = []
    for record in sorted(records, key=lambda r: r.rank):
        ifname = chosen.get(record.rank)
        if ifname is None:
            continue
        env = dict(record.fingerprint.env)
        names = [c.ifname for c in record.candidates]
        nccl = env.get("NCCL_SOCKET_IFNAME")
        fix = f"on node {record.rank}: ddpkit nccl-conf set NCCL_SOCKET_IFNAME=={ifname}"
        if nccl is not None and len(nccl) > 1:
            selected = matching_interfaces(nccl, names)
            if ifname not in selected:
                found.append(Problem(
                    "interface-not-found" if not selected else "wrong-interface", "error",
                    f"node {record.rank} has NCCL_SOCKET_IFNAME={nccl}, which selects "
                    f"{', '.join(selected) or 'no interface'} there; its working interface is "
                    f"{ifname}", fix, (record.rank,)))
            elif len(selected) > 1:
                found.append(Problem(
                    "wrong-interface", "warning",
                    f"node {record.rank} has NCCL_SOCKET_IFNAME={nccl}, which selects "
                    f"{', '.join(selected)}: NCCL's bootstrap takes the first, which may not be "
                    f"{ifname}", fix, (record.rank,)))
        gloo = env.get("GLOO_SOCKET_IFNAME")
        if gloo and ifname not in gloo.split(","):
            found.append(Problem(
                "interface-not-found" if not set(gloo.split(",")) & set(names)
                else "wrong-interface", "error",
                f"node {record.rank} has GLOO_SOCKET_IFNAME={gloo}; its working interface is "
                f"{ifname}", f"on node {record.rank}: export GLOO_SOCKET_IFNAME={ifname}",
                (record.rank,)))
    return found


def difference_problems(differences: Sequence[Difference]) -> list[Problem]:
    out = []
    for difference in differences:
        if difference.severity == "info":
            continue
        if difference.finding == "version-mismatch":
            fix = f"install the same {difference.field} version on every node"
        elif difference.field.startswith(("NCCL_", "GLOO_")):
            fix = (f"give {difference.field} one value on every node (or unset it everywhere); "
                   "`ddpkit nccl-conf show` on a node says where its value comes from")
        else:
            fix = "make the nodes alike, or size each node's job to what it has"
        if difference.field == "hostname":
            fix = "give every node a unique hostname (hostnamectl set-hostname node1)"
        out.append(Problem(difference.finding, difference.severity, difference.explanation, fix,
                           tuple(r for r, _ in difference.values)))
    return out


def ordered(problems: Sequence[Problem]) -> tuple[Problem, ...]:
    """Most severe first; stable otherwise (the order the checks found them in)."""
    return tuple(sorted(problems, key=lambda p: SEVERITY_ORDER[p.severity]))
