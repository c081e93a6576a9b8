"""Issue 32 on a simulated cluster: a stranger's torchrun, started on a third machine of the
private network as ``--node-rank 1`` before the real node 1, makes the job stop within 30 s naming
the stranger's address, and no rank's data ever reaches it (the membership gate,
``ddpkit.workers.member_gate``), in token mode and with ``--hosts``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from jobs import SLEEPER, ddpkit_in, script, start_in, wait_for_files
from multinode import NodeRun, kill_tree, wait_all
from sshnodes import SshCluster
from test_join_sim import _census_clean, _join, _master

from ddpkit.sim.topology import SimCluster, node_argv

pytestmark = [pytest.mark.root, pytest.mark.slow]

PORT = "29531"
STOP_WITHIN_S = 30.0
# The job's script: says that it ran, then sums a tensor with every rank.
TRAIN = textwrap.dedent("""
    import datetime, os, pathlib, socket, sys, torch, torch.distributed as dist
    out = pathlib.Path(sys.argv[1])
    (out / f"ran-{socket.gethostname()}-{os.environ['RANK']}").write_text("1")
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    t = torch.full((4,), float(dist.get_rank() + 1))
    dist.all_reduce(t)
""")
# The stranger's script: joins the process group and keeps whatever the job's ranks send.
STRANGER = textwrap.dedent("""
    import datetime, os, pathlib, sys, torch, torch.distributed as dist
    out = pathlib.Path(sys.argv[1])
    (out / f"stranger-started-{os.environ['RANK']}").write_text(repr(__import__('time').time()))
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    t = torch.zeros(4)
    dist.all_reduce(t)
    (out / f"stranger-got-{os.environ['RANK']}").write_text(repr(t.tolist()))
