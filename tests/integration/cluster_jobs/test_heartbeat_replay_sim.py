"""Issue 32 (heartbeat replay) on a simulated cluster: someone on a third machine copies node 1's
sealed ``alive/1`` values from the job store while the job runs, node 1 is cut off, and they write
the copies back in turn; the master still declares node 1 lost within 30 s and stops the job."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from jobs import SLEEPER, script, start_in, wait_for_files
from multinode import alive, kill_tree, wait_all
from test_join_sim import _census_clean, _join, _master

from ddpkit.errors import ExitCode
from ddpkit.sim.topology import SimCluster

pytestmark = [pytest.mark.root, pytest.mark.slow]

LOST_WITHIN_S = 30.0
# Copies two different values of alive/1, then writes them back in turn until told to stop.
REPLAY = textwrap.dedent("""
    import datetime, pathlib, sys, time
    from torch.distributed import TCPStore
    store = TCPStore(sys.argv[1], int(sys.argv[2]), None, False, datetime.timedelta(seconds=20),
                     wait_for_workers=False)
    out = pathlib.Path(sys.argv[3])
    run = next(k.split("/")[1] for k in store.list_keys() if k.startswith("ddpkit/"))
    key = f"ddpkit/{run}/alive/1"
    seen = []
    while len(seen) < 2:
        value = bytes(store.get(key))
        if value and value not in seen:
            seen.append(value)
        time.sleep(0.3)
    (out / "captured").write_text(str(len(seen)))
    deadline = time.monotonic() + 100
    while time.monotonic() < deadline and not (out / "stop-replay").exists():
        for value in seen:
            store.set(key, value)
            time.sleep(0.5)
""")


@pytest.mark.timeout(300)
def test_replayed_heartbeats_do_not_keep_a_cut_off_node_alive(
        sim_cluster: Callable[..., SimCluster], tmp_path: Path) -> None:
    cluster = sim_cluster(nodes=3)
    sleeper = script(tmp_path, "sleep.py", SLEEPER)
    master, token = _master(cluster, tmp_path, "launch", "--nnodes", "2", "--nproc-per-node", "1",
                            "--join-timeout", "90", entry=(str(sleeper), str(tmp_path)))
    worker = _join(cluster, 1, tmp_path, token)
    wait_for_files([tmp_path / "rank0.pid", tmp_path / "rank1.pid"], [master, worker], timeout=120)
    rank0 = psutil.Process(int((tmp_path / "rank0.pid").read_text()))
    address, port = token.removeprefix("ddpk://").split("/")[0].rsplit(":", 1)
    replay = start_in(cluster, 2, [sys.executable, str(script(tmp_path, "replay.py", REPLAY)),
                                   address, port, str(tmp_path)], tmp_path)
    peer = cluster.nodes[1].host_private_peer
    try:
        wait_for_files([tmp_path / "captured"], [master, worker, replay], timeout=60)
        subprocess.run(["ip", "link", "set", peer, "down"], check=True, timeout=30)
        cut = time.monotonic()
        while alive([rank0]):  # node 0's rank runs until the master declares node 1 lost
            assert time.monotonic() - cut <= LOST_WITHIN_S, (
                f"node 0's rank still runs {time.monotonic() - cut:.0f} s after node 1 was cut "
                "off: the replayed heartbeats kept node 1 alive")
            time.sleep(0.2)
        stopped = time.monotonic() - cut
        assert replay.proc.poll() is None, "the replay ended before the job did"
        assert wait_all([master], timeout=90)
        print(f"node 0's rank stopped {stopped:.1f} s after node 1 was cut off, while the copies "
              "were replayed", file=sys.stderr)
        assert master.code == ExitCode.JOB_FAILED, master.err[-3000:]
        said = " ".join(master.err.split())  # the summary is wrapped to the terminal
        assert "stopped responding: no heartbeat for 10 s" in said, master.err[-3000:]
        assert "stale or replayed heartbeat value(s) ignored" in said, master.err[-3000:]
    finally:
        (tmp_path / "stop-replay").write_text("1")
        subprocess.run(["ip", "link", "set", peer, "up"], check=True, timeout=30)
        wait_all([replay], timeout=30)
        wait_all([worker], timeout=60)
        for run in (master, worker):
            if run.proc.poll() is None:
                kill_tree(run.proc.pid)
    assert os.path.exists(tmp_path / "captured")
    _census_clean(cluster)
