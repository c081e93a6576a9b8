"""Pure: which probes to make, what an answer (or a socket error) means, and the all-pairs matrix.

A path from node i's interface A to node j's interface B counts only when node j's listener
answered (its nonce proves it was j, not some other node holding the same address, not i itself)
and saw exactly the source address i meant to use: anything else is NAT or a wrong route.
"""

from __future__ import annotations

import errno as errnos
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ddpkit.doctor.cluster.model import (
    Candidate,
    NodeRecord,
    PathResult,
    PathStatus,
    normalise_address,
)
from ddpkit.doctor.cluster.sampling import Inference, is_sampled, probed_peers

ECHO_SCHEMA = "ddpkit.doctor-echo/1"
ANSWER_LIMIT = 4096  # bytes of an answer read at most

# Short forms for the matrix cells.
CELL = {
    "ok": "ok", "refused": "refused", "timeout": "timeout", "no-route": "no-route",
    "no-source": "no-src", "self": "self", "other-node": "other", "nat": "nat",
    "bad-answer": "bad", "error": "error", "not-probed": "?",
}  # fmt: skip


@dataclass(frozen=True)
class ProbeTarget:
    """One probe to make: from this node's ``source`` to ``dst``'s ``target`` on ``port``."""

    source: Candidate
    dst: int
    target: Candidate
    port: int
    nonce: str  # what the right listener repeats


def echo_line(rank: int, nonce: str, saw: str) -> bytes:
    """The listener's answer: one line of JSON naming the node and the source address it saw."""
    body = {"schema": ECHO_SCHEMA, "rank": rank, "nonce": nonce, "saw": normalise_address(saw)}
    return json.dumps(body, sort_keys=True).encode() + b"\n"


def plan_probes(me: NodeRecord, peers: Iterable[NodeRecord]) -> tuple[ProbeTarget, ...]:
    """Every own candidate x every candidate of every other node (of the sample above
    ``sampling.SAMPLE_ABOVE`` nodes), same address family only."""
    nodes = list(peers)
    chosen = probed_peers(me, nodes)
    targets = []
    for peer in sorted(nodes, key=lambda p: p.rank):
        if peer.rank == me.rank or peer.rank not in chosen:
            continue
        for source in me.candidates:
            for target in peer.candidates:
                port = peer.port_for(target.family)
                if target.family == source.family and port is not None:
                    targets.append(ProbeTarget(source, peer.rank, target, port, peer.nonce))
    return tuple(targets)


def result_for(me: int, target: ProbeTarget, status: PathStatus, detail: str,
               seen: str | None = None) -> PathResult:
    return PathResult(me, target.source.ifname, target.source.address, target.dst,
                      target.target.ifname, target.target.address, status, detail, seen)


def classify_answer(me: int, target: ProbeTarget, answer: bytes,
                    nonces: Mapping[str, int]) -> PathResult:
    """The path result for what the listener at ``target`` sent back.

    ``nonces`` maps every node's nonce to its rank, to name which node answered instead.
    """
    first = answer[:ANSWER_LIMIT].split(b"\n", 1)[0]
    try:
        body = json.loads(first.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        body = None
    if not isinstance(body, dict) or body.get("schema") != ECHO_SCHEMA:
        shown = first[:60].decode("utf-8", "replace") or "nothing"
        return result_for(me, target, "bad-answer",
                          f"not a ddpkit doctor listener (answered {shown!r})")
    nonce, saw = body.get("nonce"), body.get("saw")
    seen = normalise_address(saw) if isinstance(saw, str) else None
    if nonce != target.nonce:
        who = nonces.get(nonce) if isinstance(nonce, str) else None
        if who == me:
            return result_for(me, target, "self",
                              f"{target.target.address} is also this node's own address", seen)
        if who is not None:
            return result_for(me, target, "other-node",
                              f"node {who} answered at {target.target.address}, not node "
                              f"{target.dst}", seen)
        return result_for(me, target, "bad-answer",
                          "a listener of another doctor run answered", seen)
    if seen != normalise_address(target.source.address):
        return result_for(me, target, "nat",
                          f"node {target.dst} saw the connection come from {seen}, not from "
                          f"{target.source.address} ({target.source.ifname}): NAT or a wrong "
                          "route", seen)
    return result_for(me, target, "ok", "", seen)


def classify_error(me: int, target: ProbeTarget, error_number: int | None,
                   timed_out: bool, text: str = "") -> PathResult:
    """The path result for a probe that failed with a socket error (or timed out)."""
    if timed_out:
        return result_for(me, target, "timeout", "no answer: packets dropped or a wrong route")
    if error_number == errnos.ECONNREFUSED:
        return result_for(me, target, "refused", "connection refused: nothing listens there")
    if error_number in (errnos.ENETUNREACH, errnos.EHOSTUNREACH):
        return result_for(me, target, "no-route", "no route to host from this source")
    if error_number == errnos.EADDRNOTAVAIL:
        return result_for(me, target, "no-source",
                          f"cannot bind {target.source.address} on this node")
    if error_number == errnos.ETIMEDOUT:
        return result_for(me, target, "timeout", "connection timed out")
    return result_for(me, target, "error", text or f"socket error {error_number}")


class Matrix:
    """All probe results of a run, indexed by (from, from interface, to, to interface)."""

    def __init__(self, results: Iterable[PathResult], assume: Inference | None = None) -> None:
        self._paths: dict[tuple[int, str, int, str], PathResult] = {}
        for result in results:
            self._paths[result.key] = result
        self.assume = assume  # a sampled run: how a pair nobody probed counts

    @property
    def sampled(self) -> bool:
        return self.assume is not None

    def get(self, src: int, src_ifname: str, dst: int, dst_ifname: str) -> PathResult | None:
        return self._paths.get((src, src_ifname, dst, dst_ifname))

    def ok(self, src: int, src_ifname: str, dst: int, dst_ifname: str) -> bool:
        path = self.get(src, src_ifname, dst, dst_ifname)
        if path is None and self.assume is not None:
            return self.assume.reachable(src, src_ifname, dst, dst_ifname)
        return path is not None and path.ok

    def both_ways(self, a: int, a_ifname: str, b: int, b_ifname: str) -> bool:
        """True when a's interface and b's interface reach each other in both directions."""
        return self.ok(a, a_ifname, b, b_ifname) and self.ok(b, b_ifname, a, a_ifname)

    def results(self) -> tuple[PathResult, ...]:
        return tuple(self._paths[key] for key in sorted(self._paths))


def complete_matrix(records: Sequence[NodeRecord], results: Iterable[PathResult]) -> Matrix:
    """The matrix with a ``not-probed`` entry for every planned probe nobody reported."""
    given = list(results)
    known = {r.key for r in given}
    for record in records:
        for target in plan_probes(record, records):
            key = (record.rank, target.source.ifname, target.dst, target.target.ifname)
            if key not in known:
                given.append(result_for(record.rank, target, "not-probed",
                                        f"node {record.rank} reported no result for this path"))
    return Matrix(given, Inference.build(records, given) if is_sampled(len(records)) else None)


def reach_counts(record: NodeRecord, records: Sequence[NodeRecord],
                 matrix: Matrix) -> dict[str, int]:
    """For each candidate of ``record``: how many other nodes it reaches both ways (any of theirs)."""
    counts = {}
    for candidate in record.candidates:
        counts[candidate.ifname] = sum(
            1 for peer in records if peer.rank != record.rank
            and any(matrix.both_ways(record.rank, candidate.ifname, peer.rank, other.ifname)
                    for other in peer.candidates))
    return counts
