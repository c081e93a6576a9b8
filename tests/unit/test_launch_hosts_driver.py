"""The ssh fan-out's driver against real local processes: a stand-in for ``python -m ddpkit`` on
every host (both hosts are this machine, so no ssh), a fake preflight, and a recorder of events."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_launch_fanout import Recorder as NodeRecorder

from ddpkit.errors import DdpkitError
from ddpkit.launch.envpass import PassedEnv
from ddpkit.launch.job import JobSpec
from ddpkit.launch.outcomes import FAILED, OK, STOPPED
from ddpkit.launch.ssh import driver as hosts_driver
from ddpkit.launch.ssh.hostfile import Host
from ddpkit.launch.ssh.probe import HostProbe
from ddpkit.launch.ssh.remote import SshSettings

# Stands in for `python -m ddpkit launch --node-rank R ... --supervised --json` on a host: node 1
# fails as a launch does (its error document on stdout); every other node runs until its stdin
# (the supervisor's lifeline) closes. Each writes its argv to <dir>/ran<R> first.
NODE = textwrap.dedent("""\
    #!{python}
    import json, pathlib, sys
    rank = sys.argv[sys.argv.index("--node-rank") + 1]
    pathlib.Path({marks!r}, "ran" + rank).write_text(json.dumps(sys.argv))
    if rank == {failing!r}:
        print("rank 1 is about to fail", file=sys.stderr, flush=True)
        print(json.dumps({{"schema": "ddpkit.error/1", "error": {{
            "id": "job-failed", "message": "rank 1 failed first: exit code 3",
            "details": {{"root_cause": {{"rank": 1, "local_rank": 0, "exitcode": 3}}}}}}}}))
        sys.exit(6)
    if {failing!r}:
        sys.stdin.read()
        print(json.dumps({{"schema": "ddpkit.error/1", "error": {{"id": "job-stopped",
                                                                "message": "stopped"}}}}))
        sys.exit(6)
    print(json.dumps({{"schema": "ddpkit.launch/1", "ok": True, "node": int(rank)}}))
""")

HOSTS = (Host(name="127.0.0.1"), Host(name="localhost"))


class Recorder(NodeRecorder):
    """The fan-out's node events, plus the driver's own progress lines."""

    def __init__(self) -> None:
        super().__init__()
        self.progress: list[str] = []

    def waiting(self, message: str) -> None:
        self.progress.append(message)


def _tools(problems: dict[int, str] | None = None) -> hosts_driver.HostsTools:
    def probe(hosts: Sequence[Host], *, local: Sequence[bool], python: str, cwd: str,
              settings: SshSettings, version: str) -> tuple[HostProbe, ...]:
        return tuple(HostProbe(host, rank, local[rank],
                               tuple([problems[rank]]) if problems and rank in problems else (),
                               {"hostname": f"box{rank}"}) for rank, host in enumerate(hosts))

    def no_route(*args: object) -> tuple[str, str]:
        raise AssertionError("every node is this machine: no route is looked up")

    return hosts_driver.HostsTools(probe=probe, route_here=no_route, route_on_node0=no_route)


def _job(tmp_path: Path, *, failing: str = "1") -> hosts_driver.HostsJob:
    python = tmp_path / "python"
    python.write_text(NODE.format(python=sys.executable, marks=str(tmp_path), failing=failing))
    python.chmod(0o755)
    return hosts_driver.HostsJob(
        hosts=HOSTS, local=(True, True), job=JobSpec(command="launch", nnodes=2, entry=("train.py",)),
        python=str(python), cwd=str(tmp_path), passed=PassedEnv(values={}, overrides=()),
        base_env=dict(os.environ), run_dir_base=str(tmp_path / "runs"))


@pytest.mark.timeout(60)
def test_a_failing_node_stops_the_other_and_the_result_names_it(tmp_path: Path) -> None:
    events = Recorder()
    result = hosts_driver.run(_job(tmp_path), events, _tools())
    assert events.progress == [
        "checking 2 hosts in parallel (ssh, python, ddpkit, torch, working directory)",
        "  node 0 127.0.0.1 (box0, this machine): ok",
        "  node 1 localhost (box1, this machine): ok",
        "master address 127.0.0.1 (every node is this machine: everything is local)"]
    assert events.stops == ["node 1 (localhost) failed"]
    assert ("localhost:1", "rank 1 is about to fail") in events.lines
    assert [o.state for o in result.outcomes] == [STOPPED, FAILED]
    assert [o.node_rank for o in events.ended] == [1, 0]  # as each ended
    first = result.first_failure
    assert first is not None and (first.node_rank, first.rank, first.exitcode) == (1, 1, 3)
    payload = result.payload()
    assert payload["ok"] is False and payload["mode"] == "hosts"
    assert payload["master"] == {"address": "127.0.0.1",
                                 "reason": "every node is this machine: everything is local"}
    assert [n["state"] for n in payload["nodes"]] == [STOPPED, FAILED]
    argv = json.loads((tmp_path / "ran0").read_text())
    assert argv[argv.index("--master-addr") + 1] == "127.0.0.1"
    assert argv[argv.index("--run-dir") + 1] == f"{tmp_path}/runs/node0"


@pytest.mark.timeout(60)
def test_every_node_succeeding_carries_each_nodes_document(tmp_path: Path) -> None:
    events = Recorder()
    result = hosts_driver.run(_job(tmp_path, failing=""), events, _tools())
    assert result.ok and events.stops == []
    assert [o.state for o in result.outcomes] == [OK, OK]
    assert [dict(o.document or {}).get("node") for o in result.outcomes] == [0, 1]
    assert result.payload()["first_failure"] is None and result.payload()["stacks"] is None


def test_a_host_unfit_for_the_job_is_named_and_nothing_starts(tmp_path: Path) -> None:
    events = Recorder()
    with pytest.raises(DdpkitError) as raised:
        hosts_driver.run(_job(tmp_path), events,
                         _tools({1: "torch is not installed for python (No module named torch)"}))
    assert raised.value.error_id == "preflight-failed"
    assert "node 1 localhost: torch is not installed" in raised.value.message
    assert events.progress[-1] == ("  node 1 localhost (box1, this machine): torch is not "
                                   "installed for python (No module named torch)")
    assert events.lines == [] and events.ended == []
    assert not list(tmp_path.glob("ran*")), "a node was started although preflight failed"


def test_a_dry_run_plan_puts_the_given_master_in_every_command(tmp_path: Path) -> None:
    nodes = hosts_driver.plan(_job(tmp_path), hosts_driver.MASTER_PLACEHOLDER)
    assert [n.node_rank for n in nodes] == [0, 1] and all(n.local for n in nodes)
    for node in nodes:
        assert node.node_argv[node.node_argv.index("--master-addr") + 1] == \
            hosts_driver.MASTER_PLACEHOLDER


def test_at_scale_the_preflight_lists_only_the_hosts_with_a_problem(tmp_path: Path) -> None:
    events = Recorder()
    job = dataclasses.replace(_job(tmp_path), hosts=tuple(Host(name="127.0.0.1") for _ in range(12)),
                              local=(True,) * 12)
    with pytest.raises(DdpkitError):
        hosts_driver.run(job, events, _tools({9: "working directory missing there"}))
    assert events.progress[1:] == ["  node 9 127.0.0.1 (box9, this machine): working directory "
                                   "missing there", "  11 of 12 hosts ok"]
