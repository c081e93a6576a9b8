"""Pure: the interface each node should use (names may differ per node), and the exact lines.

An assignment gives every node one of its candidates such that every two nodes' chosen interfaces
reach each other in both directions. The search tries each node's candidates in the node's own
order of preference (``ddpkit.net.select`` ranking, then how many peers a candidate reaches) and
backtracks with forward checking; candidates are few, so this stays small, and a step limit keeps
it bounded anyway.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ddpkit.doctor.cluster.matrix import Matrix, reach_counts
from ddpkit.doctor.cluster.model import Candidate, NodeRecord
from ddpkit.net.ports import DEFAULT_MASTER_PORT

SEARCH_STEP_LIMIT = 100_000
SCRIPT_PLACEHOLDER = "train.py"


@dataclass(frozen=True)
class Choice:
    rank: int
    ifname: str
    address: str

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "interface": self.ifname, "address": self.address}


@dataclass(frozen=True)
class NodeCommands:
    rank: int
    launch: str
    nccl_conf: str
    export: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Verdict:
    """``choices`` is empty when no assignment works; ``unreachable`` lists node pairs with no
    working path in both directions on any pair of their interfaces."""

    nnodes: int
    master_port: int
    choices: tuple[Choice, ...]
    unreachable: tuple[tuple[int, int], ...] = ()

    @property
    def ok(self) -> bool:
        return bool(self.choices) and len(self.choices) == self.nnodes

    @property
    def master_addr(self) -> str | None:
        return next((c.address for c in self.choices if c.rank == 0), None)

    @property
    def same_name(self) -> str | None:
        """The interface name when every node uses the same one."""
        names = {c.ifname for c in self.choices}
        return names.pop() if len(names) == 1 else None

    def commands(self) -> tuple[NodeCommands, ...]:
        master = self.master_addr
        if not self.ok or master is None:
            return ()
        port = "" if self.master_port == DEFAULT_MASTER_PORT else f" --master-port {self.master_port}"
        out = []
        for choice in self.choices:
            quoted = shlex.quote(choice.ifname)
            launch = (f"ddpkit launch --nnodes {self.nnodes} --node-rank {choice.rank} "
                      f"--master-addr {master}{port} --ifname {quoted} {SCRIPT_PLACEHOLDER}")
            out.append(NodeCommands(
                choice.rank, launch,
                f"ddpkit nccl-conf set NCCL_SOCKET_IFNAME=={quoted}",
                f"export NCCL_SOCKET_IFNAME=={quoted} GLOO_SOCKET_IFNAME={quoted}"))
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "master_addr": self.master_addr,
                "master_port": self.master_port,
                "interfaces": [c.to_dict() for c in self.choices],
                "same_interface_everywhere": self.same_name,
                "unreachable_pairs": [list(pair) for pair in self.unreachable],
                "commands": [c.to_dict() for c in self.commands()]}


def _domain(record: NodeRecord, nodes: Sequence[NodeRecord], matrix: Matrix) -> list[Candidate]:
    """The candidates of ``record`` that reach every other node, in order of preference."""
    counts = reach_counts(record, nodes, matrix)
    needed = len(nodes) - 1
    usable = [c for c in record.candidates if counts[c.ifname] == needed]
    return sorted(usable, key=lambda c: (c.preference, c.ifname))


def choose_interfaces(records: Sequence[NodeRecord], matrix: Matrix,
                      step_limit: int = SEARCH_STEP_LIMIT) -> tuple[Choice, ...] | None:
    """One candidate per node such that all chosen pairs work both ways; None if none exists."""
    nodes = sorted(records, key=lambda r: r.rank)
    domains = [_domain(r, nodes, matrix) for r in nodes]
    steps = 0
    chosen: list[Candidate] = []

    def fits(index: int, candidate: Candidate) -> bool:
        return all(matrix.both_ways(nodes[k].rank, chosen[k].ifname, nodes[index].rank,
                                    candidate.ifname) for k in range(index))

    def search(index: int, remaining: list[list[Candidate]]) -> bool:
        nonlocal steps
        if index == len(nodes):
            return True
        for candidate in remaining[index]:
            steps += 1
            if steps > step_limit:
                return False
            if not fits(index, candidate):
                continue
            chosen.append(candidate)
            pruned = remaining[:index + 1] + [
                [c for c in later if matrix.both_ways(nodes[index].rank, candidate.ifname,
                                                      nodes[j].rank, c.ifname)]
                for j, later in enumerate(remaining[index + 1:], start=index + 1)]
            if all(pruned[index + 1:]) and search(index + 1, pruned):
                return True
            chosen.pop()
        return False

    if not search(0, domains):
        return None
    return tuple(Choice(n.rank, c.ifname, c.address) for n, c in zip(nodes, chosen, strict=True))


def unreachable_pairs(records: Sequence[NodeRecord], matrix: Matrix) -> tuple[tuple[int, int], ...]:
    """Node pairs (low rank first) without any interface pair that works in both directions."""
    nodes = sorted(records, key=lambda r: r.rank)
    pairs = []
    for i, left in enumerate(nodes):
        for right in nodes[i + 1:]:
            if not any(matrix.both_ways(left.rank, a.ifname, right.rank, b.ifname)
                       for a in left.candidates for b in right.candidates):
                pairs.append((left.rank, right.rank))
    return tuple(pairs)


def decide(records: Sequence[NodeRecord], matrix: Matrix, nnodes: int,
           master_port: int = DEFAULT_MASTER_PORT) -> Verdict:
    """The verdict for the nodes present (no choices unless all ``nnodes`` nodes are)."""
    unreachable = unreachable_pairs(records, matrix)
    choices: tuple[Choice, ...] | None = None
    if len(records) == nnodes and not unreachable:
        choices = choose_interfaces(records, matrix)
    return Verdict(nnodes, master_port, choices or (), unreachable)
