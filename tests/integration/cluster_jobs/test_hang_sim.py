"""Hang diagnosis on a simulated 2-node cluster, 2 ranks per node (issue 14).

Rank 3 (node 1, local rank 1) sleeps where the others call all_reduce: every node's ddpkit must
report within 30 s, dump every rank's stack before anything is stopped, and node 1's report names
rank 3, its node and the sleeping line. A job whose ranks all compute silently for longer than
the hang timeout is not reported, and `ddpkit stacks` on a healthy job changes nothing.
"""

from __future__ import annotations

import json
import os
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from jobs import ddpkit_in, script
from multinode import NodeRun, wait_all
from sshnodes import SshCluster

from ddpkit.errors import ExitCode
from ddpkit.sim.topology import SimCluster
from ports import free_port

pytestmark = [pytest.mark.root, pytest.mark.slow]

SKIPPER = textwrap.dedent("""
    import datetime, pathlib, sys, time
    import torch, torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    rank = dist.get_rank()
    t = torch.ones(4)
    if rank == 3:
        pathlib.Path(sys.argv[1], "sleep-started").write_text(repr(time.time()))
        time.sleep(600)  # the line the report must name
    else:
        dist.all_reduce(t)
""")
BUSY = textwrap.dedent("""
    import datetime, sys, time
    import torch, torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    end = time.monotonic() + float(sys.argv[1])
    x = 0
    while time.monotonic() < end:  # silent: no output, only CPU
        x += 1
    t = torch.ones(4)
    dist.all_reduce(t)
    print(f"rank {dist.get_rank()} done {t[0].item():g}", flush=True)
    dist.destroy_process_group()
""")
LONE = textwrap.dedent("""
    import datetime, sys, time
    import torch, torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    if dist.get_rank() == 0:  # an evaluation on rank 0 alone, silent; everyone else waits
        end = time.monotonic() + float(sys.argv[1])
        while time.monotonic() < end:
            pass
    dist.barrier()
    print(f"rank {dist.get_rank()} past the barrier", flush=True)
    dist.destroy_process_group()
""")
HEALTHY = textwrap.dedent("""
    import datetime, pathlib, sys, time
    import torch, torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    stop = pathlib.Path(sys.argv[1], "stop")
    steps = 0
    while True:
        t = torch.tensor([float(stop.exists())])
        dist.all_reduce(t)
        if t.item() > 0:
            break
        steps += 1
        if steps == 1:
            pathlib.Path(sys.argv[1], f"ready{dist.get_rank()}").write_text("")
        time.sleep(0.2)
    print(f"rank {dist.get_rank()} finished after {steps} steps", flush=True)
    dist.barrier()
    dist.destroy_process_group()
""")




def _launch(cluster: SimCluster, tmp_path: Path, entry: Path, *extra: str) -> list[NodeRun]:
    master, port = cluster.nodes[0].private_address, str(free_port())
    return [ddpkit_in(cluster, i, tmp_path, "launch", "--nnodes", "2", "--node-rank", str(i),
                      "--master-addr", master, "--master-port", port, "--nproc-per-node", "2",
                      "--run-dir", str(tmp_path / f"run{i}"), *extra, str(entry), str(tmp_path))
            for i in range(2)]


def _rank_pids(tmp_path: Path) -> list[int]:
    pids = []
    for i in range(2):
        with_ranks = tmp_path / f"run{i}" / "ranks.json"
        if with_ranks.exists():
            pids += [r["pid"] for r in json.loads(with_ranks.read_text())["ranks"]]
    return pids


def _wait_for(path: Path, runs: list[NodeRun], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        for run in runs:
            assert run.proc.poll() is None, f"node {run.index} ended early:\n{run.proc.communicate()[1]}"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.2)


