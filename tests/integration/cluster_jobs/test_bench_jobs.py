"""`ddpkit bench` as a whole job started on the master alone: over real OpenSSH (--hosts) and with a
join token, on a 2-node sim. Either way the master gets the one report a per-node bench gives
(every stage ran, across both nodes), and nothing is left behind."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from console_noise import assert_quiet_console
from jobs import ddpkit_in, wait_for_files
from multinode import wait_all
from sshnodes import SshCluster

from ddpkit.sim.topology import SimCluster

pytestmark = [pytest.mark.root, pytest.mark.slow]
QUICK = ("--quick", "--settings", "none", "--tcp-seconds", "0.5s", "--env", "OMP_NUM_THREADS=1")


def _check_report(doc: dict[str, object]) -> None:
    assert doc["schema"] == "ddpkit.bench/1" and doc["ok"] is True, json.dumps(doc)[-3000:]
    cluster = doc["cluster"]
    assert isinstance(cluster, dict) and cluster["nodes"] == 2 and cluster["interface"] == "eth1"
    stages = doc["jobs"]
    assert isinstance(stages, list) and stages and all(s["ok"] for s in stages), stages


@pytest.mark.timeout(400)
def test_bench_over_ssh_from_the_master(ssh_cluster: Callable[[int], SshCluster],
                                        tmp_path: Path) -> None:
    cluster = ssh_cluster(2)
    a, b = cluster.addresses
    out = tmp_path / "bench.json"
    run = ddpkit_in(cluster.sim, 0, tmp_path, "bench", "--hosts", f"{a},{b}", *QUICK, "--json",
                    "--out", str(out), "--run-dir", str(tmp_path / "runs"), *cluster.ssh_flags())
    assert wait_all([run], timeout=380)
    assert run.code == 0, run.err[-4000:]
    _check_report(json.loads(run.out))
    _check_report(json.loads(out.read_text()))  # --out written where the job was started
    assert f"[{b}:1]" in run.err  # node 1's output came back, labelled
    assert_quiet_console(run.out, run.err)
    cluster.assert_nodes_clean()


@pytest.mark.timeout(400)
def test_bench_with_a_join_token(sim_cluster: Callable[..., SimCluster], tmp_path: Path) -> None:
    cluster = sim_cluster(nodes=2)
    token_file = tmp_path / "token"
    master = ddpkit_in(cluster, 0, tmp_path, "bench", "--nnodes", "2", *QUICK, "--json",
                       "--token-file", str(token_file), "--run-dir", str(tmp_path / "node0"))
    wait_for_files([token_file], [master], timeout=60)
    worker = ddpkit_in(cluster, 1, tmp_path, "join", "--token-file", str(token_file),
                       "--run-dir", str(tmp_path / "node1"))
    assert wait_all([master, worker], timeout=380)
    report = f"master:\n{master.err[-3000:]}\nworker:\n{worker.err[-3000:]}"
    assert master.code == 0 and worker.code == 0, report
    assert_quiet_console(master.out, master.err, worker.out, worker.err)
    _check_report(json.loads(master.out))
    assert "joined as node 1 of 2 (bench" in worker.err, report
