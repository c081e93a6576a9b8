"""``ddpkit doctor --nnodes N`` for real: on loopback (no root) and on sim clusters (root).

Every node runs the same command; the tests check the matrix, the diff and the verdict from each
node's JSON document, that the nodes agree, the time it takes, and (through the ``sim_cluster``
fixture and ``wait_all``) that no process or namespace is left behind. The 4-node run prints its
wall time (``pytest -s`` shows it).
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from multinode import NodeRun, clean_env, ddpkit, kill_tree, wait_all

from ddpkit.doctor.cluster.model import Candidate
from ddpkit.doctor.cluster.report import MeetingOutcome, build_report
from ddpkit.doctor.cluster.session import ClusterOptions, collect_fingerprint, run_node
from ddpkit.sim.topology import SimCluster, node_argv
from ports import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
HEALTHY_TIMEOUT = "60"  # generous: four torch imports on a loaded 2-core box take ~20 s




def doc(run: NodeRun) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(run.out)
    except json.JSONDecodeError:
        pytest.fail(f"node {run.index} printed no JSON (exit {run.code}): {run.out}\n{run.err}")
    return data


def start_nodes(cluster: SimCluster, nodes: Sequence[int], *extra: str,
                env: dict[int, list[str]] | None = None) -> list[NodeRun]:
    master = cluster.node(0).private_address
    runs = []
    for index in nodes:
        argv = ["env", *(env or {}).get(index, []), *ddpkit(
            "doctor", "--nnodes", str(len(cluster.nodes)), "--node-rank", str(index),
            "--master-addr", master, *extra)]
        proc = subprocess.Popen(node_argv(cluster, index, argv), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=clean_env(),
                                start_new_session=True)
        runs.append(NodeRun(index, proc))
    return runs


def interfaces(document: dict[str, Any]) -> dict[int, str]:
    return {c["rank"]: c["interface"] for c in document["verdict"]["interfaces"]}


# -- loopback, no root ---------------------------------------------------------------------------


def test_two_nodes_meet_and_probe_on_loopback() -> None:
    """The whole protocol in one process: two nodes as threads, their only candidate is lo."""
    port = free_port()
    lo = (Candidate("lo", "127.0.0.1", "loopback", 0),)
    fingerprint = collect_fingerprint({"NCCL_DEBUG": "INFO"})
    outcomes: dict[int, MeetingOutcome] = {}
    errors: list[BaseException] = []

    def node(rank: int) -> None:
        try:
            options = ClusterOptions(2, rank, "127.0.0.1", port, 20.0, listen_host="127.0.0.1")
            outcomes[rank] = run_node(options, {}, candidates=lo, fingerprint=fingerprint)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
            errors.append(exc)

    threads = [threading.Thread(target=node, args=(rank,)) for rank in (1, 0)]  # worker first
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors, errors
    assert time.monotonic() - started < 20
    reports = {rank: build_report(outcome) for rank, outcome in outcomes.items()}
    assert all(report.ok for report in reports.values()), reports[0].problems
    assert reports[0].to_dict()["verdict"] == reports[1].to_dict()["verdict"]
    paths = reports[0].matrix.results()
    assert [(p.src, p.dst, p.status, p.seen) for p in paths] == [
        (0, 1, "ok", "127.0.0.1"), (1, 0, "ok", "127.0.0.1")]
    assert fingerprint.torch and ("NCCL_DEBUG", "INFO") in fingerprint.env


def test_missing_node_is_named_before_the_timeout() -> None:
    port = free_port()
    started = time.monotonic()
    proc = subprocess.run(ddpkit("doctor", "--nnodes", "2", "--node-rank", "0", "--master-addr",
                                 "127.0.0.1", "--master-port", str(port), "--timeout", "15",
                                 "--json"),
                          capture_output=True, text=True, timeout=60, env=clean_env())
    elapsed = time.monotonic() - started
    assert proc.returncode == 1, proc.stderr
    document = json.loads(proc.stdout)
    assert document["schema"] == "ddpkit.doctor-cluster/1"
    assert document["missing"] == [1] and document["ok"] is False
    problem = document["problems"][0]
    assert problem["id"] == "rendezvous-timeout" and problem["nodes"] == [1]
    assert "node 1 did not show up" in problem["message"]
    assert elapsed < 15 + 5  # --timeout bounds the whole command (plus interpreter start-up)


def test_worker_without_master_fails_with_the_address() -> None:
    port = free_port()
    proc = subprocess.run(ddpkit("doctor", "--nnodes", "2", "--node-rank", "1", "--master-addr",
                                 "127.0.0.1", "--master-port", str(port), "--timeout", "15"),
                          capture_output=True, text=True, timeout=60, env=clean_env())
    assert proc.returncode == 5, proc.stderr  # ExitCode.NETWORK
    assert "master-unreachable" in proc.stderr and f"127.0.0.1:{port}" in proc.stderr


def test_busy_master_port_is_refused_at_once() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = int(busy.getsockname()[1])
        proc = subprocess.run(ddpkit("doctor", "--nnodes", "2", "--master-addr", "127.0.0.1",
                                     "--master-port", str(port)),
                              capture_output=True, text=True, timeout=60, env=clean_env())
    assert proc.returncode == 5 and "port-in-use" in proc.stderr, proc.stderr


# -- sim clusters (root) -------------------------------------------------------------------------


@pytest.mark.root
def test_four_healthy_nodes_choose_eth1_and_never_count_eth0(
        sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(nodes=4)
    started = time.monotonic()
    runs = start_nodes(cluster, range(4), "--timeout", HEALTHY_TIMEOUT, "--json")
    assert wait_all(runs, timeout=90), "doctor did not finish"
    wall = time.monotonic() - started
    print(f"\n4-node cluster doctor wall time: {wall:.1f} s")
    documents = [doc(run) for run in runs]
    assert [run.code for run in runs] == [0, 0, 0, 0], [d["problems"] for d in documents]
    first = documents[0]
    assert interfaces(first) == {r: "eth1" for r in range(4)}
    assert first["verdict"]["master_addr"] == cluster.node(0).private_address
    assert all(d["verdict"] == first["verdict"] for d in documents)  # every node says the same
    eth0 = [p for p in first["paths"] if "eth0" in (p["from_interface"], p["to_interface"])]
    assert len(eth0) == 4 * 3 * 3 and not any(p["ok"] for p in eth0)
    assert {p["status"] for p in eth0 if p["to_interface"] == "eth0"} <= {"refused", "self"}
    private = [p for p in first["paths"] if p not in eth0]
    assert len(private) == 12 and all(p["ok"] and p["seen"] == p["from_address"]
                                      for p in private)
    info = [p for p in first["problems"] if p["id"] == "wrong-interface"]
    assert info and info[0]["severity"] == "info" and "172.17.0.4" in info[0]["message"]
    assert max(d["timing"]["elapsed_s"] for d in documents) < float(HEALTHY_TIMEOUT)


@pytest.mark.root
def test_node_whose_private_nic_has_another_name(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(nodes=2, ifnames={1: "ens5"})
    runs = start_nodes(cluster, range(2), "--timeout", HEALTHY_TIMEOUT)
    assert wait_all(runs, timeout=90)
    assert [run.code for run in runs] == [0, 0], runs[0].out + runs[0].err
    for run in runs:  # human output: the verdict names each node's own interface
        assert "node0: eth1 " in run.out and "node1: ens5 " in run.out
        assert "node1: ddpkit nccl-conf set NCCL_SOCKET_IFNAME==ens5" in run.out
        assert "--node-rank 1 --master-addr" in run.out and "--ifname ens5 train.py" in run.out
        assert "n1:ens5" in run.out  # a matrix column


@pytest.mark.root
def test_node_with_a_different_nccl_setting(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(nodes=2)
    runs = start_nodes(cluster, range(2), "--timeout", HEALTHY_TIMEOUT, "--json",
                       env={1: ["NCCL_IB_DISABLE=1"]})
    assert wait_all(runs, timeout=90)
    documents = [doc(run) for run in runs]
    assert [run.code for run in runs] == [1, 1]
    for document in documents:
        assert document["verdict"]["ok"] is True and document["ok"] is False
        (difference,) = document["differences"]
        assert difference["field"] == "NCCL_IB_DISABLE" and difference["severity"] == "error"
        assert difference["values"] == {"0": "unset", "1": "1"}
        assert document["problems"][0]["id"] == "node-mismatch"


@pytest.mark.root
def test_node_with_its_private_nic_down_is_named_within_30_s(
        sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(nodes=3)
    subprocess.run(["ip", "netns", "exec", cluster.node(1).namespace, "ip", "link", "set",
                    cluster.node(1).private_ifname, "down"], check=True, timeout=30)
    started = time.monotonic()
    runs = start_nodes(cluster, range(3), "--json")  # the default --timeout (30 s)
    finished: dict[int, float] = {}

    def finish(run: NodeRun) -> None:
        run.out, run.err = run.proc.communicate(timeout=60)
        finished[run.index] = time.monotonic() - started

    threads = [threading.Thread(target=finish, args=(run,)) for run in runs]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=65)
    finally:
        for run in runs:
            if run.proc.poll() is None:
                kill_tree(run.proc.pid)
                run.proc.wait(timeout=30)
    assert runs[1].code == 5 and "no-route" in runs[1].err  # it knows at once it cannot go
    for run in (runs[0], runs[2]):
        document = doc(run)
        assert run.code == 1 and document["missing"] == [1]
        assert document["problems"][0]["id"] == "rendezvous-timeout"
        assert finished[run.index] < 30, finished
    assert finished[1] < 10



def test_a_worker_says_what_it_waits_for_from_its_first_second() -> None:
    """Issue 21: the cluster doctor was silent for its first seconds. A worker whose master never
    comes says, within a second, that it is meeting the other nodes at the master and for how
    long at most, and then stops with master-unreachable before its --timeout."""
    from ddpkit.errors import NetworkProblem

    port = free_port()
    said: list[tuple[float, str]] = []
    fingerprint = collect_fingerprint({})  # what the CLI's own first line announces
    options = ClusterOptions(2, 1, "127.0.0.1", port, 15.0)
    lo = (Candidate("lo", "127.0.0.1", "loopback", 0),)
    start = time.monotonic()
    with pytest.raises(NetworkProblem) as raised:
        run_node(options, {}, started=start, candidates=lo, fingerprint=fingerprint,
                 progress=lambda text: said.append((time.monotonic() - start, str(text))))
    assert raised.value.error_id == "master-unreachable"
    assert said, "nothing was said while waiting for the master"
    first_at, first = said[0]
    assert first_at < 1.0, said
    assert "meeting the other nodes at the master 127.0.0.1:" in first and "up to" in first
    assert time.monotonic() - start < 15.0
