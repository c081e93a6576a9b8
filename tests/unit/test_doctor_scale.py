"""Cluster doctor at many nodes: sampled probing above the threshold, the report by exception.

Scenarios are networks as in test_doctor_cluster_verdict: a candidate reaches another when both sit
on the same (real) network and the pair is not broken; every node's eth0 is the container address
172.17.0.4/16, the same on each node and reaching no other node (answered by the node itself).
"""

from __future__ import annotations

import io
from dataclasses import replace

from ddpkit.cli.commands.doctor import _render_cluster
from ddpkit.cli.output.console import Console
from ddpkit.cli.output.width import display_width
from ddpkit.doctor.cluster import sampling
from ddpkit.doctor.cluster.matrix import complete_matrix, plan_probes, result_for
from ddpkit.doctor.cluster.model import Candidate, Fingerprint, NodeRecord, ProbeReport
from ddpkit.doctor.cluster.report import MeetingOutcome, build_report
from ddpkit.doctor.cluster.summary import compact_ranks, reach_rows

FP = Fingerprint("node", "3.11.7", "2.13.0", "n/a", "n/a", "n/a", None, "0.1.0")


def cluster(n: int, *, dead: frozenset[int] = frozenset(), subnet_of: dict[int, str] | None = None
            ) -> tuple[list[NodeRecord], list[ProbeReport]]:
    """``n`` nodes with eth0 (trap) and eth1 on 10.0.0.0/24 (or ``subnet_of[rank]``, reached
    through a router: still reachable); ``dead`` nodes' eth1 answers nobody and reaches nobody."""
    subnet_of = subnet_of or {}
    records = []
    for rank in range(n):
        prefix = subnet_of.get(rank, "10.0.0")
        records.append(NodeRecord(rank, n, f"nonce{rank}", (("ipv4", 5000),), (
            Candidate("eth1", f"{prefix}.{2 + rank}", "physical", 0, (), 24),
            Candidate("eth0", "172.17.0.4", "veth", 1, ("docker-default-subnet",), 16)),
            replace(FP, hostname=f"node{rank}")))
    reports = []
    for record in records:
        results = []
        for target in plan_probes(record, records):
            a, b = target.source.ifname, target.target.ifname
            if a == b == "eth0":
                results.append(result_for(record.rank, target, "self", ""))
                continue
            ok = a == b == "eth1" and not {record.rank, target.dst} & dead
            results.append(result_for(record.rank, target, "ok" if ok else "timeout", "",
                                      target.source.address if ok else None))
        reports.append(ProbeReport(record.rank, tuple(results)))
    return records, reports


def report_of(records: list[NodeRecord], reports: list[ProbeReport]):  # type: ignore[no-untyped-def]
    return build_report(MeetingOutcome(len(records), 0, "10.0.0.2", 29500, 23.0, tuple(records),
                                       tuple(reports)))


def rendered(report) -> list[str]:  # type: ignore[no-untyped-def]
    out = io.StringIO()
    _render_cluster(Console(out=out, err=io.StringIO(), color=False, width=100), report)
    return out.getvalue().splitlines()


def test_up_to_the_threshold_every_pair_is_probed() -> None:
    records, reports = cluster(sampling.SAMPLE_ABOVE)
    report = report_of(records, reports)
    figures = report.to_dict()["probes"]
    assert figures["sampled"] is False and figures["made"] == figures["all_pairs"]
    assert figures["all_pairs"] == 16 * 15 * 4


def test_above_it_each_node_probes_its_ring_some_random_peers_and_nobody_is_left_out() -> None:
    records, _ = cluster(40)
    plans = {r.rank: sampling.probed_peers(r, records) for r in records}
    for rank, peers in plans.items():
        assert {(rank - 1) % 40, (rank + 1) % 40} <= peers and rank not in peers
        assert len(peers) <= 2 + sampling.SAMPLE_PEERS
    dialled = {rank: sum(rank in peers for peers in plans.values()) for rank in plans}
    assert min(dialled.values()) >= 2
    # every node, and the report, derive the same plan from the run's nonces
    assert plans == {r.rank: sampling.probed_peers(r, list(reversed(records))) for r in records}


def test_a_peer_on_another_subnet_is_probed_by_every_node() -> None:
    records, _ = cluster(40, subnet_of={5: "10.0.1"})
    assert all(5 in sampling.probed_peers(r, records) for r in records if r.rank != 5)
    assert sampling.probed_peers(records[5], records) == frozenset(range(40)) - {5}


def test_a_healthy_sampled_cluster_passes_and_says_it_was_sampled() -> None:
    records, reports = cluster(40)
    report = report_of(records, reports)
    figures = report.to_dict()["probes"]
    assert report.verdict.ok and figures["sampled"] is True
    assert figures["made"] < figures["all_pairs"] / 5
    lines = rendered(report)
    text = "\n".join(lines)
    assert "sampled" in text and f"of {figures['all_pairs']} for all pairs" in " ".join(text.split())
    assert "eth1->eth1  node0-39" in text
    assert all(display_width(line) <= 100 for line in lines), max(lines, key=display_width)


def test_one_dead_node_among_40_is_named_by_node_and_interface_in_few_lines() -> None:
    records, reports = cluster(40, dead=frozenset({27}))
    report = report_of(records, reports)
    assert not report.verdict.ok
    rows = reach_rows(report.matrix.results())
    assert rows[0][0] == "eth1->eth1" and rows[0][1] == "node27"
    assert rows[0][2].startswith("timeout to all")
    assert any("timeout to node27" in text for _, _nodes, text in rows)
    lines = rendered(report)
    assert len(lines) < 60
    assert all(display_width(line) <= 100 for line in lines), max(lines, key=display_width)
    assert any(p.severity == "error" and "27" in p.message for p in report.problems)
    assert len(report.to_dict()["paths"]) == report.to_dict()["probes"]["planned"]


def test_an_unprobed_pair_is_never_assumed_across_a_failing_interface() -> None:
    records, reports = cluster(40, dead=frozenset({27}))
    matrix = complete_matrix(records, [r for p in reports for r in p.results])
    assert matrix.sampled
    far = next(r.rank for r in records if r.rank not in sampling.probed_peers(records[27], records)
               and 27 not in sampling.probed_peers(r, records) and r.rank != 27)
    assert matrix.get(far, "eth1", 27, "eth1") is None
    assert not matrix.ok(far, "eth1", 27, "eth1")
    other = next(r for r in range(40) if r not in (far, 27) and matrix.get(far, "eth1", r, "eth1")
                 is None)
    assert matrix.ok(far, "eth1", other, "eth1")  # same network, both healthy: assumed
    assert not matrix.ok(far, "eth0", other, "eth0")  # the trap failed its own probes


def test_compact_ranks() -> None:
    assert compact_ranks([0, 1, 2, 5, 7, 8]) == "node0-2,5,7-8"
    assert compact_ranks([27]) == "node27" and compact_ranks([]) == ""


def test_the_whole_job_report_from_node_0s_json_is_by_exception_too() -> None:
    from ddpkit.cli.job.doctor_job import show_report

    records, reports = cluster(32, dead=frozenset({27}))
    doc = report_of(records, reports).to_dict()
    out = io.StringIO()
    show_report(Console(out=out, err=io.StringIO(), color=False, width=100), doc)
    lines = out.getvalue().splitlines()
    assert all(display_width(line) <= 100 for line in lines), max(lines, key=display_width)
    assert len(lines) < 45, "\n".join(lines)
    text = "\n".join(lines)
    assert "eth1->eth1  node27" in text and "sampled" in text
    assert "more peer-unreachable problems (every one in --json)" in text
