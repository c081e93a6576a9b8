"""SIGTERM to `ddpkit sim exec ... -- ddpkit launch ...` stops the launch inside the node (issue 21).

Node 1's rank dies, so node 0's torchrun waits in its exit barrier; then SIGTERM goes to node 0's
`sim exec`, the way `kill PID` does (that process only) or the way `timeout` does (that process,
then its whole process group: the launch inside gets it twice). Before the fix `sim exec` died at
once and left launch and torchrun running in the node, holding the master port. Now the node must
be empty within 15 s, and `sim exec` exits with the launch's interrupted status.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from multinode import clean_env, kill_tree

from ddpkit.errors import ExitCode
from ddpkit.sim.topology import SimCluster
from ports import free_port

pytestmark = [pytest.mark.root, pytest.mark.slow]

# Rank 0 lives long enough for ddpkit's scans to see it (a rank that ends between two scans leaves
# node 0 saying it waits for the rendezvous), and ends before rank 1 fails.
RANKS = """
import os, sys, time
if os.environ["RANK"] == "1":
    time.sleep(4)
    sys.exit(3)
time.sleep(1)
print("rank 0 done", flush=True)
"""




def _in_node(cluster: SimCluster, index: int) -> list[int]:
    inode = os.stat(f"/run/netns/{cluster.nodes[index].namespace}").st_ino
    found = []
    for pid in psutil.pids():
        try:
            if os.stat(f"/proc/{pid}/ns/net").st_ino == inode:
                found.append(pid)
        except OSError:
            continue
    return found


def _sim_exec(cluster: SimCluster, index: int, tmp_path: Path, script: Path,
              port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ddpkit", "sim", "exec", "--name", cluster.name, str(index), "--",
         sys.executable, "-m", "ddpkit", "launch", "--nnodes", "2", "--node-rank", str(index),
         "--master-addr", cluster.nodes[0].private_address, "--master-port", str(port),
         "--run-dir", str(tmp_path / f"node{index}"), str(script)],
        env=clean_env(), text=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, start_new_session=True)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("delivery", ["pid", "timeout-style"])
def test_sigterm_through_sim_exec_empties_a_node_in_the_exit_barrier(
        delivery: str, sim_cluster: Callable[..., SimCluster], tmp_path: Path) -> None:
    cluster = sim_cluster(nodes=2)
    script = tmp_path / "train.py"
    script.write_text(RANKS)
    port = free_port()
    procs = [_sim_exec(cluster, i, tmp_path, script, port) for i in (0, 1)]
    lines: queue.Queue[str] = queue.Queue()
    seen: list[str] = []

    def read() -> None:
        assert procs[0].stderr is not None
        for line in procs[0].stderr:
            lines.put(line.rstrip("\n"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        _, node1_err = procs[1].communicate(timeout=90)
        assert procs[1].returncode != 0 and "rank 1" in node1_err, node1_err[-3000:]  # node 1 is done
        deadline = time.monotonic() + 60
        while not any("exit barrier" in line for line in seen):  # a wrapped status line
            assert time.monotonic() < deadline, (
                f"{node1_err[-1500:]}\nnode 0 never said it waits in the exit barrier:\n"
                + "\n".join(seen[-30:]))
            try:
                seen.append(lines.get(timeout=1))
            except queue.Empty:
                assert procs[0].poll() is None, "\n".join(seen[-30:])
        assert _in_node(cluster, 0), "nothing runs in node 0 before the signal"

        sent = time.monotonic()
        procs[0].send_signal(signal.SIGTERM)
        if delivery == "timeout-style":  # coreutils timeout: the command, then its process group
            os.killpg(procs[0].pid, signal.SIGTERM)
        while (left := _in_node(cluster, 0)) and time.monotonic() - sent < 15:
            time.sleep(0.1)
        emptied = time.monotonic() - sent
        code = procs[0].wait(timeout=15)
    finally:
        for proc in procs:
            if proc.poll() is None:
                kill_tree(proc.pid)
    reader.join(timeout=5)
    while not lines.empty():
        seen.append(lines.get())
    assert left == [], f"still in node 0 {emptied:.1f} s after SIGTERM: " + \
        str([" ".join(psutil.Process(p).cmdline()) for p in left if psutil.pid_exists(p)])
    assert code == ExitCode.INTERRUPTED, "\n".join(seen[-30:])
    assert any("stopped torchrun" in line for line in seen), "\n".join(seen[-30:])
    assert not any(line.startswith("Traceback") for line in seen), "\n".join(seen[-30:])
