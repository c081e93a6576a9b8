"""Issue 22 on a simulated cluster: a crafted value written into the job store by another host
does not take the master down, and a worker cut off from the network empties itself in time."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from jobs import SLEEPER, script, start_in, wait_for_files
from multinode import wait_all
from test_join_sim import _census_clean, _join, _master, _namespace_processes

from ddpkit.errors import ExitCode
from ddpkit.sim.topology import SimCluster

pytestmark = [pytest.mark.root, pytest.mark.slow]

# Every rank waits for the attack to be over, then meets the others and ends well.
PATIENT = textwrap.dedent("""
    import datetime, os, pathlib, sys, time, torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    out = pathlib.Path(sys.argv[1])
    (out / f"rank{dist.get_rank()}.pid").write_text(str(os.getpid()))
    deadline = time.monotonic() + 90
    while not (out / "attacked").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    dist.barrier()
""")
# Someone on the private network who knows the store's port, not the token's secret: lists the
# keys to learn the run id, then writes 200,000 '[' under the keys the master reads.
ATTACK = textwrap.dedent("""
    import datetime, sys
    from torch.distributed import TCPStore
    store = TCPStore(sys.argv[1], int(sys.argv[2]), None, False, datetime.timedelta(seconds=20),
                     wait_for_workers=False)
    run = next(k.split("/")[1] for k in store.list_keys() if k.startswith("ddpkit/"))
    for name in sys.argv[3:]:
        store.set(f"ddpkit/{run}/{name}", b"[" * 200_000)
    store.check([f"ddpkit/{run}/job"])  # a round trip: every write above has arrived
""")


def _attack(cluster: SimCluster, tmp_path: Path, token: str, *names: str) -> None:
    address, port = token.removeprefix("ddpk://").split("/")[0].rsplit(":", 1)
    attacker = start_in(cluster, 1, [sys.executable, str(script(tmp_path, "attack.py", ATTACK)),
                                     address, port, *names], tmp_path)
    assert wait_all([attacker], timeout=60)
    assert attacker.code == 0, attacker.err[-3000:]


@pytest.mark.timeout(240)
def test_the_master_survives_a_crafted_value_and_the_job_succeeds(
        sim_cluster: Callable[..., SimCluster], tmp_path: Path) -> None:
    cluster = sim_cluster(nodes=2)
    patient = script(tmp_path, "patient.py", PATIENT)
    master, token = _master(cluster, tmp_path, "launch", "--nnodes", "2", "--join-timeout", "90",
                            entry=(str(patient), str(tmp_path)))
    _attack(cluster, tmp_path, token, "node/1", "alive/1", "stop", "job")  # before the join
    worker = _join(cluster, 1, tmp_path, token)
    wait_for_files([tmp_path / "rank0.pid", tmp_path / "rank1.pid"], [master, worker], timeout=120)
    _attack(cluster, tmp_path, token, "alive/1", "done/1", "stop", "go")  # while it runs
    (tmp_path / "attacked").write_text("1")
    assert wait_all([master, worker], timeout=150)
    assert master.code == 0, master.err[-4000:]
    assert worker.code == 0, worker.err[-4000:]
    assert "internal-error" not in master.err + worker.err
    assert "that this job did not write" in master.err  # warned, once per key
    _census_clean(cluster)


@pytest.mark.timeout(240)
def test_a_worker_cut_off_from_the_network_is_empty_within_30_s(
        sim_cluster: Callable[..., SimCluster], tmp_path: Path) -> None:
    cluster = sim_cluster(nodes=2)
    sleeper = script(tmp_path, "sleep.py", SLEEPER)
    master, token = _master(cluster, tmp_path, "launch", "--nnodes", "2", "--join-timeout", "90",
                            entry=(str(sleeper), str(tmp_path)))
    worker = _join(cluster, 1, tmp_path, token)
    wait_for_files([tmp_path / "rank0.pid", tmp_path / "rank1.pid"], [master, worker], timeout=120)
    assert len(_namespace_processes(cluster, 1)) >= 3  # ddpkit join, torchrun, a rank
    peer = cluster.nodes[1].host_private_peer
    subprocess.run(["ip", "link", "set", peer, "down"], check=True, timeout=30)
    cut = time.monotonic()
    while _namespace_processes(cluster, 1):
        assert time.monotonic() - cut <= 30, (
            f"node 1 still runs {_namespace_processes(cluster, 1)} "
            f"{time.monotonic() - cut:.0f} s after its link went down")
        time.sleep(0.2)
    emptied = time.monotonic() - cut
    assert wait_all([master, worker], timeout=60)
    assert master.code == ExitCode.JOB_FAILED and "node-lost" in master.err, master.err[-3000:]
    assert worker.code not in (0, None) and "internal-error" not in worker.err, worker.err[-3000:]
    print(f"node 1 empty {emptied:.1f} s after its link went down")
    subprocess.run(["ip", "link", "set", peer, "up"], check=True, timeout=30)
    _census_clean(cluster)