@pytest.mark.timeout(200)
def test_the_sleeping_rank_is_named_and_stop_leaves_nothing(sim_cluster: Callable[..., SimCluster],
                                                           tmp_path: Path) -> None:
    cluster = sim_cluster(nodes=2)
    entry = script(tmp_path, "skipper.py", SKIPPER)
    runs = _launch(cluster, tmp_path, entry, "--hang-timeout", "15", "--hang-action", "stop")
    assert wait_all(runs, timeout=150), "ddpkit did not stop the hung job"
    slept_at = float((tmp_path / "sleep-started").read_text())
    for run in runs:
        assert run.code == ExitCode.TIMEOUT, run.err[-4000:]
        assert "error [job-hung]" in run.err
        summary = tmp_path / f"run{run.index}" / "stacks" / "summary.txt"
        latency = summary.stat().st_mtime - slept_at
        print(f"node {run.index}: hang to report {latency:.1f} s")  # the measured figure
        assert latency <= 30, latency
    node1 = runs[1].err
    assert "rank 3 is at skipper.py:9 `time.sleep(600)  # the line the report must name`" in node1
    assert "likely cause: rank 3 (node1, pid " in node1
    assert "rank 2 waits in all_reduce at skipper.py:11 `dist.all_reduce(t)`" in node1
    assert "ranks 0, 1 wait in all_reduce at skipper.py:11" in runs[0].err
    for rank, node in ((0, 0), (1, 0), (2, 1), (3, 1)):
        text = (tmp_path / f"run{node}" / "stacks" / f"rank{rank}.txt").read_text()
        assert text.startswith(f"rank {rank} (local rank {rank % 2}, pid ") and "Thread" in text
    assert "<module> (skipper.py:9)" in (tmp_path / "run1" / "stacks" / "rank3.txt").read_text()
    pids = _rank_pids(tmp_path)
    assert len(pids) == 4
    assert [p for p in pids if psutil.pid_exists(p)] == []  # the fixture also checks each node


@pytest.mark.timeout(200)
def test_all_ranks_computing_silently_past_the_timeout_is_not_a_hang(
        sim_cluster: Callable[..., SimCluster], tmp_path: Path) -> None:
    cluster = sim_cluster(nodes=2)
    entry = script(tmp_path, "busy.py", BUSY)
    master, port = cluster.nodes[0].private_address, str(free_port())
    runs = [ddpkit_in(cluster, i, tmp_path, "launch", "--nnodes", "2", "--node-rank", str(i),
                      "--master-addr", master, "--master-port", port, "--nproc-per-node", "2",
                      "--run-dir", str(tmp_path / f"run{i}"), "--hang-timeout", "8",
                      "--hang-action", "stop", str(entry), "25")
            for i in range(2)]
    assert wait_all(runs, timeout=150)
    for run in runs:
        assert run.code == 0, run.err[-4000:]
        assert "looks hung" not in run.err
        assert not (tmp_path / f"run{run.index}" / "stacks").exists()
    assert "rank 0 done 4" in runs[0].out and "rank 3 done 4" in runs[1].out


@pytest.mark.timeout(200)
def test_ranks_waiting_for_a_rank_computing_on_another_node_are_not_hung(
        sim_cluster: Callable[..., SimCluster], tmp_path: Path) -> None:
    cluster = sim_cluster(nodes=2)
    entry = script(tmp_path, "lone.py", LONE)
    master, port = cluster.nodes[0].private_address, str(free_port())
    runs = [ddpkit_in(cluster, i, tmp_path, "launch", "--nnodes", "2", "--node-rank", str(i),
                      "--master-addr", master, "--master-port", port, "--nproc-per-node", "2",
                      "--run-dir", str(tmp_path / f"run{i}"), "--hang-timeout", "8",
                      "--hang-action", "stop", str(entry), "25")
            for i in range(2)]
    assert wait_all(runs, timeout=150)
    for run in runs:  # node 1's ranks idled 25 s > 8 s, but rank 0 on node 0 was computing
        assert run.code == 0, run.err[-4000:]
        assert "looks hung" not in run.err
    assert "rank 3 past the barrier" in runs[1].out


