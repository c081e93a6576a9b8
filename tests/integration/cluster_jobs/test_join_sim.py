"""Token mode on a simulated cluster: `ddpkit launch|test --nnodes N` on node 0 prints a token, the
other nodes run `ddpkit join TOKEN` (no ssh), and the job lives and dies as one."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from console_noise import assert_quiet_console
from jobs import KILLER, SLEEPER, ddpkit_in, script, wait_for_files
from multinode import NodeRun, alive, error_message, wait_all

from ddpkit.errors import ExitCode
from ddpkit.sim.topology import SimCluster

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _master(cluster: SimCluster, tmp_path: Path, *args: str,
            entry: tuple[str, ...] = ()) -> tuple[NodeRun, str]:
    token_file = tmp_path / "token"
    run = ddpkit_in(cluster, 0, tmp_path, *args, "--token-file", str(token_file), "--run-dir",
                    str(tmp_path / "node0"), *entry)
    wait_for_files([token_file], [run], timeout=60)
    token = token_file.read_text().strip()
    assert token.startswith(f"ddpk://{cluster.nodes[0].private_address}:")
    assert (token_file.stat().st_mode & 0o077) == 0, "the token file is readable by others"
    return run, token


def _join(cluster: SimCluster, index: int, tmp_path: Path, token: str, *args: str) -> NodeRun:
    return ddpkit_in(cluster, index, tmp_path, "join", token, "--run-dir",
                     str(tmp_path / f"node{index}"), *args)


def _namespace_processes(cluster: SimCluster, index: int) -> list[int]:
    import os

    inode = os.stat(f"/run/netns/{cluster.nodes[index].namespace}").st_ino
    found = []
    for proc in psutil.process_iter():
        try:
            if os.stat(f"/proc/{proc.pid}/ns/net").st_ino == inode:
                found.append(proc.pid)
        except OSError:
            continue
    return found


def _census_clean(cluster: SimCluster) -> None:
    deadline = time.monotonic() + 10
    while any(_namespace_processes(cluster, i) for i in range(len(cluster.nodes))):
        assert time.monotonic() < deadline, {
            i: _namespace_processes(cluster, i) for i in range(len(cluster.nodes))}
        time.sleep(0.2)


@pytest.mark.timeout(180)
def test_ddpkit_test_through_a_join_token_on_three_nodes(sim_cluster: Callable[..., SimCluster],  # type: ignore[no-untyped-def]
                                                        tmp_path: Path, assert_fits) -> None:
    cluster = sim_cluster(nodes=3)
    master, token = _master(cluster, tmp_path, "test", "--quick", "--json", "--nnodes", "3",
                            "--join-timeout", "90")
    workers = [_join(cluster, i, tmp_path, token, "--json") for i in (1, 2)]
    assert wait_all([master, *workers], timeout=150)
    for run in (master, *workers):
        assert run.code == 0, run.err[-4000:]
        assert_quiet_console(run.out, run.err)
        assert_fits(run.err)  # stdout is the JSON document
    doc = json.loads(master.out)
    assert doc["ok"] is True and doc["nodes"] == 3 and doc["complete"] is True
    assert {r["host"] for r in doc["ranks"]} == {"node0", "node1", "node2"}
    assert all(r["interfaces_used"] == ["eth1"] for r in doc["ranks"])
    for index in (1, 2):
        node = cluster.nodes[index]
        assert f"joined from {node.private_address} (node{index}, via eth1)" in master.err
        assert json.loads(workers[index - 1].out)["ok"] is True
    assert f"ddpkit join --token-file {tmp_path / 'token'}" in master.err
    assert token not in master.err and token.rsplit("/", 1)[1] not in master.err  # no secret
    assert "all 3 nodes finished their part" in master.err
    assert doc["job"]["mode"] == "join" and len(doc["job"]["nodes"]) == 3  # one document, every node
    _census_clean(cluster)


@pytest.mark.timeout(150)
def test_a_rank_sigkilled_on_a_joined_node_stops_every_node(sim_cluster: Callable[..., SimCluster],
                                                           tmp_path: Path) -> None:
    cluster = sim_cluster(nodes=2)
    killer = script(tmp_path, "kill.py", KILLER)
    master, token = _master(cluster, tmp_path, "launch", "--nnodes", "2", "--join-timeout", "60",
                            entry=(str(killer), str(tmp_path)))
    worker = _join(cluster, 1, tmp_path, token)
    assert wait_all([master, worker], timeout=120)
    ended = time.time()
    assert ended - float((tmp_path / "killed-at").read_text()) < 15
    assert master.code == ExitCode.JOB_FAILED, master.err[-3000:]
    assert worker.code == ExitCode.JOB_FAILED, worker.err[-3000:]
    summary = error_message(master.err)
    assert summary.startswith("error [job-failed]: node 1 (node1, rank 1, local rank 0) failed "
                              "first: killed by SIGKILL"), summary
    _census_clean(cluster)


@pytest.mark.timeout(120)
def test_a_node_that_never_joins_is_named_within_the_timeout(sim_cluster: Callable[..., SimCluster],
                                                            tmp_path: Path) -> None:
    cluster = sim_cluster(nodes=3)
    sleeper = script(tmp_path, "sleep.py", SLEEPER)
    # 15 s: node 1 (a torch import away) must join in time even on a loaded 2-core machine.
    master, token = _master(cluster, tmp_path, "launch", "--nnodes", "3", "--join-timeout", "15",
                            entry=(str(sleeper), str(tmp_path)))
    started = time.monotonic()
    worker = _join(cluster, 1, tmp_path, token)
    assert wait_all([master, worker], timeout=80)
    assert time.monotonic() - started < 45
    assert master.code == ExitCode.TIMEOUT, master.err[-3000:]
    node1 = cluster.nodes[1].private_address
    assert "error [nodes-missing]: 1 of 2 worker nodes never joined within 15 s (missing node " \
           f"rank(s) 2; joined: node 1 joined from {node1} (node1, via eth1))" \
           in error_message(master.err)
    assert worker.code == ExitCode.JOB_FAILED and "error [job-stopped]" in worker.err
    _census_clean(cluster)


@pytest.mark.timeout(150)
def test_sigterm_on_the_master_stops_every_process_on_every_node(
        sim_cluster: Callable[..., SimCluster], tmp_path: Path) -> None:
    """(Ctrl-C takes the same path here; the fan-out test sends SIGINT.)"""
    cluster = sim_cluster(nodes=2)
    sleeper = script(tmp_path, "sleep.py", SLEEPER)
    master, token = _master(cluster, tmp_path, "launch", "--nnodes", "2", "--join-timeout", "60",
                            entry=(str(sleeper), str(tmp_path)))
    worker = _join(cluster, 1, tmp_path, token)
    pid_files = [tmp_path / "rank0.pid", tmp_path / "rank1.pid"]
    wait_for_files(pid_files, [master, worker], timeout=90)
    census = {i: _namespace_processes(cluster, i) for i in (0, 1)}
    assert all(len(pids) >= 3 for pids in census.values()), census  # ddpkit, torchrun, a rank
    master.proc.send_signal(signal.SIGTERM)
    assert wait_all([master, worker], timeout=60)
    assert master.code == ExitCode.INTERRUPTED, master.err[-3000:]
    assert worker.code == ExitCode.JOB_FAILED, worker.err[-3000:]
    assert "interrupted on the master" in worker.err
    for index, pids in census.items():
        assert alive([psutil.Process(p) for p in pids if psutil.pid_exists(p)]) == [], f"node {index}"
    _census_clean(cluster)


ENV_ECHO = """
import json, os, pathlib, sys
names = ("ACCELERATE_USE_CPU", "ACCELERATE_MIXED_PRECISION", "HF_HOME")
pathlib.Path(sys.argv[1], f"env{os.environ['RANK']}.json").write_text(
    json.dumps({n: os.environ.get(n) for n in names}))
