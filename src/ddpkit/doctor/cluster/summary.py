"""Pure: a cluster report for many nodes, by exception (what is wrong, by node and interface).

A 32-node matrix has 32·31 cells per interface pair: no terminal shows it. Past ``SCALE_NODES``
nodes the human report says, per (interface -> peer interface), which nodes reach every peer they
probed and which fail to reach whom, nodes with the same answer on one row; ``--json`` keeps every
path (the matrix) and the probe figures.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ddpkit.doctor.cluster.matrix import CELL, Matrix
from ddpkit.doctor.cluster.model import NodeRecord, PathResult
from ddpkit.doctor.cluster.sampling import SAMPLE_ABOVE, SAMPLE_PEERS, all_pairs_count
from ddpkit.i18n import _
from ddpkit.wording import ranges

SCALE_NODES = 8  # up to this many nodes, the full matrix (or pair table); beyond, by exception
PEERS_NAMED = 4  # failing peers named on a row; more are counted
PROBLEMS_PER_ID = 3  # at scale, problems of one id shown in full; the rest counted


def compact_ranks(ranks: Iterable[int], prefix: str = "node") -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``node0-2,5,7-8``."""
    text = ranges(ranks)
    return prefix + text if text else ""


def probe_figures(matrix: Matrix, records: Sequence[NodeRecord]) -> dict[str, Any]:
    """How many probes were planned and made, against all pairs, and whether they were sampled."""
    made = [p for p in matrix.results() if p.status != "not-probed"]
    return {"sampled": matrix.sampled, "made": len(made),
            "planned": len(matrix.results()), "all_pairs": all_pairs_count(records),
            "sample_above_nodes": SAMPLE_ABOVE, "random_peers": SAMPLE_PEERS}


def probe_line(figures: Mapping[str, Any]) -> str:
    """The probe figures (:func:`probe_figures`, or a report's JSON ``probes``) in one sentence."""
    if figures.get("sampled"):
        return _("{made} probes, sampled (above {above} nodes: each node's ring neighbours, "
                 "{k} random peers, every peer on another subnet) of {all} for all pairs",
                 made=figures.get("made"), above=figures.get("sample_above_nodes"),
                 k=figures.get("random_peers"), all=figures.get("all_pairs"))
    return _("{made} probes: every pair of nodes, every interface pair", made=figures.get("made"))


def _cell_text(failures: dict[str, list[int]], probed: int) -> str:
    if not failures:
        return _("ok to all {count} probed", count=probed)
    parts = []
    for status, peers in sorted(failures.items()):
        if len(peers) == probed:
            parts.append(_("{status} to all {count}", status=CELL[status], count=probed))
        elif len(peers) <= PEERS_NAMED:
            parts.append(_("{status} to {peers}", status=CELL[status],
                           peers=compact_ranks(peers)))
        else:
            parts.append(_("{status} to {count} of {probed}", status=CELL[status],
                           count=len(peers), probed=probed))
    return "; ".join(parts)


def reach_rows(paths: Iterable[PathResult]) -> list[tuple[str, str, str]]:
    """(interface -> peer interface, nodes, result), nodes with equal answers merged: failing rows
    first, those of fewer nodes first."""
    cells: dict[tuple[int, str, str], tuple[dict[str, list[int]], int]] = {}
    for path in paths:
        key = (path.src, path.src_ifname, path.dst_ifname)
        failures, probed = cells.get(key, ({}, 0))
        if path.status != "ok":
            failures.setdefault(path.status, []).append(path.dst)
        cells[key] = (failures, probed + 1)
    grouped: dict[tuple[bool, str, str, str], list[int]] = defaultdict(list)
    for (rank, ifname, peer_ifname), (failures, probed) in cells.items():
        grouped[(not failures, ifname, peer_ifname, _cell_text(failures, probed))].append(rank)
    # failing rows first, the fewest nodes first: one bad node before the trap every node has
    ordered = sorted(grouped.items(),
                     key=lambda item: (item[0][0], len(item[1]), *item[0][1:3], min(item[1])))
    return [(f"{a}->{b}", compact_ranks(ranks), text) for (_ok, a, b, text), ranks in ordered]


def node_groups(nodes: Iterable[tuple[int, Sequence[str]]]) -> list[tuple[str, str]]:
    """(nodes, their candidate interfaces by name) from (rank, interface names), nodes with the
    same names on one row."""
    groups: dict[str, list[int]] = defaultdict(list)
    for rank, ifnames in nodes:
        groups[", ".join(ifnames) or _("none")].append(rank)
    return [(compact_ranks(ranks), names) for names, ranks in
            sorted(groups.items(), key=lambda item: min(item[1]))]


def shown_problems(ids: Sequence[str]) -> tuple[list[int], dict[str, int]]:
    """At scale, which problems to show (indexes into ``ids``, each problem's id): the first
    ``PROBLEMS_PER_ID`` of each id; and how many more each id has (one unreachable node makes N-1
    pair problems: the reachability rows already name it)."""
    shown: list[int] = []
    more: dict[str, int] = {}
    seen: dict[str, int] = {}
    for index, problem_id in enumerate(ids):
        seen[problem_id] = seen.get(problem_id, 0) + 1
        if seen[problem_id] <= PROBLEMS_PER_ID:
            shown.append(index)
        else:
            more[problem_id] = more.get(problem_id, 0) + 1
    return shown, more
