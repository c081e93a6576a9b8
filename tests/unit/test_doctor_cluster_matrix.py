"""Cluster doctor, pure parts: wire records (JSON, validated), probe planning, answer and error
classification, and the matrix."""

from __future__ import annotations

import errno
import json

import pytest

from ddpkit.doctor.cluster.matrix import (
    ECHO_SCHEMA,
    ProbeTarget,
    classify_answer,
    classify_error,
    complete_matrix,
    echo_line,
    plan_probes,
    reach_counts,
)
from ddpkit.doctor.cluster.model import (
    Candidate,
    Fingerprint,
    NodeRecord,
    PathResult,
    ProbeReport,
    decode_record,
    encode,
    normalise_address,
)

FP = Fingerprint("node0", "3.11.7", "2.13.0", "n/a", "n/a", "n/a", None, "0.1.0",
                 (("NCCL_DEBUG", "INFO"),), (("NCCL_DEBUG", "/etc/nccl.conf"),))
ETH1 = Candidate("eth1", "10.0.0.2", "physical", 0)
ETH0 = Candidate("eth0", "172.17.0.4", "veth", 1, ("docker-default-subnet",))


def record(rank: int, *candidates: Candidate, ports: tuple[tuple[str, int], ...] = (("ipv4", 4000),),
           nonce: str | None = None) -> NodeRecord:
    return NodeRecord(rank, 2, nonce or f"nonce{rank}", ports, candidates, FP)


def test_records_survive_the_store_as_json() -> None:
    node = record(1, ETH1, ETH0)
    raw = encode(node)
    assert raw.startswith(b"{") and b"pickle" not in raw
    assert NodeRecord.from_dict(decode_record(raw)) == node
    report = ProbeReport(1, (PathResult(1, "eth1", "10.0.0.3", 0, "eth1", "10.0.0.2", "ok",
                                        seen="10.0.0.3"),))
    assert ProbeReport.from_dict(decode_record(encode(report))) == report


@pytest.mark.parametrize("change, message", [
    ({"wire": 99}, "wire version 99"),
    ({"rank": "1"}, "'rank'"),
    ({"rank": True}, "'rank'"),
    ({"ports": {"ipv4": "x"}}, "'ports'"),
    ({"candidates": [{"ifname": "eth1", "address": "not-an-ip", "kind": "veth",
                      "preference": 0}]}, "not an IP address"),
    ({"fingerprint": {"hostname": "h"}}, "'python'"),
])
def test_malformed_records_are_rejected_with_the_field(change: dict[str, object],
                                                       message: str) -> None:
    data = {**record(1, ETH1).to_dict(), **change}
    with pytest.raises(ValueError, match=message):
        NodeRecord.from_dict(data)


def test_non_json_store_values_are_rejected() -> None:
    with pytest.raises(ValueError, match="not JSON"):
        decode_record(b"\x80\x04pickle")
    with pytest.raises(ValueError, match="not an object"):
        decode_record(b"[1, 2]")


def test_mapped_and_zoned_addresses_normalise() -> None:
    assert normalise_address("::ffff:10.0.0.2") == "10.0.0.2"
    assert normalise_address("fe80::1%eth1") == "fe80::1"
    assert normalise_address("garbage") == "garbage"


def test_probes_cover_every_pair_of_same_family_candidates_of_other_nodes() -> None:
    v6 = Candidate("eth2", "fd00::2", "physical", 2)
    me = record(0, ETH1, ETH0)
    peer = record(1, Candidate("ens5", "10.0.0.3", "physical", 0), ETH0, v6,
                  ports=(("ipv4", 4001), ("ipv6", 4001)))
    targets = plan_probes(me, [me, peer])
    assert [(t.source.ifname, t.target.ifname, t.port) for t in targets] == [
        ("eth1", "ens5", 4001), ("eth1", "eth0", 4001),
        ("eth0", "ens5", 4001), ("eth0", "eth0", 4001)]  # no IPv4 -> IPv6, nothing to itself
    assert all(t.nonce == "nonce1" and t.dst == 1 for t in targets)


