"""A job started the way a scheduler starts it: every node runs the same bare `ddpkit test`, and
the cluster shape comes from the variables the platform exported on each node (RunPod's and a
Kubeflow PyTorchJob's, as recorded in tests/fixtures/schedulers/). 2 nodes x 2 ranks on a sim."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from jobs import ddpkit_in
from multinode import wait_all

from ddpkit.sim.topology import SimCluster

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _runpod(master: str, node: int, address: str) -> dict[str, str]:
    return {"PRIMARY_ADDR": master, "NODE_ADDR": address, "NODE_RANK": str(node),
            "NUM_NODES": "2", "NUM_TRAINERS": "2"}


def _pytorchjob(master: str, node: int, address: str) -> dict[str, str]:
    return {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "MASTER_ADDR": master, "MASTER_PORT": "29533",
            "WORLD_SIZE": "2", "RANK": str(node), "PET_NNODES": "2", "PET_NODE_RANK": str(node),
            "PET_NPROC_PER_NODE": "2"}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("platform", [_runpod, _pytorchjob], ids=["runpod", "pytorchjob"])
def test_bare_ddpkit_test_on_every_node_trains_across_both(
        sim_cluster: Callable[..., SimCluster], tmp_path: Path,
        platform: Callable[[str, int, str], dict[str, str]]) -> None:
    cluster = sim_cluster(nodes=2)
    master = cluster.nodes[0].private_address
    runs = [ddpkit_in(cluster, node, tmp_path, "test", "--quick", "--run-dir",
                      str(tmp_path / f"node{node}"),
                      env=platform(master, node, cluster.nodes[node].private_address))
            for node in (1, 0)]
    assert wait_all(runs, timeout=240)
    report = "\n".join(f"node {r.index}:\n{r.err[-3000:]}" for r in runs)
    assert all(r.code == 0 for r in runs), report
    master_run = next(r for r in runs if r.index == 0)
    assert "2 nodes × 2 ranks: all checks passed" in master_run.out + master_run.err, report
    assert "via eth1" in master_run.out + master_run.err, report