"""


@pytest.mark.timeout(150)
def test_a_family_line_forwards_and_what_stays_behind_is_named(
        sim_cluster: Callable[..., SimCluster], tmp_path: Path) -> None:
    cluster = sim_cluster(nodes=2)
    echo = script(tmp_path, "echo_env.py", ENV_ECHO)
    (tmp_path / ".ddpkit_env").write_text("ACCELERATE_*\n")
    shell = {"ACCELERATE_USE_CPU": "true", "ACCELERATE_MIXED_PRECISION": "no", "HF_HOME": "/m"}
    token_file = tmp_path / "token"
    master = ddpkit_in(cluster, 0, tmp_path, "launch", "--nnodes", "2", "--join-timeout", "60",
                       "--token-file", str(token_file), "--run-dir", str(tmp_path / "node0"),
                       str(echo), str(tmp_path), env=shell)
    wait_for_files([token_file], [master], timeout=60)
    worker = ddpkit_in(cluster, 1, tmp_path, "join", "--token-file", str(token_file),
                       "--run-dir", str(tmp_path / "node1"))
    assert wait_all([master, worker], timeout=120)
    assert master.code == 0 and worker.code == 0, master.err[-3000:] + worker.err[-3000:]
    assert_quiet_console(master.out, master.err, worker.out, worker.err)
    seen = [json.loads((tmp_path / f"env{rank}.json").read_text()) for rank in (0, 1)]
    assert seen[0] == {"ACCELERATE_USE_CPU": "true", "ACCELERATE_MIXED_PRECISION": "no",
                       "HF_HOME": "/m"}
    assert seen[1] == {"ACCELERATE_USE_CPU": "true", "ACCELERATE_MIXED_PRECISION": "no",
                       "HF_HOME": None}  # the family travelled; HF_HOME did not, and was named:
    warning = next(line for line in master.err.splitlines() if "not sent to the other" in line)
    assert "HF_HOME" in warning and "ACCELERATE_" not in warning.split("--env")[0]
    assert token_file.read_text().strip() not in master.err
    _census_clean(cluster)
