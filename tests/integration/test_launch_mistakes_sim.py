"""The mistakes people make with the master's address, answered in seconds on every node (issue 31).

Each sim node's eth0 holds the same 172.17.0.4 (a container's NAT address) and eth1 the private
network. Given the shared address, or an address nobody holds, neither node may wait for a
rendezvous that cannot happen: both stop within seconds, with an error naming the cause. The
bounds are generous for a loaded 2-core machine; the waits they replace were 60 and 600 s.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from multinode import NodeRun, ddpkit, error_message, simulated, start, wait_all

from ddpkit.errors import ExitCode

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _both(cluster, tmp_path: Path, master: str) -> tuple[list[NodeRun], list[float]]:  # type: ignore[no-untyped-def]
    script = tmp_path / "train.py"
    script.write_text("print('never runs')\n")
    started = time.monotonic()
    runs = [start(cluster, i, ddpkit("launch", "--nnodes", "2", "--node-rank", str(i),
                                     "--master-addr", master, "--run-dir",
                                     str(tmp_path / f"run{i}"), str(script)))
            for i in range(2)]
    took: list[float] = []
    for run in runs:
        assert wait_all([run], timeout=90), f"node {run.index} still waits:\n{run.err[-2000:]}"
        took.append(time.monotonic() - started)
    return runs, took


@pytest.mark.timeout(180)
def test_both_nodes_given_the_shared_eth0_address_stop_at_once_with_one_error(
        tmp_path: Path) -> None:
    with simulated(2) as cluster:
        private = cluster.nodes[0].private_address
        runs, took = _both(cluster, tmp_path, "172.17.0.4")
    for run, seconds in zip(runs, took):
        said = error_message(run.err)
        assert run.code == ExitCode.CONFIG, run.err[-2000:]
        assert said.startswith("error [master-address-shared]"), said
        assert seconds <= 5, (run.index, seconds)
        assert "torch" not in run.out.lower(), run.out  # no relayed traceback
    assert f"--master-addr {private} (eth1)" in " ".join(runs[0].err.split())


@pytest.mark.timeout(180)
def test_both_nodes_given_an_address_nobody_holds_stop_within_seconds(tmp_path: Path) -> None:
    with simulated(2) as cluster:
        nobody = cluster.nodes[0].private_address.rsplit(".", 1)[0] + ".99"
        runs, took = _both(cluster, tmp_path, nobody)
    master, worker = runs
    assert "error [master-not-local]" in master.err, master.err[-2000:]
    assert f"--master-addr {cluster.nodes[0].private_address} (eth1)" in " ".join(
        master.err.split())
    said = error_message(worker.err)
    assert worker.code == ExitCode.NETWORK and "error [master-unreachable]" in said, said
    assert "no route to host" in said, said
    assert max(took) <= 15, (took, worker.err)
