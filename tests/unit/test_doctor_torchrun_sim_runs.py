"""What the real torchrun printed on two simulated machines (tests/fixtures/logs/torchrun-sim/,
made by its make.sh with `ddpkit sim up 2`: eth0 172.17.0.4 on both, reaching nothing, eth1 on
a shared bridge), read by `doctor --log` one node at a time and both together. The lines were
written by torch; the expected answer is the mistake each run plants."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpkit.doctor.log.diagnose import diagnose

SIM = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "torchrun-sim"


@pytest.mark.parametrize("logs", [["node0.log"], ["node1.log"], ["node0.log", "node1.log"]])
def test_two_nodes_both_given_node_rank_0_read_as_it(logs: list[str]) -> None:
    found = diagnose([str(SIM / "dupnode" / name) for name in logs])[0]
    assert (found.id, found.severity) == ("rendezvous-timeout", "error")
    assert "given the same --node-rank" in found.explanation


@pytest.mark.parametrize("logs", [["node1.log"], ["node0.log", "node1.log"]])
def test_the_container_address_as_master_reads_as_it(logs: list[str]) -> None:
    # the same sim, both nodes given eth0's 172.17.0.4 as --master-addr: node 1 dials its own
    # container address, which no other machine shares a network with
    found = diagnose([str(SIM / "natmaster" / name) for name in logs])[0]
    assert (found.id, found.severity) == ("wrong-interface", "error")
    assert "172.17.0.4" in found.explanation
