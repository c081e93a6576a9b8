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
from ddpkit.i18n import _, _n
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
    return _n("node {ranks}", "nodes {ranks}", len(ranks), ranks=", ".join(str(r) for r in ranks))


def missing_problem(missing: Sequence[int], nnodes: int, master: str, timeout_s: float,
                    present: Sequence[int]) -> Problem:
    shown = ", ".join(str(r) for r in present) or _("none")
    message = _("{nodes} did not show up at the master's store {master} within {timeout:g} s "
                "(present: {shown} of {nnodes})", nodes=_nodes(missing), master=master,
                timeout=timeout_s, shown=shown, nnodes=nnodes)
    rank = missing[0]
    address = master.rsplit(":", 1)[0].strip("[]")
    fix = _("start `ddpkit doctor --nnodes {nnodes} --node-rank {rank} --master-addr {address}` "
            "on node {rank} too, within --timeout of the others; if it did run, it cannot reach "
            "{master}: on that node check `ddpkit nics --to {address}` (is its private NIC up?) "
            "and that no firewall blocks the port", nnodes=nnodes, rank=rank, address=address,
            master=master)
    return Problem("rendezvous-timeout", "error", message, fix, tuple(missing))


def duplicate_problem(rank: int, hostnames: Sequence[str]) -> Problem:
    return Problem("rank-assignment", "error",
                   _("node rank {rank} was claimed by more than one node ({hostnames})",
                     rank=rank, hostnames=", ".join(hostnames)),
                   _("give every node its own --node-rank, 0 to N-1 (0 on the master)"), (rank,))


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
                _("node {rank} ({host}) showed up but never reported its probes (it stopped, or "
                  "lost the master's store)", rank=record.rank, host=record.hostname),
                _("run the command again; if it repeats, look at node {rank}'s output",
                  rank=record.rank),
                (record.rank,)))
        elif report.skipped:
            found.append(Problem("connection-lost", "error",
                                 _("node {rank} probed nothing: {why}", rank=record.rank,
                                   why=report.skipped),
                                 _("run the command again on every node"), (record.rank,)))
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
    if not shown and matrix.sampled:
        return _("not probed (sampled); one of the two failed most of its probes on its network")
    return "; ".join(text for *_rest, text in sorted(shown)[:PATHS_SHOWN]) or _("nothing was "
                                                                                "probed")


def reachability_problems(records: Sequence[NodeRecord], matrix: Matrix,
                          verdict: Verdict) -> list[Problem]:
    by_rank = {r.rank: r for r in records}
    found = [Problem("interface-not-found", "error",
                     _("node {rank} ({host}) has no interface that is up with a routable "
                       "address: it cannot reach anyone", rank=r.rank, host=r.hostname),
                     _("on node {rank}: bring the private-network interface up and give it an "
                       "address (`ip addr`), then see `ddpkit nics`", rank=r.rank), (r.rank,))
             for r in records if not r.candidates]
    for left, right in verdict.unreachable:
        found.append(Problem(
            "peer-unreachable", "error",
            _("node {left} and node {right} cannot reach each other in both directions on any "
              "pair of interfaces ({paths})", left=left, right=right,
              paths=_pair_paths(matrix, by_rank[left], by_rank[right])),
            _("allow all TCP between the nodes on the private network (security group, "
              "firewall); check the route on node {left} with `ddpkit nics --to <node {right}'s "
              "private address>`", left=left, right=right), (left, right)))
    if not verdict.unreachable and len(records) == verdict.nnodes and not verdict.ok:
        found.append(Problem(
            "peer-unreachable", "error",
            _("every two nodes reach each other somehow, but no choice of one interface per "
              "node reaches every peer (the working paths use different networks for different "
              "pairs)"),
            _("put every node on one private network that all of them reach, then run this "
              "again"),
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
            _("{ifname} {address} is the same address on {nodes} and reaches no peer (a "
              "container/NAT address): not counted. NCCL's bootstrap, and Gloo through the "
              "hostname, pick such an address when nothing pins the interface", ifname=ifname,
              address=address, nodes=_nodes(ranks)),
            _("pin the interface on every node with the lines under 'verdict'"), tuple(ranks)))
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
        command = f"ddpkit nccl-conf set NCCL_SOCKET_IFNAME=={ifname}"
        fix = _("on node {rank}: {command}", rank=record.rank, command=command)
        if nccl is not None and len(nccl) > 1:
            selected = matching_interfaces(nccl, names)
            if ifname not in selected:
                found.append(Problem(
                    "interface-not-found" if not selected else "wrong-interface", "error",
                    _("node {rank} has NCCL_SOCKET_IFNAME={nccl}, which selects {selected} "
                      "there; its working interface is {ifname}", rank=record.rank, nccl=nccl,
                      selected=", ".join(selected) or _("no interface"), ifname=ifname),
                    fix, (record.rank,)))
            elif len(selected) > 1:
                found.append(Problem(
                    "wrong-interface", "warning",
                    _("node {rank} has NCCL_SOCKET_IFNAME={nccl}, which selects {selected}: "
                      "NCCL's bootstrap takes the first, which may not be {ifname}",
                      rank=record.rank, nccl=nccl, selected=", ".join(selected), ifname=ifname),
                    fix, (record.rank,)))
        gloo = env.get("GLOO_SOCKET_IFNAME")
        if gloo and ifname not in gloo.split(","):
            export = f"export GLOO_SOCKET_IFNAME={ifname}"
            found.append(Problem(
                "interface-not-found" if not set(gloo.split(",")) & set(names)
                else "wrong-interface", "error",
                _("node {rank} has GLOO_SOCKET_IFNAME={gloo}; its working interface is "
                  "{ifname}", rank=record.rank, gloo=gloo, ifname=ifname),
                _("on node {rank}: {command}", rank=record.rank, command=export),
                (record.rank,)))
    return found


def difference_problems(differences: Sequence[Difference]) -> list[Problem]:
    out = []
    for difference in differences:
        if difference.severity == "info":
            continue
        if difference.finding == "version-mismatch":
            fix = _("install the same {field} version on every node", field=difference.field)
        elif difference.field.startswith(("NCCL_", "GLOO_")):
            fix = _("give {field} one value on every node (or unset it everywhere); `ddpkit "
                    "nccl-conf show` on a node says where its value comes from",
                    field=difference.field)
        else:
            fix = _("make the nodes alike, or size each node's job to what it has")
        if difference.field == "hostname":
            fix = _("give every node a unique hostname (hostnamectl set-hostname node1)")
        out.append(Problem(difference.finding, difference.severity, difference.explanation, fix,
                           tuple(r for r, _value in difference.values)))
    return out


def ordered(problems: Sequence[Problem]) -> tuple[Problem, ...]:
    """Most severe first; stable otherwise (the order the checks found them in)."""
    return tuple(sorted(problems, key=lambda p: SEVERITY_ORDER[p.severity]))
