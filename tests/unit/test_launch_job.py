"""One job, three encodings: the command a node runs (read back by ddpkit's own parser), the JSON
the join store carries, and the job built from the master's configuration. Every field must
survive each of them; the drift test fails when a launch flag reaches the master's config but not
the other nodes' (the printed peer command once dropped --max-restarts, --job-timeout and
--rdzv-timeout)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ddpkit.cli.command_table import build_parser
from ddpkit.cli.node.launch_options import config_from_args
from ddpkit.errors import ConfigError
from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.job import Deadlines, JobSpec, node_argv

FULL = JobSpec(
    command="launch", nnodes=3, master_port=29611, nproc_per_node="4",
    deadlines=Deadlines(connect_timeout=12.5, rdzv_timeout=77, max_restarts=2, job_timeout=3600,
                        hang_timeout=45, hang_action="stop"),
    debug=True, ifname="eth1", overrides=(("OMP_NUM_THREADS", "2"), ("A", "x=y")),
    command_flags=("--local-rank-arg", "underscore"), entry=("train.py", "--lr", "0.1"))


def parsed(argv: list[str]) -> LaunchConfig:
    """What a node does with its command line: ddpkit's own parser, then its configuration."""
    parser, _ = build_parser(argv[0])
    args = parser.parse_args(argv[1:])
    if argv[0] == "launch":
        from ddpkit.cli.commands.launch import node_config

        return node_config(args)[0]
    return config_from_args(args, entry="ddpkit.workers.ddp_test", entry_args=[], is_module=True)


def test_every_field_survives_the_json() -> None:
    assert JobSpec.from_dict(FULL.to_dict()) == FULL
    plain = JobSpec(command="test", nnodes=2)
    assert JobSpec.from_dict(plain.to_dict()) == plain


def test_every_field_survives_a_node_command_read_back_by_the_parser() -> None:
    config = parsed(node_argv(FULL, 2, "10.0.0.2"))
    assert (config.nnodes, config.node_rank, config.master_addr, config.master_port) == (
        3, 2, "10.0.0.2", 29611)
    assert config.nproc_per_node == "4" and config.debug and config.ifname == "eth1"
    assert (config.connect_timeout, config.rdzv_timeout, config.max_restarts,
            config.job_timeout) == (12.5, 77, 2, 3600)
    assert (config.hang_timeout, config.hang_action) == (45, "stop")
    assert config.extra_env == FULL.overrides
    assert config.local_rank_arg == "underscore"
    assert (config.entry, config.entry_args) == ("train.py", ("--lr", "0.1"))


def test_the_master_config_and_the_peer_config_agree_on_every_job_field() -> None:
    """The drift test: whatever the master's own configuration holds, the job built from it and
    read back on another node holds too (only the node's own rank and address may differ)."""
    master = parsed(node_argv(FULL, 0, "10.0.0.2"))
    spec = JobSpec.from_config("launch", master, command_flags=FULL.command_flags,
                               entry=FULL.entry)
    peer = parsed(node_argv(dataclasses.replace(spec, ifname=FULL.ifname), 1, "10.0.0.2"))
    per_node = {"node_rank", "local_rank_arg", "notes", "cluster_sources"}
    differing = {f.name for f in dataclasses.fields(LaunchConfig)
                 if getattr(master, f.name) != getattr(peer, f.name)} - per_node
    assert differing == set()
    assert peer.node_rank == 1


def test_defaults_stay_off_the_printed_command() -> None:
    argv = node_argv(JobSpec(command="test", nnodes=2, command_flags=("--quick",)), 1, "10.0.0.2")
    assert argv == ["test", "--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.2",
                    "--master-port", "29500", "--nproc-per-node", "1", "--quick"]
    assert parsed(argv).rdzv_timeout == 600


def test_env_values_can_stay_off_the_command_line() -> None:
    argv = node_argv(FULL, 1, "10.0.0.2", env_in_argv=False, nproc_per_node="8")
    assert "--env" not in argv and "OMP_NUM_THREADS=2" not in " ".join(argv)
    assert argv[argv.index("--nproc-per-node") + 1] == "8"