def _target() -> ProbeTarget:
    return ProbeTarget(ETH1, 1, Candidate("eth1", "10.0.0.3", "physical", 0), 4001, "nonce1")


NONCES = {"nonce0": 0, "nonce1": 1, "nonce2": 2}


def test_answer_from_the_right_node_seeing_the_right_source_is_ok() -> None:
    result = classify_answer(0, _target(), echo_line(1, "nonce1", "10.0.0.2"), NONCES)
    assert result.ok and result.seen == "10.0.0.2"
    mapped = classify_answer(0, _target(), echo_line(1, "nonce1", "::ffff:10.0.0.2"), NONCES)
    assert mapped.ok


def test_other_source_seen_is_nat() -> None:
    result = classify_answer(0, _target(), echo_line(1, "nonce1", "192.168.1.1"), NONCES)
    assert result.status == "nat" and "192.168.1.1" in result.detail and not result.ok


def test_own_listener_answering_is_self_and_a_third_node_is_other_node() -> None:
    assert classify_answer(0, _target(), echo_line(0, "nonce0", "10.0.0.2"),
                           NONCES).status == "self"
    other = classify_answer(0, _target(), echo_line(2, "nonce2", "10.0.0.2"), NONCES)
    assert other.status == "other-node" and "node 2 answered" in other.detail


@pytest.mark.parametrize("answer", [b"", b"SSH-2.0-OpenSSH_9.2\r\n", b"\xff\xfe\x00",
                                    json.dumps({"schema": "x"}).encode() + b"\n"])
def test_anything_else_is_a_bad_answer(answer: bytes) -> None:
    assert classify_answer(0, _target(), answer, NONCES).status == "bad-answer"


def test_stranger_nonce_is_a_bad_answer() -> None:
    line = json.dumps({"schema": ECHO_SCHEMA, "rank": 1, "nonce": "old", "saw": "10.0.0.2"})
    assert classify_answer(0, _target(), line.encode(), NONCES).status == "bad-answer"


@pytest.mark.parametrize("number, timed_out, status", [
    (None, True, "timeout"), (errno.ECONNREFUSED, False, "refused"),
    (errno.ENETUNREACH, False, "no-route"), (errno.EHOSTUNREACH, False, "no-route"),
    (errno.EADDRNOTAVAIL, False, "no-source"), (errno.ETIMEDOUT, False, "timeout"),
    (errno.EPERM, False, "error"),
])
def test_socket_errors_are_classified(number: int | None, timed_out: bool, status: str) -> None:
    assert classify_error(0, _target(), number, timed_out).status == status


def test_complete_matrix_marks_unreported_paths_and_counts_reach() -> None:
    nodes = [record(0, ETH1, ETH0), record(1, Candidate("eth1", "10.0.0.3", "physical", 0), ETH0)]
    ok = [PathResult(0, "eth1", "10.0.0.2", 1, "eth1", "10.0.0.3", "ok"),
          PathResult(1, "eth1", "10.0.0.3", 0, "eth1", "10.0.0.2", "ok")]
    matrix = complete_matrix(nodes, ok)
    assert len(matrix.results()) == 8  # 2 nodes x 2 candidates x 2 peer candidates
    missing = matrix.get(0, "eth0", 1, "eth1")
    assert missing is not None and missing.status == "not-probed"
    assert matrix.both_ways(0, "eth1", 1, "eth1") and not matrix.both_ways(0, "eth0", 1, "eth1")
    assert reach_counts(nodes[0], nodes, matrix) == {"eth1": 1, "eth0": 0}


def test_one_way_path_does_not_count_both_ways() -> None:
    nodes = [record(0, ETH1), record(1, Candidate("eth1", "10.0.0.3", "physical", 0))]
    matrix = complete_matrix(nodes, [PathResult(0, "eth1", "10.0.0.2", 1, "eth1", "10.0.0.3",
                                                "ok")])
    assert matrix.ok(0, "eth1", 1, "eth1") and not matrix.both_ways(0, "eth1", 1, "eth1")
