"""A real Slurm on the sim: srun -N2 --ntasks-per-node=1 ddpkit test --quick and ddpkit launch of
a tiny Gloo script, with no cluster flag; and two tasks per node refused on every task.

benchmarks/slurm_sim.py brings up munged and slurmctld on the host and one slurmd in each node's
namespace, on a sim cluster reserved by the ``sim_reservation`` fixture (which, after the test,
checks that no namespace, link, hosts file or process of it remains). Skipped unless Slurm and
munge are installed (Debian: ``apt-get install slurm-wlm munge``) and we are root.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ddpkit.launch.schedulers import detect

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "slurm_sim.py"
TOOLS = ("slurmctld", "slurmd", "srun", "scontrol", "sinfo", "munged")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

pytestmark = [
    pytest.mark.root, pytest.mark.slow,
    pytest.mark.skipif(any(shutil.which(t, path=SYSTEM_PATH) is None for t in TOOLS),
                       reason="needs Slurm and munge (apt-get install slurm-wlm munge)"),
]


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("slurm_sim", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry}: {cmdline.strip()}")
    return found


@pytest.mark.timeout(420)
def test_srun_ddpkit_test_across_two_sim_nodes(sim_reservation: Callable[[], Any]) -> None:
    slurm_sim = load_script()
    assert slurm_sim.missing_tools() == []
    reservation = sim_reservation()
    slurm = slurm_sim.SlurmOnSim(reservation.name, reservation.subnet)
    work, pids = slurm.work, []
    try:
        slurm.start()
        reservation.inodes |= {os.stat(p).st_ino for p in Path("/run/netns").glob(
            f"{reservation.name}-*")}
        pids = [proc.pid for _, proc in slurm.daemons]
        assert re.match(r"slurm(-wlm)? \d+\.\d+", slurm.version()), slurm.version()  # 22.05.8
        envs = slurm.record_env()
        assert sorted(envs) == ["env-node0", "env-node1"]
        hosts = {f"{reservation.name}{node.index}": node.private_address
                 for node in slurm.cluster.nodes}
        for rank in (0, 1):
            layout = detect(envs[f"env-node{rank}"], resolve=hosts.__getitem__)
            assert layout is not None and layout.scheduler == "Slurm"
            assert (layout.nnodes, layout.node_rank, layout.master_addr,
                    layout.nproc_per_node) == (2, rank, slurm.cluster.nodes[0].private_address, "1")
        done = slurm.srun(slurm_sim.ddpkit_test_argv(str(work)), timeout=240)
        assert done.returncode == 0, done.stdout + done.stderr + slurm.logs()
        for rank in (0, 1):  # srun -l labels every line with its task
            assert re.search(rf"^{rank}: 2 nodes × 1 rank: all checks passed", done.stdout,
                             re.M), done.stdout
            assert re.search(rf"^{rank}: ddpkit: node {rank}/2 on node{rank}: inter-node "
                             "interface eth1", done.stderr, re.M), done.stderr
        launched = slurm.srun(slurm_sim.ddpkit_launch_argv(str(work)), timeout=180)
        assert launched.returncode == 0, launched.stdout + launched.stderr
        for rank in (0, 1):
            assert re.search(rf"^{rank}: .*rank {rank}/2 all_reduce sum 2$", launched.stdout,
                             re.M), launched.stdout
        # the trap, for real: two tasks per node would start the job twice on each node
        twice = slurm.srun(slurm_sim.ddpkit_launch_argv(str(work)), timeout=120, tasks_per_node=2)
        assert twice.returncode != 0
        # (--kill-on-bad-exit: the first task to refuse ends the others, so not all print it)
        assert re.search(r"^\d: error \[slurm-tasks-per-node\]: Slurm: this step runs 2 tasks "
                         r"per node \(SLURM_STEP_TASKS_PER_NODE=2\(x2\)\)", twice.stderr, re.M), \
            twice.stderr
        assert "rank " not in twice.stdout  # no worker started
    finally:
        slurm.stop()  # raises when a daemon, slurmstepd or task of ours outlives it
    assert not work.exists()
    assert [pid for pid in pids if os.path.exists(f"/proc/{pid}")] == []
    assert processes_mentioning(str(work)) == []  # nothing started with our config or run dirs
