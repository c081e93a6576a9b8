"""Who may join a job (issue 32, item 1), as the launch side arranges it: the ranks run behind the
membership gate when the node holds the job's secret, a whole job carries one to every node
(never in a command line, never printed), and a per-node launch without one says, once, that
anyone on the private network can join."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.node.plan import NodeFacts, plan_node
from ddpkit.launch.torchrun.command import JOB_SECRET_ENV, MEMBER_GATE
from ddpkit.net.route import Route

OPEN_WARNING = "anyone on the private network who reaches"


def _argv(env: dict[str, str], **kw: Any) -> list[str]:
    base: dict[str, Any] = dict(nnodes=2, node_rank=1, master_addr="127.0.0.1", entry="train.py",
                                entry_args=("--lr", "1"))
    config = LaunchConfig(**{**base, **kw})
    facts = NodeFacts(hostname="n1", nics=(), master_addresses=("127.0.0.1",),
                      route=Route(host="127.0.0.1", address="127.0.0.1", family="ipv4",
                                  ifname="lo", source="127.0.0.1"))
    plan = plan_node(config, facts, {"PATH": "/usr/bin", **env}, python="py", run_dir="/r")
    return list(plan.argv)


def test_with_the_jobs_secret_torchrun_runs_the_gate_which_runs_the_entry() -> None:
    plain = _argv({})
    assert plain[-3:] == ["train.py", "--lr", "1"] and MEMBER_GATE not in plain
    gated = _argv({JOB_SECRET_ENV: "s3cr3t-xyz"})
    assert gated[gated.index(MEMBER_GATE) - 1:] == ["-m", MEMBER_GATE, "train.py", "--lr", "1"]
    module = _argv({JOB_SECRET_ENV: "s3cr3t-xyz"}, is_module=True)
    assert module[module.index(MEMBER_GATE) - 1:] == ["-m", MEMBER_GATE, "--module", "train.py",
                                                      "--lr", "1"]
    assert not any("s3cr3t-xyz" in word for word in gated), "the secret never enters the argv"


def test_a_program_run_with_no_python_or_a_job_of_one_node_is_not_gated() -> None:
    argv = _argv({JOB_SECRET_ENV: "s"}, torchrun_options=(("--no-python", None),))
    assert MEMBER_GATE not in argv
    assert MEMBER_GATE not in _argv({JOB_SECRET_ENV: "s"}, nnodes=1, node_rank=0)


@pytest.mark.parametrize("secret", [None, "s3cret-value"])
def test_a_per_node_launch_without_a_secret_warns_once(run_cli: Any, secret: str | None,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    if secret:
        monkeypatch.setenv(JOB_SECRET_ENV, secret)
    else:
        monkeypatch.delenv(JOB_SECRET_ENV, raising=False)
    result = run_cli("launch", "--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.2",
                     "--dry-run", "train.py")
    assert result.code == 0, result.err
    assert result.err.count(OPEN_WARNING) == (0 if secret else 1)
    if not secret:
        assert f"export {JOB_SECRET_ENV}=" in result.err and "10.0.0.2:29500" in result.err
    assert "s3cret-value" not in result.out + result.err
    single = run_cli("launch", "--dry-run", "train.py")
    assert OPEN_WARNING not in single.err


def test_a_whole_job_carries_a_secret_to_every_node_over_stdin_only(
        run_cli: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(JOB_SECRET_ENV, raising=False)
    result = run_cli("launch", "--hosts", "10.0.0.2,10.0.0.3", "--dry-run", "--json", "train.py")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["env"]["values"][JOB_SECRET_ENV] == "<hidden>"
    for node in doc["nodes"]:
        words = [*node["argv"], *shlex.split(node["argv"][-1])]
        assert not any(JOB_SECRET_ENV in word for word in words)
    assert OPEN_WARNING not in result.err