@pytest.mark.timeout(200)
def test_stacks_of_a_healthy_running_job_change_nothing(sim_cluster: Callable[..., SimCluster],
                                                       tmp_path: Path) -> None:
    cluster = sim_cluster(nodes=2)
    entry = script(tmp_path, "healthy.py", HEALTHY)
    runs = _launch(cluster, tmp_path, entry)
    try:
        for rank in range(4):
            _wait_for(tmp_path / f"ready{rank}", runs, 120)  # every rank is in the loop
        before = _rank_pids(tmp_path)
        stacks = ddpkit_in(cluster, -1, tmp_path, "stacks", str(tmp_path / "run0"),
                           str(tmp_path / "run1"), "--json")
        start = time.monotonic()
        assert wait_all([stacks], timeout=30)
        took = time.monotonic() - start
        print(f"ddpkit stacks for 4 ranks: {took:.2f} s")
        assert stacks.code == 0, stacks.err[-3000:]
        doc = json.loads(stacks.out)
        assert doc["schema"] == "ddpkit.stacks/1"
        assert sorted(s["rank"] for s in doc["stacks"]) == [0, 1, 2, 3]
        assert all(s["ok"] and "healthy.py" in s["text"] for s in doc["stacks"])
        assert all(s["where"]["at"].startswith("healthy.py:") for s in doc["stacks"])
        assert not (tmp_path / "run0" / "stacks").exists()
        assert all(psutil.pid_exists(p) for p in before)
    finally:
        (tmp_path / "stop").write_text("")
    assert wait_all(runs, timeout=60)
    for run in runs:
        assert run.code == 0, run.err[-3000:]
    assert "finished after" in runs[0].out and "finished after" in runs[1].out
    assert os.path.exists(tmp_path / "run0" / "ranks.json")


@pytest.mark.timeout(240)
def test_hosts_mode_groups_every_rank_of_the_job_and_stops_it(
        ssh_cluster: Callable[[int], SshCluster], tmp_path: Path) -> None:
    cluster = ssh_cluster(2)
    entry = script(tmp_path, "skipper.py", SKIPPER)
    a, b = cluster.addresses
    run = ddpkit_in(cluster.sim, 0, tmp_path, "launch", "--hosts", f"{a}:2,{b}:2", "--json",
                    "--run-dir", str(tmp_path / "runs"), "--hang-timeout", "15", "--hang-action",
                    "stop", *cluster.ssh_flags(), str(entry), str(tmp_path))
    assert wait_all([run], timeout=200)
    ended = time.time()
    slept_at = float((tmp_path / "sleep-started").read_text())
    print(f"--hosts: hang to job end {ended - slept_at:.1f} s")
    assert run.code == ExitCode.JOB_FAILED, run.err[-4000:]
    assert "every rank of the job, by where it is (2 nodes):" in run.err
    assert "ranks 0, 1, 2 wait in all_reduce at skipper.py:11" in run.err
    assert f"likely cause: rank 3 ({'node1'}, pid " in run.err, run.err[-4000:]
    doc = json.loads(run.out)
    stacks = doc["error"]["details"]["stacks"]
    assert any(line.startswith("likely cause: rank 3") for line in stacks["summary"])
    ranks = sorted(s["rank"] for r in stacks["reports"] for s in r["stacks"])
    assert ranks == [0, 1, 2, 3]
    deadline = time.monotonic() + 10
    while any(cluster.node_processes(i) for i in range(2)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(cluster.node_processes(i) for i in range(2))


@pytest.mark.timeout(240)
def test_join_token_mode_returns_every_nodes_stacks_to_the_master(
        sim_cluster: Callable[..., SimCluster], tmp_path: Path) -> None:
    cluster = sim_cluster(nodes=2)
    entry = script(tmp_path, "skipper.py", SKIPPER)
    token_file = tmp_path / "token"
    master = ddpkit_in(cluster, 0, tmp_path, "launch", "--nnodes", "2", "--nproc-per-node", "2",
                       "--join-timeout", "60", "--hang-timeout", "15", "--hang-action", "stop",
                       "--token-file", str(token_file), "--run-dir", str(tmp_path / "run0"),
                       str(entry), str(tmp_path))
    _wait_for(token_file, [master], 60)
    time.sleep(0.5)  # written whole by a rename, but give it a moment
    worker = ddpkit_in(cluster, 1, tmp_path, "join", token_file.read_text().strip(), "--run-dir",
                       str(tmp_path / "run1"))
    assert wait_all([master, worker], timeout=200)
    slept_at = float((tmp_path / "sleep-started").read_text())
    print(f"join: hang to report on node 1 "
          f"{(tmp_path / 'run1' / 'stacks' / 'summary.txt').stat().st_mtime - slept_at:.1f} s")
    assert master.code == ExitCode.JOB_FAILED, master.err[-4000:]
    assert "every rank of the job, by where it is (2 nodes):" in master.err, master.err[-4000:]
    assert "ranks 0, 1, 2 wait in all_reduce at skipper.py:11" in master.err
    assert "likely cause: rank 3 (node1, pid " in master.err
    assert [p for p in _rank_pids(tmp_path) if psutil.pid_exists(p)] == []
