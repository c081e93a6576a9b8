"""A script written for `torch.distributed.launch` (argv `--local_rank`) as a whole job: from the
master with a join token, and over ssh with --hosts. 2 nodes x 2 ranks; each node decides the
argument from its own copy of the script, and every rank sees its own local rank."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from jobs import ddpkit_in, wait_for_files
from multinode import wait_all
from sshnodes import SshCluster

from ddpkit.sim.topology import SimCluster

pytestmark = [pytest.mark.root, pytest.mark.slow]

SCRIPT = Path(__file__).parents[1] / "legacy_scripts" / "ddp_underscore.py"
FINISHED = re.compile(r"rank (\d+) local_rank (\d+) finished 3 steps")
DECIDED = "local-rank argument: --local_rank=<local rank> (ddp.py:14 declares"


def _ranks(text: str) -> set[tuple[int, int]]:
    return {(int(g), int(local)) for g, local in FINISHED.findall(text)}


@pytest.mark.timeout(240)
def test_join_token_job_with_a_local_rank_script(sim_cluster: Callable[..., SimCluster],
                                                 tmp_path: Path) -> None:
    cluster = sim_cluster(nodes=2)
    shutil.copy(SCRIPT, tmp_path / "ddp.py")
    token_file = tmp_path / "token"
    master = ddpkit_in(cluster, 0, tmp_path, "launch", "--nnodes", "2", "--nproc_per_node=2",
                       "--token-file", str(token_file), "--run-dir", str(tmp_path / "node0"),
                       "ddp.py")
    wait_for_files([token_file], [master], timeout=60)
    worker = ddpkit_in(cluster, 1, tmp_path, "join", token_file.read_text().strip(), "--run-dir",
                       str(tmp_path / "node1"))
    assert wait_all([master, worker], timeout=200)
    report = f"master:\n{master.err[-3000:]}\nworker:\n{worker.err[-3000:]}"
    assert master.code == 0 and worker.code == 0, report
    assert DECIDED in master.err and DECIDED in worker.err, report  # each node decided itself
    assert _ranks(master.out) == {(0, 0), (1, 1)}, report
    assert _ranks(worker.out) == {(2, 0), (3, 1)}, report


@pytest.mark.timeout(240)
def test_hosts_job_with_a_local_rank_script(ssh_cluster: Callable[[int], SshCluster],
                                            tmp_path: Path) -> None:
    cluster = ssh_cluster(2)
    shutil.copy(SCRIPT, tmp_path / "ddp.py")
    a, b = cluster.addresses
    run = ddpkit_in(cluster.sim, 0, tmp_path, "launch", "--hosts", f"{a},{b}", "--nproc_per_node=2",
                    "--run-dir", str(tmp_path / "runs"), *cluster.ssh_flags(), "ddp.py")
    assert wait_all([run], timeout=200)
    assert run.code == 0, run.err[-4000:]
    both = run.out + run.err
    assert f"[{a}:0] ddpkit: {DECIDED}" in both and f"[{b}:1] ddpkit: {DECIDED}" in both, both[-4000:]
    assert _ranks(both) == {(0, 0), (1, 1), (2, 0), (3, 1)}, both[-4000:]
