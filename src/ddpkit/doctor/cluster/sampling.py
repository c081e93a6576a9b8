"""Pure: which peers a node probes, all of them or (above ``SAMPLE_ABOVE`` nodes) a sample.

All pairs is N·(N-1) probes per interface pair, and every node then reads every node's results:
the probing grows as N², what the meeting store carries as N³ (measured in benchmarks/scale_sim.py
and docs/sim.md). Above the threshold each node probes:

- its ring neighbours (rank - 1 and rank + 1): every node is dialled and dials at least twice;
- ``SAMPLE_PEERS`` peers drawn at random, from a seed every node derives from the run's nonces (so
  every node, and the report, computes the same plan);
- every peer whose networks differ from its own (a pair that crosses a subnet: where routes,
  firewalls and NAT break).

A pair that was not probed counts as reachable when both interfaces are on the same network and
each is *healthy*: most probes it made, and most made to it, on that network succeeded (a broken NIC
fails all of its own probes and every probe to it, so it is never assumed to work; a peer of it
fails only the one probe to it).
"""

from __future__ import annotations

import hashlib
import ipaddress
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ddpkit.doctor.cluster.model import Candidate, NodeRecord, PathResult

SAMPLE_ABOVE = 16  # nodes; up to this many, every pair is probed (see module docstring)
SAMPLE_PEERS = 3  # random peers per node on top of the ring and the subnet-crossing peers

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def network_of(candidate: Candidate) -> Network | None:
    if candidate.prefixlen is None:
        return None
    return ipaddress.ip_network(f"{candidate.address}/{candidate.prefixlen}", strict=False)


def is_sampled(nnodes: int) -> bool:
    return nnodes > SAMPLE_ABOVE


def _networks(record: NodeRecord) -> frozenset[Network | None]:
    return frozenset(network_of(c) for c in record.candidates)


def _seed(records: Sequence[NodeRecord], rank: int) -> int:
    digest = hashlib.sha256("/".join(sorted(r.nonce for r in records)).encode())
    return int.from_bytes(digest.digest()[:8], "big") ^ rank


def probed_peers(me: NodeRecord, records: Iterable[NodeRecord]) -> frozenset[int]:
    """The ranks ``me`` dials: every other node, or the sample (ring, random, subnet-crossing)."""
    nodes = sorted(records, key=lambda r: r.rank)
    others = [r.rank for r in nodes if r.rank != me.rank]
    if not is_sampled(len(nodes)):
        return frozenset(others)
    ranks = [r.rank for r in nodes]
    position = ranks.index(me.rank) if me.rank in ranks else 0
    chosen = {ranks[(position - 1) % len(ranks)], ranks[(position + 1) % len(ranks)]}
    rest = sorted(set(others) - chosen)
    chosen |= set(random.Random(_seed(nodes, me.rank)).sample(rest, min(SAMPLE_PEERS, len(rest))))
    mine = _networks(me)
    chosen |= {r.rank for r in nodes if r.rank != me.rank and _networks(r) != mine}
    chosen.discard(me.rank)
    return frozenset(chosen)


def all_pairs_count(records: Sequence[NodeRecord]) -> int:
    """How many probes all pairs would be (same address family only, as planned)."""
    return sum(1 for me in records for peer in records if peer.rank != me.rank
               for a in me.candidates for b in peer.candidates if a.family == b.family)


@dataclass(frozen=True)
class Inference:
    """Whether a pair nobody probed may be counted as reachable (see the module docstring)."""

    networks: dict[tuple[int, str], Network | None]
    sick: frozenset[tuple[int, str]]  # (rank, interface) that failed most probes on its network

    @classmethod
    def build(cls, records: Sequence[NodeRecord], results: Iterable[PathResult]) -> Inference:
        networks = {(r.rank, c.ifname): network_of(c) for r in records for c in r.candidates}
        tried: dict[tuple[int, str], int] = {}
        failed: dict[tuple[int, str], int] = {}
        for path in results:
            src, dst = (path.src, path.src_ifname), (path.dst, path.dst_ifname)
            if networks.get(src) is None or networks.get(src) != networks.get(dst):
                continue
            for end in (src, dst):
                tried[end] = tried.get(end, 0) + 1
                failed[end] = failed.get(end, 0) + (not path.ok)
        # A failed probe is the fault of one end or the other: the end most of whose own probes
        # (made and received) failed. A dead NIC fails all of its own; its peers fail one each.
        sick = {end for end, count in tried.items() if 2 * failed.get(end, 0) >= count}
        return cls(networks, frozenset(sick))

    def reachable(self, src: int, src_ifname: str, dst: int, dst_ifname: str) -> bool:
        a, b = (src, src_ifname), (dst, dst_ifname)
        network = self.networks.get(a)
        return (network is not None and network == self.networks.get(b)
                and a not in self.sick and b not in self.sick)
