"""`ddpkit doctor`'s cluster check started on the master alone, over real OpenSSH (--hosts) and with
a join token, on a 2-node sim: the master shows node 0's report (both nodes met, eth1 is the
verdict for both) and nothing is left running."""

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


def _check(doc: dict[str, object]) -> None:
    assert doc["ok"] is True and doc["nnodes"] == 2 and doc["missing"] == [], json.dumps(doc)[-3000:]
    verdict = doc["verdict"]
    assert isinstance(verdict, dict)
    assert [c["interface"] for c in verdict["interfaces"]] == ["eth1", "eth1"], verdict


@pytest.mark.timeout(200)
def test_doctor_over_ssh_from_the_master(ssh_cluster: Callable[[int], SshCluster],
                                         tmp_path: Path) -> None:
    cluster = ssh_cluster(2)
    a, b = cluster.addresses
    run = ddpkit_in(cluster.sim, 0, tmp_path, "doctor", "--hosts", f"{a},{b}", "--timeout", "30",
                    "--json", *cluster.ssh_flags())
    assert wait_all([run], timeout=150)
    assert run.code == 0, run.err[-4000:]
    doc = json.loads(run.out)
    assert doc["schema"] == "ddpkit.doctor-cluster/1"
    _check(doc)
    human = ddpkit_in(cluster.sim, 0, tmp_path, "doctor", "--hosts", f"{a},{b}", "--timeout", "30",
                      "--master-port", "29517", *cluster.ssh_flags())
    assert wait_all([human], timeout=150)
    assert human.code == 0, human.err[-4000:]
    assert "verdict: node0: eth1" in human.out and "node1: eth1" in human.out, human.out
    assert_quiet_console(run.out, run.err, human.out, human.err)
    cluster.assert_nodes_clean()


@pytest.mark.timeout(200)
def test_doctor_with_a_join_token(sim_cluster: Callable[..., SimCluster], tmp_path: Path) -> None:
    cluster = sim_cluster(nodes=2)
    token_file = tmp_path / "token"
    master = ddpkit_in(cluster, 0, tmp_path, "doctor", "--nnodes", "2", "--timeout", "30",
                       "--json", "--token-file", str(token_file))
    wait_for_files([token_file], [master], timeout=60)
    worker = ddpkit_in(cluster, 1, tmp_path, "join", "--token-file", str(token_file))
    assert wait_all([master, worker], timeout=150)
    report = f"master:\n{master.err[-3000:]}\nworker:\n{worker.err[-3000:]}"
    assert master.code == 0 and worker.code == 0, report
    _check(json.loads(master.out))
    assert "joined as node 1 of 2 (doctor" in worker.err, report