""")


# torchrun, already imported, started the moment the master's port opens: the stranger is at
# the rendezvous before the real node 1 (whose torchrun starts when ddpkit tells it to).
EAGER_TORCHRUN = textwrap.dedent("""
    import socket, sys, time
    import torch.distributed.run as torchrun
    address, port = sys.argv[1], int(sys.argv[2])
    while True:
        try:
            socket.create_connection((address, port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.02)
    sys.argv = ["torchrun", *sys.argv[3:]]
    torchrun.main()
""")


def _stranger(sim: SimCluster, tmp_path: Path) -> NodeRun:
    """torchrun on node 2 as node 1 of a 2-node job on node 0's port: no ddpkit, no secret."""
    out = tmp_path / "stranger"
    out.mkdir()
    master = sim.nodes[0].private_address
    argv = [sys.executable, str(script(tmp_path, "eager.py", EAGER_TORCHRUN)), master, PORT,
            "--nnodes=2", "--nproc-per-node=1", "--node-rank=1", f"--master-addr={master}",
            f"--master-port={PORT}", "--rdzv-conf=timeout=120",
            str(script(tmp_path, "stranger.py", STRANGER)), str(out)]
    return start_in(sim, 2, argv, tmp_path)


def _check_stopped(sim: SimCluster, tmp_path: Path, master: NodeRun, ended: float) -> None:
    stranger_address = sim.nodes[2].private_address
    started = [float(p.read_text()) for p in (tmp_path / "stranger").glob("stranger-started-*")]
    assert started, "the stranger's rank never started: the test did not attack"
    assert ended - min(started) < STOP_WITHIN_S, f"stopped {ended - min(started):.1f} s after"
    assert master.code not in (0, None), master.err[-4000:]
    assert "membership check failed" in master.err, master.err[-4000:]
    assert stranger_address in master.err, master.err[-4000:]
    assert not list((tmp_path / "stranger").glob("stranger-got-*")), "the stranger got data"
    assert not list(tmp_path.glob("ran-*")), "a script of the job ran"


@pytest.mark.timeout(300)
def test_a_stranger_joining_as_node_1_stops_a_token_job_naming_its_address(
        sim_cluster: Callable[..., SimCluster], tmp_path: Path) -> None:
    cluster = sim_cluster(nodes=3)
    stranger = _stranger(cluster, tmp_path)
    train = script(tmp_path, "train.py", TRAIN)
    try:
        master, token = _master(cluster, tmp_path, "launch", "--nnodes", "2", "--nproc-per-node",
                                "1", "--master-port", PORT, "--join-timeout", "90",
                                entry=(str(train), str(tmp_path)))
        worker = _join(cluster, 1, tmp_path, token)
        wait_for_files([tmp_path / "stranger" / "stranger-started-1"], [master], timeout=120)
        assert wait_all([master], timeout=90)
        ended = time.time()
        assert wait_all([worker], timeout=60)
        _check_stopped(cluster, tmp_path, master, ended)
        print(f"token mode: stopped {ended - _first_start(tmp_path):.1f} s after the stranger's "
              f"rank started", file=sys.stderr)
    finally:
        kill_tree(stranger.proc.pid)
        wait_all([stranger], timeout=30)
    _census_clean(cluster)


@pytest.mark.timeout(300)
def test_a_stranger_joining_as_node_1_stops_a_hosts_job_naming_its_address(
        ssh_cluster: Callable[[int], SshCluster], tmp_path: Path) -> None:
    cluster = ssh_cluster(3)
    stranger = _stranger(cluster.sim, tmp_path)
    train = script(tmp_path, "train.py", TRAIN)
    a, b, _c = cluster.addresses
    try:
        time.sleep(2)  # the stranger is first at the port
        run = ddpkit_in(cluster.sim, 0, tmp_path, "launch", "--hosts", f"{a},{b}",
                        "--nproc-per-node", "1", "--master-port", PORT, "--run-dir",
                        str(tmp_path / "runs"), *cluster.ssh_flags(), str(train), str(tmp_path))
        assert wait_all([run], timeout=150)
        ended = time.time()
        _check_stopped(cluster.sim, tmp_path, run, ended)
        print(f"--hosts: stopped {ended - _first_start(tmp_path):.1f} s after the stranger's "
              f"rank started", file=sys.stderr)
    finally:
        kill_tree(stranger.proc.pid)
        wait_all([stranger], timeout=30)
    cluster.assert_nodes_clean()


def _first_start(tmp_path: Path) -> float:
    return min(float(p.read_text()) for p in (tmp_path / "stranger").glob("stranger-started-*"))


@pytest.mark.timeout(240)
def test_per_node_without_a_secret_warns_and_the_store_listens_on_the_private_address_only(
        sim_cluster: Callable[..., SimCluster], tmp_path: Path) -> None:
    cluster = sim_cluster(nodes=2)
    master = cluster.nodes[0].private_address
    sleeper = script(tmp_path, "sleep.py", SLEEPER)
    runs = [ddpkit_in(cluster, i, tmp_path, "launch", "--nnodes", "2", "--node-rank", str(i),
                      "--master-addr", master, "--master-port", PORT, "--nproc-per-node", "1",
                      "--run-dir", str(tmp_path / f"node{i}"), str(sleeper), str(tmp_path))
            for i in (0, 1)]
    try:
        wait_for_files([tmp_path / "rank0.pid", tmp_path / "rank1.pid"], runs, timeout=120)
        listening = subprocess.run(node_argv(cluster, 0, ["ss", "-ltnH", f"sport = :{PORT}"]),
                                   capture_output=True, text=True, timeout=30).stdout.split()
        print(f"ss in node 0: {' '.join(listening)}", file=sys.stderr)
        assert listening[3] == f"{master}:{PORT}", listening  # not *:PORT
    finally:
        for run in runs:
            kill_tree(run.proc.pid)
        wait_all(runs, timeout=30)
    for run in runs:
        assert run.err.count("anyone on the private network who reaches") == 1, run.err[-3000:]
    _census_clean(cluster)
