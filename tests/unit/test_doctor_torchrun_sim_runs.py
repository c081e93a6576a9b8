"""What the real torchrun printed on two simulated machines (tests/fixtures/logs/torchrun-sim/,
made by its make.sh with `ddpkit sim up 2`: eth0 172.17.0.4 on both, reaching nothing, eth1 on
a shared bridge), read by `doctor --log` one node at a time and both together. The lines were
written by torch; the expected answer is the mistake each run plants."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ddpkit.doctor.log.diagnose import diagnose

SIM = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "torchrun-sim"


@pytest.mark.parametrize("logs", [["node0.log"], ["node1.log"], ["node0.log", "node1.log"]])
def test_two_nodes_both_given_node_rank_0_read_as_it(logs: list[str]) -> None:
    found = diagnose([str(SIM / "dupnode" / name) for name in logs])[0]
    assert (found.id, found.severity) == ("rendezvous-timeout", "error")
    assert "given the same --node-rank" in found.explanation


@pytest.mark.parametrize("logs", [["node1.log"], ["node0.log", "node1.log"]])
def test_the_container_address_as_master_reads_as_it(logs: list[str]) -> None:
    # the same sim, both nodes given eth0's 172.17.0.4 as --master-addr: node 1 dials its own
    # container address, which no other machine shares a network with
    found = diagnose([str(SIM / "natmaster" / name) for name in logs])[0]
    assert (found.id, found.severity) == ("wrong-interface", "error")
    assert "172.17.0.4" in found.explanation


@pytest.mark.parametrize(("run", "logs", "address"), [
    # GLOO_SOCKET_IFNAME=eth0 on both nodes: rank 0 dials its own eth0 for rank 1
    ("glooeth0", ["node0.log"], "172.17.0.4"), ("glooeth0", ["logs0"], "172.17.0.4"),
    ("glooeth0", ["node0.log", "node1.log"], "172.17.0.4"), ("glooeth0", ["node1.log"], ""),
    # GLOO_SOCKET_IFNAME=lo on both nodes: every rank advertises 127.0.0.1
    ("gloolo", ["node0.log"], "127.0.0.1"), ("gloolo", ["node0.log", "node1.log"], "127.0.0.1"),
    ("gloolo", ["node1.log"], ""),
    # no GLOO_SOCKET_IFNAME: Gloo takes the address the hostname resolves to, eth0's
    ("gloohost", ["node1.log"], "172.17.0.4"), ("gloohost", ["logs1"], "172.17.0.4"),
    ("gloohost", ["node0.log", "node1.log"], "172.17.0.4"), ("gloohost", ["node0.log"], ""),
])
def test_gloo_on_an_interface_the_other_node_cannot_reach(run: str, logs: list[str],
                                                           address: str) -> None:
    found = diagnose([str(SIM / run / name) for name in logs])[0]
    assert (found.id, found.severity) == ("wrong-interface", "error")
    assert address in found.explanation
    # Gloo prints its ports in network byte order (a listener on 40223 printed as 8093): no
    # port of its lines is quoted as one
    assert "(port" not in found.explanation


@pytest.mark.parametrize("logs", [["node1.log"], ["node0.log", "node1.log"]])
def test_node_1_given_loopback_as_master_reads_as_it(logs: list[str]) -> None:
    # no line counts the nodes: node 1's agent is a client of the static rendezvous, so the
    # master it dialled at 127.0.0.1 is on another machine
    found = diagnose([str(SIM / "loopmaster" / name) for name in logs])[0]
    assert (found.id, found.severity) == ("wrong-interface", "error")
    assert "static rendezvous as a client" in found.explanation
    assert "127.0.0.1" in found.explanation and "nics --to 127" not in found.fix


def test_the_master_of_that_run_waits_for_its_client() -> None:
    found = diagnose([str(SIM / "loopmaster" / "node0.log")])[0]
    assert (found.id, found.severity) == ("rendezvous-timeout", "error")


@pytest.mark.parametrize("logs", [["node0.log"], ["node1.log"], ["node0.log", "node1.log"]])
def test_the_c10d_store_no_agent_hosted_reads_as_it(logs: list[str]) -> None:
    # both nodes given --rdzv-endpoint 10.0.0.2:29412; node 0's hostname resolves to eth0, so its
    # agent did not take the endpoint for itself
    found = diagnose([str(SIM / "c10dnohost" / name) for name in logs])[0]
    assert (found.id, found.severity) == ("rendezvous-config", "error")
    assert "10.0.0.2:29412" in found.explanation and "is_host=1" in found.fix
    assert ("Each of the 2 agents" in found.explanation) == (len(logs) == 2)


def test_a_store_on_another_port_is_named_among_the_readings() -> None:
    # node 0 hosts the c10d store on 29400 (its endpoint names no port), node 1 dials 29412
    node1 = diagnose([str(SIM / "noport" / "node1.log")])[0]
    assert node1.id == "rendezvous-config" and "port 29400" in node1.explanation
    node0 = diagnose([str(SIM / "noport" / "node0.log")])[0]
    assert (node0.id, node0.severity) == ("rendezvous-timeout", "error")
    both = diagnose([str(SIM / "noport" / name) for name in ("node0.log", "node1.log")])[0]
    assert both.id == "peer-unreachable" and "another address or port" in both.explanation


@pytest.mark.parametrize("logs", [["node1.log"], ["node0.log", "node1.log"]])
def test_the_c10d_workers_given_node_0s_hostname_read_as_it(logs: list[str]) -> None:
    # node 0 hosts the c10d store (is_host=1), but no node was given --local-addr: torchrun hands
    # the workers node 0's hostname, which node 1 cannot resolve
    found = diagnose([str(SIM / "nolocal" / name) for name in logs])[0]
    assert (found.id, found.severity) == ("rendezvous-config", "error")
    assert "node0 did not resolve" in found.explanation and "--local-addr" in found.fix


def test_a_second_job_on_the_first_ones_port() -> None:
    # the first job still holds 10.0.0.2:29411: the second's node 0 cannot listen there, and its
    # node 1 joins the first job's store and times out in all_reduce. Node 1's log alone shows
    # only the timeout; with node 0's the port is named
    both = diagnose([str(SIM / "secondjob" / name) for name in ("node0.log", "node1.log")])[0]
    assert (both.id, both.severity) == ("port-in-use", "error") and "29411" in both.explanation
    node1 = diagnose([str(SIM / "secondjob" / "node1.log")])[0]
    assert (node1.id, node1.severity) == ("collective-timeout", "error")


def test_lightning_on_two_nodes_both_node_rank_0_reads_as_it() -> None:
    # NODE_RANK set on node 0 only: both nodes print GLOBAL_RANK: 0. Each log alone shows one
    # process of rank 0 (node 0's waits, node 1's store connection closes); together they show
    # the rank taken twice
    both = diagnose([str(SIM / "lightnodes" / name) for name in ("node0.log", "node1.log")])[0]
    assert (both.id, both.severity) == ("rank-assignment", "error")
    assert "Global ranks 0 were each taken by more than one process" in both.explanation
    assert diagnose([str(SIM / "lightnodes" / "node0.log")])[0].severity == "warning"


@pytest.mark.parametrize(("logs", "finding"), [
    (["node1.log"], "rank-failed"), (["node0.log", "node1.log"], "rank-failed"),
    # node 0's log alone: its rank lost rank 1 mid-collective, which is all it shows
    (["node0.log"], "connection-lost")])
def test_the_data_missing_on_one_node_reads_as_that_nodes_failure(logs: list[str],
                                                                  finding: str) -> None:
    # scripts/s_nodata.py: the training file exists on node 0 only; node 1's rank raises
    # FileNotFoundError after the group formed
    found = diagnose([str(SIM / "nodata" / name) for name in logs])[0]
    assert (found.id, found.severity) == (finding, "error")
    if finding == "rank-failed":
        assert "FileNotFoundError" in found.explanation and "/root/autodl-tmp/data" in found.explanation
    else:
        assert "peer process died" in found.explanation


@pytest.mark.parametrize("logs", [["node1.log"], ["node0.log", "node1.log"]])
def test_no_route_to_the_master_quotes_the_address_dialled(logs: list[str]) -> None:
    # node 1 has no route to 10.0.0.2 (an unreachable route in its namespace): c10d names the
    # target in its summary line; its per-attempt lines print garbled addresses on torch 2.13
    found = diagnose([str(SIM / "noroute" / name) for name in logs])[0]
    assert (found.id, found.severity) == ("wrong-interface", "error")
    assert "no route to 10.0.0.2:29411 (errno 113" in found.explanation
    attempts = set(re.findall(r"failed to connect to \S+:(\d+) \(errno: 113",
                              (SIM / "noroute" / "node1.log").read_text()))
    assert attempts and "29411" not in attempts
    assert not any(port in found.explanation for port in attempts)


def test_the_master_a_node_could_not_reach_waits_for_it() -> None:
    found = diagnose([str(SIM / "noroute" / "node0.log")])[0]
    assert (found.id, found.severity) == ("rendezvous-timeout", "error")


@pytest.mark.parametrize(("logs", "words"), [
    (["node1.log"], "--node-rank 2 needs --nnodes 3 or more"),
    (["node0.log"], "all 2 node ranks (0 to 1)"),
    (["node0.log", "node1.log"], "node rank 2 is outside the node count")])
def test_a_node_rank_counted_from_1_reads_as_it(logs: list[str], words: str) -> None:
    # node 1 given --node-rank 2 of --nnodes 2: node 0's agent waits for node rank 1's worker
    # info (torchelastic/role_info/1), node 1's for the ranks node 0 hands out
    # (torchelastic/assigned_ranks/2)
    found = diagnose([str(SIM / "rank2" / name) for name in logs])[0]
    assert (found.id, found.severity) == ("rendezvous-timeout", "error")
    assert words in found.explanation


@pytest.mark.parametrize("logs", [["node0.log"], ["node1.log"], ["node0.log", "node1.log"],
                                  ["logs1"]])
def test_the_tutorials_own_master_under_torchrun_reads_as_it(logs: list[str]) -> None:
    # scripts/s_tutorial.py sets MASTER_ADDR=localhost, MASTER_PORT=12355 before
    # init_process_group: torchrun's workers dial a store no one serves, node 0's too
    # (the log dir: each worker's own files, without the tee)
    found = diagnose([str(SIM / "tutorial" / name) for name in logs])[0]
    assert (found.id, found.severity) == ("rendezvous-config", "error")
    assert "localhost:12355" in found.explanation and "MASTER_PORT" in found.fix


@pytest.mark.parametrize("logs", [["node1.log"], ["node0.log", "node1.log"]])
def test_an_agent_that_lost_the_store_while_the_nodes_met_waited_for_node_0(
        logs: list[str]) -> None:
    # accelerate launch with --machine_rank 0 on both nodes: node 1's agent, waiting in
    # _assign_worker_ranks for a node 1 that never came, lost node 0's store when node 0 was
    # stopped. No worker started: the cause is node 0's, not a rank that failed mid-job
    found = diagnose([str(SIM / "accdup" / name) for name in logs])
    assert (found[0].id, found[0].severity) == ("stopped-while-waiting", "error")
    assert "_assign_worker_ranks" in found[0].explanation
    assert "node 0" in found[0].explanation
    assert {f.id for f in found}.isdisjoint({"connection-lost", "rank-failed"})


@pytest.mark.parametrize("logs", [["node0.log"], ["node1.log"], ["node0.log", "node1.log"]])
def test_deepspeeds_launcher_given_the_container_address_as_master_reads_as_it(
        logs: list[str]) -> None:
    # deepspeed --no_ssh, both nodes given eth0's 172.17.0.4: the workers wait in silence until
    # the launchers are stopped; the runner's command line names the master address
    found = diagnose([str(SIM / "dsnat" / name) for name in logs])[0]
    assert (found.id, found.severity) == ("wrong-interface", "error")
    assert "172.17.0.4" in found.explanation and "Docker's default bridge" in found.explanation


@pytest.mark.parametrize("logs", [["node0.log"], ["node1.log"], ["node0.log", "node1.log"]])
def test_a_wait_that_prints_nothing_but_c10ds_warning_is_no_result(logs: list[str]) -> None:
    # accelerate launch, both nodes given eth0's 172.17.0.4 as --main_process_ip: accelerate
    # prints no master address, and c10d retries quietly; the one line is c10d's warning as a
    # store socket connected. Not a run that finished: where it stops, a warning
    found = diagnose([str(SIM / "accnat" / name) for name in logs])[0]
    assert (found.id, found.severity) == ("no-result", "warning")
    assert "c10d store" in found.explanation


def test_deepspeeds_launchers_both_given_node_rank_0_read_as_it() -> None:
    # deepspeed --no_ssh with node 0's command on both nodes: each launcher states node_rank=0
    # of nnodes=2; node 1's worker lost the store when node 0 was stopped
    found = diagnose([str(SIM / "dsdup" / name) for name in ("node0.log", "node1.log")])
    assert (found[0].id, found[0].severity) == ("rank-assignment", "error")
    assert "node rank 0 of 2 nodes" in found[0].explanation
    assert "connection-lost" not in {f.id for f in found}
