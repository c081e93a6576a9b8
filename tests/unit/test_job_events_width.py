"""A node's line under its ``[host:rank]`` prefix still fits the console (a 32-node job's widest
prefix is 15 columns, and each node lays its own lines out for the full width)."""

from __future__ import annotations

import io

from ddpkit.cli.job.job_events import JobConsoleEvents
from ddpkit.cli.output.console import Console
from ddpkit.launch.ssh.fanout import NodeCommand
from ddpkit.launch.ssh.hostfile import Host


def _node(rank: int, host: str) -> NodeCommand:
    return NodeCommand(rank, Host(name=host), False, ("ssh",), ("ddpkit",), None, "/")


def _lines(text: str, width: int = 100) -> list[str]:
    err = io.StringIO()
    events = JobConsoleEvents(Console(out=io.StringIO(), err=err, color=False, width=width))
    events.node_line(_node(31, "10.0.0.33"), text)
    return err.getvalue().splitlines()


def test_a_node_line_that_fits_passes_as_it_is() -> None:
    assert _lines("ddpkit: testing: rank 31 at check 7 of 8, ddp  ") == [
        "[10.0.0.33:31] ddpkit: testing: rank 31 at check 7 of 8, ddp  "]


def test_a_full_width_node_line_goes_on_under_the_same_prefix() -> None:
    text = ("ddpkit: folded 2 harmless torch warnings (a peer address without reverse DNS ×2); "
            "torchrun.log has")
    assert len(text) <= 100
    lines = _lines(text)
    assert len(lines) == 2 and all(len(line) <= 100 for line in lines)
    assert all(line.startswith("[10.0.0.33:31] ") for line in lines)
    assert " ".join(line.removeprefix("[10.0.0.33:31] ").strip() for line in lines) == text


def test_a_word_wider_than_the_line_is_broken_rather_than_overflowing() -> None:
    lines = _lines("x" * 250)
    assert all(len(line) <= 100 for line in lines) and "".join(
        line.removeprefix("[10.0.0.33:31] ").strip() for line in lines) == "x" * 250


def test_at_scale_the_nodes_merely_stopped_are_one_clause_with_their_ranks() -> None:
    from ddpkit.launch.outcomes import FAILED, STOPPED, NodeOutcome, job_summary

    outcomes = [NodeOutcome(node_rank=r, host=f"10.0.0.{2 + r}",
                            state=FAILED if r == 27 else STOPPED, exitcode=1 if r == 27 else None)
                for r in range(32)]
    text = job_summary(outcomes)
    assert text.startswith("node 27 (10.0.0.29") and "failed first" in text
    assert text.endswith("Then: nodes 0-26,28-31 were stopped (31)"), text
    few = job_summary(outcomes[25:29])
    assert "node 25 (10.0.0.27) was stopped" in few and "nodes " not in few