@pytest.mark.parametrize("broken", [
    {}, {"schema": "ddpkit.job/0"}, {**FULL.to_dict(), "nnodes": "many"},
    {**FULL.to_dict(), "command": "rm"}, {**FULL.to_dict(), "deadlines": None},
])
def test_a_job_this_ddpkit_cannot_read_is_bad_job(broken: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as caught:
        JobSpec.from_dict(broken)
    assert caught.value.error_id == "bad-job"


def test_the_printed_peer_command_carries_the_whole_job() -> None:
    """The master's dry run prints the other nodes' commands; read back, each gives the master's
    configuration but for its rank (before JobSpec it dropped three deadlines)."""
    import shlex

    from ddpkit.launch.node.plan import peer_commands

    master = parsed(["launch", "--nnodes", "3", "--master-addr", "10.0.0.2", "--master-port",
                     "29611", "--nproc-per-node", "4", "--connect-timeout", "12.5",
                     "--rdzv-timeout", "77", "--max-restarts", "2", "--job-timeout", "3600",
                     "--hang-timeout", "45", "--hang-action", "stop", "--debug", "--env",
                     "OMP_NUM_THREADS=2", "--local-rank-arg", "underscore",
                     "train.py", "--lr", "0.1"])
    commands = peer_commands(master)
    assert len(commands) == 2
    for rank, command in enumerate(commands, start=1):
        argv = shlex.split(command)
        assert argv[0] == "ddpkit"
        peer = parsed(argv[1:])
        per_node = {"node_rank", "notes", "cluster_sources"}
        differing = {f.name for f in dataclasses.fields(LaunchConfig)
                     if getattr(master, f.name) != getattr(peer, f.name)} - per_node
        assert differing == set(), command
        assert peer.node_rank == rank


def test_the_ssh_fan_out_carries_the_whole_job() -> None:
    from ddpkit.cli.job.job_command import job_request, whole_job
    from ddpkit.launch.envpass import PassedEnv
    from ddpkit.launch.ssh.fanout import plan_nodes
    from ddpkit.launch.ssh.hostfile import Host
    from ddpkit.launch.ssh.remote import SshSettings

    parser, _ = build_parser("launch")
    args = parser.parse_args(["--hosts", "10.0.0.2,10.0.0.3", "--nproc-per-node", "4",
                              "--master-port", "29611", "--connect-timeout", "12.5",
                              "--rdzv-timeout", "77", "--max-restarts", "2", "--job-timeout",
                              "3600", "--debug", "--ifname", "eth1", "train.py", "--lr", "0.1"])
    job = whole_job(job_request(args), "launch", 2, ["train.py", "--lr", "0.1"])
    nodes = plan_nodes((Host(name="10.0.0.2"), Host(name="10.0.0.3", slots=8)), [True, False],
                       job=job, master_addr="10.0.0.2", python="python", cwd="/w",
                       passed=PassedEnv(values={}, overrides=()), base_env={},
                       settings=SshSettings(), run_dir_base="/runs")
    for node in nodes:
        config = parsed(list(node.node_argv[3:]))
        assert (config.nnodes, config.node_rank, config.master_port) == (2, node.node_rank, 29611)
        assert (config.connect_timeout, config.rdzv_timeout, config.max_restarts,
                config.job_timeout, config.debug, config.ifname) == (12.5, 77, 2, 3600, True, "eth1")
        assert (config.entry, config.entry_args) == ("train.py", ("--lr", "0.1"))
        assert config.run_dir == f"/runs/node{node.node_rank}"
    assert parsed(list(nodes[1].node_argv[3:])).nproc_per_node == "8"  # its slots


def test_the_join_token_carries_the_whole_job() -> None:
    """Token mode: the master's job, through the store's JSON, read by a joining node with the
    same parser as a typed command line (its own --run-dir/--ifname added)."""
    import argparse
    import json

    from ddpkit.cli.commands.join import job_command, node_args
    from ddpkit.launch.join.sides import JoinJob

    job = dataclasses.replace(FULL, ifname=None, nnodes=2)
    sent = JoinJob(job=job, master_addr="10.0.0.2", env={"NCCL_DEBUG": "INFO"}, join_timeout=30,
                   ddpkit_version="x", cwd="/w")
    received = JoinJob.from_dict(json.loads(json.dumps(sent.to_dict())))
    assert received == sent
    own = argparse.Namespace(ifname="eth7", run_dir="/runs/n1", show_output=False)
    config, _ = job_command("launch").node_config(node_args(received, 1, own))
    master = parsed(node_argv(job, 0, "10.0.0.2"))
    per_node = {"node_rank", "notes", "cluster_sources", "ifname", "run_dir"}
    differing = {f.name for f in dataclasses.fields(LaunchConfig)
                 if getattr(master, f.name) != getattr(config, f.name)} - per_node
    assert differing == set()
    assert (config.node_rank, config.ifname, config.run_dir) == (1, "eth7", "/runs/n1")
