"""`ddpkit launch|test --hosts/--hostfile` over real OpenSSH on a simulated cluster.

Each node of the sim runs its own sshd on its private address; the controller runs either inside
node 0 (the master, the usual case) or on the host side of the bridge (a machine outside the job).
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from console_noise import assert_quiet_console
from jobs import ECHO, KILLER, SLEEPER, ddpkit_in, script, wait_for_files
from multinode import alive, error_message, wait_all
from sshnodes import SshCluster

from ddpkit.errors import ExitCode

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.mark.timeout(150)
def test_ddpkit_test_on_two_nodes_from_outside_the_job(ssh_cluster: Callable[[int], SshCluster],  # type: ignore[no-untyped-def]
                                                       tmp_path: Path, assert_fits) -> None:
    cluster = ssh_cluster(2)
    a, b = cluster.addresses
    run = ddpkit_in(cluster.sim, -1, tmp_path, "test", "--quick", "--json", "--hosts", f"{a},{b}",
                    "--run-dir", str(tmp_path / "runs"), *cluster.ssh_flags())
    assert wait_all([run], timeout=130)
    assert run.code == 0, run.err[-4000:]
    # the controller's own lines; each node lays its lines out for 100 columns and the
    # controller puts "[host:rank] " before them, which this check leaves aside
    assert_fits(run.err, skip=(f"[{a}:", f"[{b}:"))
    doc = json.loads(run.out)
    assert doc["schema"] == "ddpkit.test/1" and doc["ok"] is True and doc["nodes"] == 2
    assert {r["host"] for r in doc["ranks"]} == {"node0", "node1"}
    assert all(r["interfaces_used"] == ["eth1"] for r in doc["ranks"])
    # Node 0 is remote here: its own route lookup chose the master address, not this side's view.
    assert doc["job"]["master"]["address"] == a and "on its route to node 1" in \
        doc["job"]["master"]["reason"]
    assert f"[{b}:1] ddpkit: node 1/2 on node1: inter-node interface eth1" in run.err
    assert_quiet_console(run.out, run.err)
    cluster.assert_nodes_clean()


@pytest.mark.timeout(180)
def test_ddpkit_test_with_a_hostfile_on_three_nodes_from_the_master(
        ssh_cluster: Callable[[int], SshCluster], tmp_path: Path) -> None:
    cluster = ssh_cluster(3)
    hostfile = cluster.hostfile([f"{address} slots=1" for address in cluster.addresses])
    run = ddpkit_in(cluster.sim, 0, tmp_path, "test", "--quick", "--hostfile", str(hostfile),
                    "--run-dir", str(tmp_path / "runs"), "--output-dir", str(tmp_path / "out"),
                    *cluster.ssh_flags())
    assert wait_all([run], timeout=160)
    assert run.code == 0, run.err[-4000:]
    assert "3 nodes × 1 rank: all checks passed" in run.out and "via eth1" in run.out
    a = cluster.addresses[0]
    assert f"node 0 {a} (node0, this machine): ok" in run.err
    assert f"master address {a} (node 0's (node0) source address on its route to node 1" in run.err
    assert sorted(p.name for p in (tmp_path / "out").glob("*.log")) == [
        f"node{i}-{address}.log" for i, address in enumerate(cluster.addresses)]
    cluster.assert_nodes_clean()


@pytest.mark.timeout(180)
def test_a_rank_sigkilled_on_node1_stops_every_node(ssh_cluster: Callable[[int], SshCluster],
                                                    tmp_path: Path) -> None:
    cluster = ssh_cluster(3)
    killer = script(tmp_path, "kill.py", KILLER)
    run = ddpkit_in(cluster.sim, 0, tmp_path, "launch", "--hosts", ",".join(cluster.addresses),
                    "--run-dir", str(tmp_path / "runs"), *cluster.ssh_flags(), str(killer),
                    str(tmp_path))
    assert wait_all([run], timeout=160)
    ended = time.time()
    assert run.code == ExitCode.JOB_FAILED, run.err[-4000:]
    killed_at = float((tmp_path / "killed-at").read_text())
    assert ended - killed_at < 15, f"the job took {ended - killed_at:.1f} s to stop after the kill"
    node1 = cluster.addresses[1]
    summary = error_message(run.err)
    assert summary.startswith(f"error [job-failed]: node 1 ({node1}, rank 1, local rank 0) failed "
                              "first: killed by SIGKILL. Its last output: "), summary
    assert "rank 1 about to SIGKILL itself" in summary
    cluster.assert_nodes_clean()


@pytest.mark.timeout(90)
def test_hosts_that_are_down_are_all_named_before_anything_runs(
        ssh_cluster: Callable[[int], SshCluster], tmp_path: Path) -> None:
    cluster = ssh_cluster(2)
    cluster.stop_sshd(1)
    nobody = cluster.addresses[0].rsplit(".", 1)[0] + ".99"
    started = time.monotonic()
    run = ddpkit_in(cluster.sim, 0, tmp_path, "launch", "--hosts",
                    f"{cluster.addresses[0]},{cluster.addresses[1]},{nobody}", "--run-dir",
                    str(tmp_path / "runs"), "--ssh-config", str(cluster.client_config),
                    "--ssh-connect-timeout", "3", "x.py")
    assert wait_all([run], timeout=60)
    assert time.monotonic() - started < 30
    assert run.code == ExitCode.NETWORK, run.err[-3000:]
    said = " ".join(run.err.split())  # the error wraps at 100 columns
    assert "error [preflight-failed]: 2 of 3 hosts are not ready" in said
    assert f"node 1 {cluster.addresses[1]}: unreachable over ssh" in said
    assert "Connection refused" in said
    assert f"node 2 {nobody}: unreachable over ssh" in said
    assert not (tmp_path / "runs").exists(), "a node was started although preflight failed"


@pytest.mark.timeout(150)
def test_ctrl_c_on_the_controller_leaves_no_process_on_any_node(
        ssh_cluster: Callable[[int], SshCluster], tmp_path: Path) -> None:
    cluster = ssh_cluster(3)
    sleeper = script(tmp_path, "sleep.py", SLEEPER)
    run = ddpkit_in(cluster.sim, 0, tmp_path, "launch", "--hosts", ",".join(cluster.addresses),
                    "--run-dir", str(tmp_path / "runs"), *cluster.ssh_flags(), str(sleeper),
                    str(tmp_path))
    pid_files = [tmp_path / f"rank{r}.pid" for r in range(3)]
    wait_for_files(pid_files, [run], timeout=100)
    census = {i: cluster.node_processes(i) for i in range(3)}
    assert all(len(procs) >= 3 for procs in census.values()), census  # ddpkit, torchrun, a rank
    workers = [int(p.read_text()) for p in pid_files]
    run.proc.send_signal(signal.SIGINT)
    assert wait_all([run], timeout=60)
    assert run.code == ExitCode.INTERRUPTED, run.err[-3000:]
    assert "stopping every node: interrupted on the controller" in run.err
    assert alive([psutil.Process(pid) for pid in workers if psutil.pid_exists(pid)]) == []
    cluster.assert_nodes_clean()
    for index, procs in census.items():
        assert not [pid for pid in procs if psutil.pid_exists(pid) and
                    psutil.Process(pid).status() != psutil.STATUS_ZOMBIE], f"node {index}"


@pytest.mark.timeout(120)
def test_an_ssh_session_that_dies_fails_the_job_naming_the_node(
        ssh_cluster: Callable[[int], SshCluster], tmp_path: Path) -> None:
    cluster = ssh_cluster(2)
    sleeper = script(tmp_path, "sleep.py", SLEEPER)
    run = ddpkit_in(cluster.sim, 0, tmp_path, "launch", "--hosts", ",".join(cluster.addresses),
                    "--run-dir", str(tmp_path / "runs"), *cluster.ssh_flags(), str(sleeper),
                    str(tmp_path))
    wait_for_files([tmp_path / "rank0.pid", tmp_path / "rank1.pid"], [run], timeout=90)
    sessions = cluster.sessions(1)
    assert sessions, "no ssh session serves node 1"
    for session in sessions:  # the connection dies, as when a network or a server goes away
        session.kill()
    assert wait_all([run], timeout=60)
    assert run.code == ExitCode.JOB_FAILED, run.err[-3000:]
    node1 = cluster.addresses[1]
    assert f"error [job-failed]: node 1 ({node1}) failed first: the ssh session to {node1} ended" \
        in run.err
    cluster.assert_nodes_clean()


@pytest.mark.timeout(90)
def test_hostile_arguments_arrive_literally_over_ssh(ssh_cluster: Callable[[int], SshCluster],
                                                     tmp_path: Path) -> None:
    cluster = ssh_cluster(2)
    echo = script(tmp_path, "echo.py", ECHO)
    marker = tmp_path / "pwned"
    hostile = [f"; touch {marker} #", f"$(touch {marker})", "it's \"quoted\"", "two  spaces",
               "line\nbreak", "*"]
    (tmp_path / ".ddpkit_env").write_text(f"DDPK_FROM_FILE='a file; value $(touch {marker})'\n")
    run = ddpkit_in(cluster.sim, 0, tmp_path, "launch", "--hosts", cluster.addresses[1],
                    "--run-dir", str(tmp_path / "runs"), *cluster.ssh_flags(),
                    "--env", f"DDPK_OUT={tmp_path / 'seen.json'}", "--env", f"DDPK_X=a'b;touch {marker}",
                    str(echo), *hostile,
                    env={"TORCH_DDPK_PASSED": "yes", "DDPK_SECRET": "stays here"})
    assert wait_all([run], timeout=70)
    assert run.code == 0, run.err[-3000:]
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["argv"] == hostile
    assert seen["env"] == {"DDPK_OUT": str(tmp_path / "seen.json"), "DDPK_X": f"a'b;touch {marker}",
                           "DDPK_FROM_FILE": f"a file; value $(touch {marker})",
                           "TORCH_DDPK_PASSED": "yes"}  # the allow-list: no DDPK_SECRET
    assert seen["cwd"] == str(tmp_path)
    assert not marker.exists(), "the remote shell executed part of an argument"
    refused = ddpkit_in(cluster.sim, 0, tmp_path, "launch", f"--hosts={cluster.addresses[1]};touch "
                        f"{marker}", *cluster.ssh_flags(), str(echo))
    assert wait_all([refused], timeout=30)
    assert refused.code == ExitCode.CONFIG and "error [bad-hosts]" in refused.err
    assert not marker.exists()
