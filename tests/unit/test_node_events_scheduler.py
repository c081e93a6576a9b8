"""Under a scheduler the master does not tell the user to type a command on the other nodes:
srun started them (seen under a real Slurm on the sim, benchmarks/slurm_sim.py)."""

from __future__ import annotations

import io

from ddpkit.cli.node.node_events import ConsoleEvents, scheduler_of
from ddpkit.cli.output.console import Console
from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.node.plan import NodeFacts, plan_node
from ddpkit.net.interfaces import Address, Nic, NicKind

NICS = (Nic(name="eth1", kind=NicKind.VETH, up=True, mtu=1500, speed_mbps=None,
            addresses=(Address("ipv4", "10.213.77.2", 24),)),)


def planned_text(sources: tuple[tuple[str, str], ...]) -> str:
    config = LaunchConfig(nnodes=2, node_rank=0, master_addr="10.213.77.2", entry="train.py",
                          cluster_sources=sources)
    facts = NodeFacts(hostname="node0", nics=NICS, master_addresses=("10.213.77.2",), route=None)
    plan = plan_node(config, facts, {"PATH": "/usr/bin"}, python="py", run_dir="/runs/x")
    assert plan.peer_commands  # still in the plan (--dry-run --json shows it)
    err = io.StringIO()
    ConsoleEvents(Console(out=io.StringIO(), err=err, color=False)).planned(plan)
    return err.getvalue()


def test_under_slurm_no_command_to_type_on_the_other_nodes() -> None:
    text = planned_text((("nnodes", "Slurm: SLURM_NNODES"), ("node_rank", "Slurm: SLURM_NODEID")))
    assert "now run on every other node" not in text
    assert "the other nodes are started by Slurm, as this one was" in text


def test_by_hand_the_command_for_the_other_nodes_is_printed() -> None:
    text = planned_text((("nnodes", "flag"), ("node_rank", "default")))
    assert "now run on every other node" in text and "--node-rank 1" in text
    assert scheduler_of(()) is None and scheduler_of((("node_rank", "flag"),)) is None
