"""Cluster doctor: the interface assignment, the command lines, the problems and the report.

Scenarios are built as networks: a candidate reaches another when both sit on the same network
(and the pair is not listed as broken), and the probe results are generated from that.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ddpkit.doctor.cluster.matrix import Matrix, complete_matrix, plan_probes, result_for
from ddpkit.doctor.cluster.model import Candidate, Fingerprint, NodeRecord, PathResult, ProbeReport
from ddpkit.doctor.cluster.report import (
    MeetingOutcome,
    build_report,
    difference_table,
    matrix_table,
    verdict_lines,
)
from ddpkit.doctor.cluster.verdict import choose_interfaces, decide, unreachable_pairs

FP = Fingerprint("node", "3.11.7", "2.13.0", "n/a", "n/a", "n/a", None, "0.1.0")
Net = Mapping[int, Sequence[tuple[str, str, str]]]  # rank -> (ifname, address, network)


def build(nets: Net, broken: set[tuple[int, str, int, str]] | None = None,
          preference: Mapping[tuple[int, str], int] | None = None
          ) -> tuple[list[NodeRecord], list[ProbeReport]]:
    network = {(rank, ifname): net for rank, items in nets.items() for ifname, _, net in items}
    records = [NodeRecord(rank, len(nets), f"n{rank}", (("ipv4", 5000 + rank),), tuple(
        Candidate(ifname, address, "physical", (preference or {}).get((rank, ifname), i))
        for i, (ifname, address, _) in enumerate(items)),
        replace(FP, hostname=f"node{rank}")) for rank, items in sorted(nets.items())]
    reports = []
    for record in records:
        results = []
        for target in plan_probes(record, records):
            key = (record.rank, target.source.ifname, target.dst, target.target.ifname)
            same = network[(record.rank, target.source.ifname)] == network[
                (target.dst, target.target.ifname)]
            ok = same and key not in (broken or set())
            results.append(result_for(record.rank, target, "ok" if ok else "timeout", "",
                                      target.source.address if ok else None))
        reports.append(ProbeReport(record.rank, tuple(results)))
    return records, reports


def matrix_of(records: list[NodeRecord], reports: list[ProbeReport]) -> Matrix:
    return complete_matrix(records, [r for p in reports for r in p.results])


def outcome(records: list[NodeRecord], reports: list[ProbeReport], nnodes: int | None = None,
            **more: object) -> MeetingOutcome:
    return MeetingOutcome(nnodes or len(records), 0, "10.0.0.2", 29500, 23.0, tuple(records),
                          tuple(reports), **more)  # type: ignore[arg-type]


SIM = {r: [("eth0", "172.17.0.4", f"nat{r}"), ("eth1", f"10.0.0.{2 + r}", "private")]
       for r in range(4)}


def test_sim_layout_picks_eth1_everywhere_and_never_eth0() -> None:
    records, reports = build(SIM, preference={(r, "eth0"): 5 for r in range(4)})
    choices = choose_interfaces(records, matrix_of(records, reports))
    assert choices is not None
    assert [(c.rank, c.ifname, c.address) for c in choices] == [
        (r, "eth1", f"10.0.0.{2 + r}") for r in range(4)]


def test_names_may_differ_per_node() -> None:
    nets = {0: [("eth1", "10.0.0.2", "p")], 1: [("ens5", "10.0.0.3", "p")],
            2: [("eth1", "10.0.0.4", "p")]}
    records, reports = build(nets)
    verdict = decide(records, matrix_of(records, reports), 3, 29501)
    assert verdict.ok and verdict.same_name is None
    commands = {c.rank: c for c in verdict.commands()}
    assert commands[1].nccl_conf == "ddpkit nccl-conf set NCCL_SOCKET_IFNAME==ens5"
    assert commands[1].launch == ("ddpkit launch --nnodes 3 --node-rank 1 --master-addr 10.0.0.2 "
                                  "--master-port 29501 --ifname ens5 train.py")
    assert commands[0].export == "export NCCL_SOCKET_IFNAME==eth1 GLOO_SOCKET_IFNAME=eth1"


def test_preferred_interface_loses_when_it_does_not_reach_everyone() -> None:
    # fast network f joins nodes 0 and 1 only; every node is on the slower network s.
    nets = {0: [("eth2", "192.168.0.2", "f"), ("eth1", "10.0.0.2", "s")],
            1: [("eth2", "192.168.0.3", "f"), ("eth1", "10.0.0.3", "s")],
            2: [("eth1", "10.0.0.4", "s")]}
    records, reports = build(nets)
    choices = choose_interfaces(records, matrix_of(records, reports))
    assert choices is not None and {c.ifname for c in choices} == {"eth1"}


def test_backtracking_finds_the_one_consistent_assignment() -> None:
    # Every candidate reaches every other node somehow, but node 0's favourite p only fits
    # node 1's p and node 2's q, which do not reach each other: the search must back up to q.
    names = ("p", "q")
    nets = {r: [(n, f"10.{i}.0.{2 + r}", "one") for i, n in enumerate(names)] for r in range(3)}
    working = {(0, "p", 1, "p"), (0, "p", 2, "q"), (1, "p", 2, "p"), (0, "q", 1, "q"),
               (0, "q", 2, "q"), (1, "q", 2, "q"), (0, "q", 2, "p")}
    working |= {(b, y, a, x) for a, x, b, y in working}
    broken = {(a, x, b, y) for a in range(3) for b in range(3) if a != b
              for x in names for y in names} - working
    records, reports = build(nets, broken)
    matrix = matrix_of(records, reports)
    choices = choose_interfaces(records, matrix)
    assert choices is not None and [c.ifname for c in choices] == ["q", "q", "q"]
    assert choose_interfaces(records, matrix, step_limit=2) is None  # bounded


def test_no_assignment_when_pairs_work_only_on_different_networks() -> None:
    nets = {0: [("a", "10.1.0.2", "x"), ("c", "10.3.0.2", "z")],
            1: [("a", "10.1.0.3", "x"), ("b", "10.2.0.3", "y")],
            2: [("b", "10.2.0.4", "y"), ("c", "10.3.0.4", "z")]}
    records, reports = build(nets)
    matrix = matrix_of(records, reports)
    assert unreachable_pairs(records, matrix) == ()
    assert choose_interfaces(records, matrix) is None
    report = build_report(outcome(records, reports))
    assert not report.ok
    assert report.problems[0].id == "peer-unreachable"
    assert "no choice of one interface per node" in report.problems[0].message


def test_one_way_firewall_makes_the_pair_unreachable() -> None:
    nets = {0: [("eth1", "10.0.0.2", "p")], 1: [("eth1", "10.0.0.3", "p")]}
    records, reports = build(nets, broken={(1, "eth1", 0, "eth1")})
    report = build_report(outcome(records, reports))
    assert report.verdict.unreachable == ((0, 1),) and not report.ok
    problem = report.problems[0]
    assert problem.id == "peer-unreachable" and problem.nodes == (0, 1)
    assert "node1 eth1 -> node0 eth1 10.0.0.2: timeout" in problem.message
    assert verdict_lines(report.verdict)[0].startswith("no interface assignment")


def test_healthy_report_is_ok_with_the_shared_address_as_info() -> None:
    nets = {r: [("eth1", f"10.0.0.{2 + r}", "p"), ("eth0", "172.17.0.4", f"nat{r}")]
            for r in range(2)}
    report = build_report(outcome(*build(nets)))
    assert report.ok
    (info,) = report.problems
    assert (info.id, info.severity, info.nodes) == ("wrong-interface", "info", (0, 1))
    assert "eth0 172.17.0.4 is the same address on nodes 0, 1" in info.message
    headers, rows = matrix_table(report)
    assert headers == ("from", "via", "n0:eth1", "n0:eth0", "n1:eth1", "n1:eth0")
    assert rows[0] == ("node0", "eth1", "-", "-", "ok", "timeout")
    lines = verdict_lines(report.verdict)
    assert "  ddpkit nccl-conf set NCCL_SOCKET_IFNAME==eth1" in lines


def test_wide_clusters_get_one_row_per_pair_instead_of_a_matrix() -> None:
    records, reports = build(SIM, broken={(2, "eth1", 3, "eth1")})
    report = build_report(outcome(records, reports))
    headers, rows = matrix_table(report)  # 4 nodes x 2 interfaces = 8 columns: still a matrix
    assert headers[1] == "via"
    nets = {r: [(n, f"10.{i}.0.{2 + r}", f"net{i}") for i, n in enumerate(("a", "b", "c"))]
            for r in range(3)}
    wide = build_report(outcome(*build(nets, broken={(0, "a", 1, "a"), (0, "b", 1, "b"),
                                                     (0, "c", 1, "c")})))
    headers, rows = matrix_table(wide)  # 9 columns: one row per pair
    assert headers == ("from", "to", "working interface pairs")
    assert ("node1", "node0", "a->a, b->b, c->c") in rows
    assert ("node0", "node1", "none (a->a timeout, b->b timeout)") in rows
    assert len(rows) == 6


def test_node_without_any_candidate_is_named() -> None:
    records, reports = build({0: [("eth1", "10.0.0.2", "p")], 1: []})
    report = build_report(outcome(records, reports))
    assert report.problems[0].id == "interface-not-found" and report.problems[0].nodes == (1,)
    assert not report.ok


def test_missing_node_is_named_and_nothing_is_decided() -> None:
    records, _ = build({0: [("eth1", "10.0.0.2", "p")], 2: [("eth1", "10.0.0.4", "p")]})
    skipped = [ProbeReport(r.rank, skipped="node(s) 1 never showed up") for r in records]
    report = build_report(outcome(records, skipped, nnodes=3))
    assert report.missing == (1,) and not report.ok and not report.verdict.choices
    (problem,) = report.problems  # no "connection-lost" noise for the nodes that skipped
    assert problem.id == "rendezvous-timeout" and problem.nodes == (1,)
    assert "node 1 did not show up at the master's store 10.0.0.2:29500 within 23 s" in \
        problem.message
    assert "--node-rank 1" in problem.fix


def test_node_that_never_reports_is_connection_lost() -> None:
    records, reports = build({0: [("eth1", "10.0.0.2", "p")], 1: [("eth1", "10.0.0.3", "p")]})
    report = build_report(outcome(records, reports[:1]))
    assert not report.ok
    assert [p.id for p in report.problems if p.severity == "error"][0] == "connection-lost"
    path = report.matrix.get(1, "eth1", 0, "eth1")
    assert path is not None and path.status == "not-probed"


def test_error_level_difference_fails_an_otherwise_healthy_cluster() -> None:
    records, reports = build({0: [("eth1", "10.0.0.2", "p")], 1: [("eth1", "10.0.0.3", "p")]})
    records[1] = replace(records[1], fingerprint=replace(
        records[1].fingerprint, env=(("NCCL_IB_DISABLE", "1"),)))
    report = build_report(outcome(records, reports))
    assert report.verdict.ok and not report.ok
    assert report.problems[0].id == "node-mismatch" and "NCCL_IB_DISABLE" in \
        report.problems[0].message
    headers, rows = difference_table(report)
    assert headers == ("what", "severity", "node0", "node1")
    assert rows == [("NCCL_IB_DISABLE", "error", "unset", "1")]


def test_socket_ifname_that_misses_the_working_interface_is_an_error() -> None:
    records, reports = build({0: [("eth1", "10.0.0.2", "p")], 1: [("ens5", "10.0.0.3", "p")]})
    records = [replace(r, fingerprint=replace(r.fingerprint, env=(
        ("GLOO_SOCKET_IFNAME", "eth1"), ("NCCL_SOCKET_IFNAME", "=eth1")))) for r in records]
    report = build_report(outcome(records, reports))
    assert not report.ok
    mine = [p for p in report.problems if p.nodes == (1,)]
    assert {p.id for p in mine} == {"interface-not-found"}
    assert any("NCCL_SOCKET_IFNAME==eth1" in p.message or "=eth1, which selects no interface"
               in p.message for p in mine)
    assert all("ens5" in p.fix for p in mine)


def test_duplicate_rank_is_reported_with_both_hostnames() -> None:
    records, reports = build({0: [("eth1", "10.0.0.2", "p")], 1: [("eth1", "10.0.0.3", "p")]})
    report = build_report(outcome(records, reports, duplicates=((1, "gpu-box-7"),)))
    problem = next(p for p in report.problems if p.id == "rank-assignment")
    assert "node1, gpu-box-7" in problem.message and not report.ok


def test_json_payload_shape_is_stable_and_serialisable() -> None:
    report = build_report(outcome(*build(SIM)))
    payload = json.loads(json.dumps(report.to_dict()))
    assert set(payload) == {"ok", "nnodes", "node_rank", "master", "timing", "nodes", "missing",
                            "paths", "probes", "differences", "verdict", "problems"}
    assert payload["verdict"]["same_interface_everywhere"] == "eth1"
    assert len(payload["paths"]) == 4 * 3 * 2 * 2
    assert set(payload["paths"][0]) == {"from", "from_interface", "from_address", "to",
                                        "to_interface", "to_address", "status", "ok", "detail",
                                        "seen"}
    assert payload["verdict"]["commands"][3]["launch"].startswith(
        "ddpkit launch --nnodes 4 --node-rank 3 --master-addr 10.0.0.2 --ifname eth1")


def test_results_order_is_deterministic() -> None:
    records, reports = build(SIM)
    forward = Matrix([r for p in reports for r in p.results]).results()
    backward = Matrix([r for p in reversed(reports) for r in reversed(p.results)]).results()
    assert forward == backward
    assert isinstance(forward[0], PathResult)
