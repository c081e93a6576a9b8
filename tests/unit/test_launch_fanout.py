"""The fan-out: the per-host commands (pure) and the supervisor against real local processes."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from ddpkit.launch.envpass import PassedEnv, read_wire
from ddpkit.launch.job import Deadlines, JobSpec
from ddpkit.launch.outcomes import FAILED, OK, STOPPED, NodeOutcome, first_failure
from ddpkit.launch.ssh.fanout import NodeCommand, plan_nodes, supervise
from ddpkit.launch.ssh.hostfile import Host
from ddpkit.launch.ssh.remote import SshSettings


def test_plan_nodes_builds_one_supervised_per_node_command() -> None:
    hosts = (Host(name="10.0.0.2"), Host(name="10.0.0.3", user="ubuntu", slots=4))
    passed = PassedEnv(values={"NCCL_DEBUG": "INFO"}, overrides=(("A", "b c"),))
    job = JobSpec(command="launch", nnodes=2, master_port=29511, nproc_per_node="2",
                  deadlines=Deadlines(connect_timeout=30),
                  entry=("train.py", "--lr", "0.1; rm -rf /"))
    nodes = plan_nodes(hosts, [True, False], job=job, master_addr="10.0.0.2",
                       python="/venv/bin/python",
                       cwd="/work dir", passed=passed, base_env={"PATH": "/bin"},
                       settings=SshSettings(), run_dir_base="/runs")
    local, remote = nodes
    assert local.local and local.argv == local.node_argv
    assert local.env == {"PATH": "/bin"}  # the passed env comes over stdin, like a remote node's
    assert list(local.node_argv) == [
        "/venv/bin/python", "-m", "ddpkit", "launch", "--nnodes", "2", "--node-rank", "0",
        "--master-addr", "10.0.0.2", "--master-port", "29511", "--nproc-per-node", "2",
        "--connect-timeout", "30", "--run-dir", "/runs/node0", "--supervised", "--env-stdin",
        "--json", "train.py", "--lr", "0.1; rm -rf /"]
    assert read_wire_bytes(local.stdin_data) == ({"NCCL_DEBUG": "INFO"}, (("A", "b c"),))
    assert remote.node_argv[remote.node_argv.index("--nproc-per-node") + 1] == "4"
    assert remote.node_argv[remote.node_argv.index("--node-rank") + 1] == "1"
    assert remote.env is None and remote.argv[0] == "ssh"
    assert remote.argv[-3:-1] == ("--", "10.0.0.3") and "-l" in remote.argv
    command = remote.argv[-1]
    assert command.startswith("cd -- '/work dir' && exec ")
    assert shlex.split(command)[5:] == list(remote.node_argv)  # quoted once, read back exactly
    assert remote.stdin_data == local.stdin_data
    assert remote.label == "10.0.0.3:1"


def read_wire_bytes(data: bytes) -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, data + b"what follows is the lifeline")
        return read_wire(read_end, timeout=5)
    finally:
        os.close(read_end)
        os.close(write_end)


def test_secrets_never_reach_a_node_command_line() -> None:
    hosts = (Host(name="10.0.0.2"), Host(name="10.0.0.3"))
    passed = PassedEnv(values={"HF_TOKEN": "hf_s3cret"}, overrides=(("WANDB_API_KEY", "wb_s3cret"),))
    job = JobSpec(command="launch", nnodes=2, master_port=29511, nproc_per_node="2",
                  overrides=(("WANDB_API_KEY", "wb_s3cret"),), entry=("train.py",))
    nodes = plan_nodes(hosts, [True, False], job=job, master_addr="10.0.0.2",
                       python="python", cwd="/w", passed=passed, base_env={},
                       settings=SshSettings(), run_dir_base=None)
    for node in nodes:
        shown = " ".join(node.argv) + node.display() + json.dumps(node.to_dict())
        assert "s3cret" not in shown and "s3cret" not in " ".join(node.node_argv)
        assert b"hf_s3cret" in node.stdin_data and b"wb_s3cret" in node.stdin_data


FAILER = textwrap.dedent("""
    import json, sys, time
    time.sleep(float(sys.argv[1]))
    print("rank output before dying", file=sys.stderr, flush=True)
    print(json.dumps({"schema": "ddpkit.error/1", "error": {
        "id": "job-failed", "message": "rank 1 failed first: exit code 3. Its last output: oops",
        "details": {"root_cause": {"rank": 1, "local_rank": 0, "exitcode": 3, "signal": None}}}}))
    sys.exit(6)
