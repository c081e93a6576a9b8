"""launch's NodeResult for a node's run directory, built the way the node session builds it from
torchrun's output (its tail: the run directory's torchrun.log), for the tests that compare
launch's summaries with what ``doctor --log`` reads of the same run directory."""

from __future__ import annotations

from pathlib import Path

from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.node.plan import NodeFacts, plan_node
from ddpkit.launch.node.result import NodeResult
from ddpkit.launch.torchrun.command import parse_failures
from ddpkit.launch.torchrun.processes import ProcessOutcome
from ddpkit.net.route import Route


def node_result(run_dir: Path, node_rank: int) -> NodeResult:
    """Node ``node_rank`` (host ``node<node_rank>``) of a 2-node job whose torchrun exited 1
    after writing ``run_dir``/torchrun.log."""
    route = Route(host="127.0.0.1", address="127.0.0.1", family="ipv4", ifname="lo",
                  source="127.0.0.1", local=True)
    facts = NodeFacts(hostname=f"node{node_rank}", nics=(), master_addresses=("127.0.0.1",),
                      route=route)
    config = LaunchConfig(nnodes=2, node_rank=node_rank, master_addr="127.0.0.1",
                          entry="train.py")
    plan = plan_node(config, facts, {}, python="py", run_dir=str(run_dir))
    tail = tuple((run_dir / "torchrun.log").read_text().splitlines())
    root, failures = parse_failures(tail)
    outcome = ProcessOutcome(returncode=1, tail=tail, timed_out=False, interrupted=False,
                             stopped=None, duration_s=1.0, leftovers_killed=())
    return NodeResult(plan=plan, outcome=outcome, root_cause=root, failures=failures)
