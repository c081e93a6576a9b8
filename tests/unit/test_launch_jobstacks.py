"""A job's stacks gathered from its nodes' JSON (--hosts documents, join-store outcomes)."""

from __future__ import annotations

import json

import pytest
from test_launch_stacks import _job

from ddpkit.errors import UsageError
from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.hang.job_stacks import job_stacks, job_stacks_of, node_reports
from ddpkit.launch.hang.watcher import StackReport
from ddpkit.launch.outcomes import NodeOutcome, outcome_from_error


def _report(stacks, node: int) -> dict:  # type: ignore[no-untyped-def]
    report = StackReport("hang", node, f"node{node}", tuple(stacks), headline="hung").to_dict()
    return json.loads(json.dumps(report))  # through JSON, as it travels


def test_every_node_grouped_together_names_the_odd_rank_across_nodes() -> None:
    job = _job()
    node0 = {"schema": "ddpkit.error/1", "error": {"id": "job-hung", "details": {
        "stack_reports": [_report(job[:2], 0)]}}}
    node1 = {"schema": "ddpkit.launch/1", "stack_reports": [_report(job[2:], 1)]}
    lines, reports = job_stacks([node0, node1, None])
    assert lines[0] == "ranks 0, 2, 3 wait in all_reduce at hang.py:15 `dist.all_reduce(t)`"
    assert lines[-1].startswith("likely cause: rank 1 (node0, pid ")
    assert len(reports) == 2 and node_reports({"nothing": 1}) == []


def test_stack_reports_ride_a_nodes_outcome_through_the_join_store() -> None:
    error = {"id": "job-hung", "message": "hung", "details": {"stack_reports": [_report(_job()[2:], 1)]}}
    outcome = outcome_from_error(error, node_rank=1, host="node1")
    again = NodeOutcome.from_dict(json.loads(json.dumps(outcome.to_dict())))
    lines, _ = job_stacks_of([again.stack_reports])
    assert lines[0].startswith("ranks 2, 3 wait in all_reduce at hang.py:15 `dist.all_reduce(t)` (node1")
    assert "stack_reports" not in NodeOutcome(node_rank=0, host="h", state="ok").to_dict()


def test_hang_settings_are_checked() -> None:
    with pytest.raises(UsageError, match="--hang-timeout"):
        LaunchConfig(nnodes=1, node_rank=0, master_addr="127.0.0.1", entry="x.py", hang_timeout=-1)
    with pytest.raises(UsageError) as raised:
        LaunchConfig(nnodes=1, node_rank=0, master_addr="127.0.0.1", entry="x.py", hang_action="kill")
    assert raised.value.error_id == "bad-hang-action"