""")
# Behaves like `ddpkit launch --supervised`: runs until its stdin reaches end of file.
SUPERVISED = textwrap.dedent("""
    import json, os, pathlib, sys
    pathlib.Path(sys.argv[1]).write_text(str(os.getpid()))
    print("waiting", file=sys.stderr, flush=True)
    sys.stdin.read()
    print(json.dumps({"schema": "ddpkit.error/1", "error": {"id": "job-stopped", "message": "x"}}))
    sys.exit(6)
""")
# Ignores its stdin and has a child in a session of its own, as torchrun's workers are.
STUBBORN = textwrap.dedent("""
    import os, pathlib, subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                             start_new_session=True)
    pathlib.Path(sys.argv[1]).write_text(f"{os.getpid()} {child.pid}")
    time.sleep(120)
""")


def _node(rank: int, script: str, *args: str) -> NodeCommand:
    argv = (sys.executable, "-c", script, *args)
    return NodeCommand(node_rank=rank, host=Host(name=f"h{rank}"), local=True, argv=argv,
                       node_argv=argv, env=dict(os.environ), cwd="/")


class Recorder:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []
        self.ended: list[NodeOutcome] = []
        self.stops: list[str] = []

    def node_line(self, node: NodeCommand, text: str) -> None:
        self.lines.append((node.label, text))

    def node_finished(self, outcome: NodeOutcome) -> None:
        self.ended.append(outcome)

    def stopping(self, reason: str) -> None:
        self.stops.append(reason)


def _wait_file(path: Path, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def _dead(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


@pytest.mark.timeout(60)
def test_one_failure_stops_every_other_node(tmp_path: Path) -> None:
    events = Recorder()
    nodes = [_node(0, SUPERVISED, str(tmp_path / "p0")), _node(1, FAILER, "0.5"),
             _node(2, SUPERVISED, str(tmp_path / "p2"))]
    started = time.monotonic()
    outcomes = supervise(nodes, events, output_dir=tmp_path / "out", grace=20)
    assert time.monotonic() - started < 10, "the other nodes were not stopped promptly"
    assert [o.state for o in outcomes] == [STOPPED, FAILED, STOPPED]
    first = first_failure(outcomes)
    assert first is not None and (first.node_rank, first.exitcode) == (1, 3)
    assert events.stops == ["node 1 (h1) failed"]
    assert ("h1:1", "rank output before dying") in events.lines
    assert "rank output before dying" in (tmp_path / "out" / "node1-h1.log").read_text()
    assert json.loads((tmp_path / "out" / "node1-result.json").read_text())["error"]["id"] == \
        "job-failed"
    for rank in (0, 2):
        assert _dead(int((tmp_path / f"p{rank}").read_text()))


@pytest.mark.timeout(60)
def test_a_node_ignoring_the_stop_is_terminated_and_its_tree_killed(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    nodes = [_node(0, STUBBORN, str(pids)), _node(1, FAILER, "1.0")]
    started = time.monotonic()
    outcomes = supervise(nodes, Recorder(), grace=1.0)
    assert time.monotonic() - started < 15
    assert outcomes[0].state == STOPPED and outcomes[1].state == FAILED
    parent, child = (int(p) for p in pids.read_text().split())
    assert _dead(parent) and _dead(child), "a node's own-session child outlived the job"


@pytest.mark.timeout(60)
def test_all_nodes_succeeding(tmp_path: Path) -> None:
    ok = "import json; print(json.dumps({'schema': 'ddpkit.launch/1', 'ok': True}))"
    outcomes = supervise([_node(0, ok), _node(1, ok)], Recorder())
    assert [o.state for o in outcomes] == [OK, OK] and first_failure(outcomes) is None


@pytest.mark.timeout(60)
def test_ctrl_c_stops_every_node_then_is_raised_again(tmp_path: Path) -> None:
    nodes = [_node(0, SUPERVISED, str(tmp_path / "p0")), _node(1, SUPERVISED, str(tmp_path / "p1"))]

    def interrupt() -> None:
        for rank in (0, 1):
            _wait_file(tmp_path / f"p{rank}")
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Thread(target=interrupt, daemon=True)
    timer.start()
    events = Recorder()
    with pytest.raises(KeyboardInterrupt):
        supervise(nodes, events, grace=20)
    timer.join(5)
    assert events.stops == ["interrupted on the controller"]
    assert [o.state for o in events.ended] == [STOPPED, STOPPED]
    for rank in (0, 1):
        assert _dead(int((tmp_path / f"p{rank}").read_text()))
