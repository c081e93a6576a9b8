"""A whole-job command as the ssh and token front ends need it, and the whole-job flags as values.

`launch`, `test`, `bench` and `doctor` (its cluster check) each run as one node's share, or as a
whole job from one machine: over ssh (:mod:`ddpkit.cli.job.hosts_mode`) or with a join token
(:mod:`ddpkit.cli.job.join_mode`). Each of those commands hands its :class:`JobCommand` (its name, how
a node's share is configured from that node's command line, and how it runs) and a
:class:`JobRequest` (the whole-job flags, typed) to the front end; the front ends never import a
command, and a joining node finds the command by name in :mod:`ddpkit.cli.command_table`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from ddpkit.choices import parse_choice
from ddpkit.cli.node.launch_options import (
    ShareContext,
    env_overrides,
    sigterm_as_interrupt,
    stacks_on_signal,
)
from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.errors import UsageError
from ddpkit.i18n import _
from ddpkit.launch.config import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_HANG_TIMEOUT,
    DEFAULT_RDZV_TIMEOUT,
    HANG_ACTIONS,
    REPORT,
    LaunchConfig,
)
from ddpkit.launch.envpass import (
    ENV_FILE_NAME,
    PassedEnv,
    load_env_file,
    passed_env,
    untravelled,
    untravelled_warning,
)
from ddpkit.launch.job import Deadlines, JobSpec
from ddpkit.launch.outcomes import NodeOutcome
from ddpkit.launch.ssh.hostfile import Host, load_hostfile, parse_hosts
from ddpkit.launch.ssh.remote import DEFAULT_SSH_CONNECT_TIMEOUT, DEFAULT_SSH_PARALLEL, SshSettings
from ddpkit.net.ports import DEFAULT_JOIN_PORT, DEFAULT_MASTER_PORT

JobCommandName = Literal["launch", "test", "bench", "doctor"]
JobMode = Literal["hosts", "join", "node"]
HOSTS: JobMode = "hosts"  # the whole job over ssh from this machine
JOIN: JobMode = "join"  # the whole job from this machine, the others join with a token
NODE: JobMode = "node"  # this node's share only

Options = TypeVar("Options")

ResultRenderer = Callable[[Console, Sequence[NodeOutcome], "dict[str, Any]"], int]
"""Renders a whole job's outcomes (with the job payload) and returns the exit code: node 0's
document is on its outcome (``test``, ``bench``, ``doctor``; for --hosts and join tokens alike)."""


@dataclass(frozen=True)
class JobCommand(Generic[Options]):
    """One whole-job command: what every node runs, from the node's own parsed command line."""

    name: JobCommandName
    node_config: Callable[[argparse.Namespace], tuple[LaunchConfig, Options]]
    # ^ a node's configuration and the command's own options, from its parsed command line (also
    #   how a joining node reads the master's job: the job's node argv through the command's parser)
    share: Callable[[Console, LaunchConfig, ShareContext, Options], tuple[int, NodeOutcome]]
    # ^ one node's share of the job: (exit code, outcome); raises the launch's DdpkitError where
    #   the command does


@dataclass(frozen=True)
class JobRequest:
    """The flags of a whole job started from this machine, read once from the command line."""

    nnodes: int = 1
    node_rank: int = 0
    master_addr: str | None = None
    master_port: int = DEFAULT_MASTER_PORT
    nproc_per_node: str = "1"
    ifname: str | None = None
    debug: bool = False
    deadlines: Deadlines = field(default_factory=Deadlines)
    env_overrides: tuple[tuple[str, str], ...] = ()  # --env K=V
    env_file: str | None = None
    hosts: str | None = None
    hostfile: str | None = None
    ssh: SshSettings = field(default_factory=SshSettings)
    remote_python: str | None = None
    run_dir: str | None = None
    output_dir: str | None = None
    join_port: int = DEFAULT_JOIN_PORT
    join_timeout: float = 600.0
    token_file: str | None = None
    supervised: bool = False  # run under a job supervisor (ssh fan-out): stop when stdin ends
    env_stdin: bool = False  # the supervisor sends the passed environment on stdin
    dry_run: bool = False
    as_json: bool = False
    script_reads: tuple[str, ...] = ()  # environment names the entry reads (its source, here)

    def mode(self) -> JobMode:
        """``hosts`` (ssh fan-out), ``join`` (print a token and wait) or ``node`` (this node's
        share); UsageError ``bad-usage`` for flags that cannot go together."""
        if self.hosts and self.hostfile:
            raise UsageError("bad-usage", _("--hosts and --hostfile cannot be combined"),
                             _("use one of them"))
        if self.hosts or self.hostfile:
            if self.supervised:
                raise UsageError("bad-usage", _("a supervised node cannot fan out itself"),
                                 _("drop --hosts/--hostfile"))
            if self.node_rank != 0:
                raise UsageError("bad-usage",
                                 _("--node-rank is decided by the host order with --hosts"),
                                 _("list the master first and drop --node-rank"))
            return HOSTS
        if self.nnodes > 1 and self.master_addr is None and self.node_rank == 0 and not self.supervised:
            return JOIN
        return NODE


def job_request(args: argparse.Namespace) -> JobRequest:
    """The whole-job flags of a parsed command line. A command without some of them (doctor has no
    hang or restart flags) gets their defaults, which are launch's."""
    def given(name: str, default: Any) -> Any:
        value = getattr(args, name, None)
        return default if value is None else value

    hang_action = given("hang_action", REPORT)  # argparse's choices made it one of HANG_ACTIONS
    return JobRequest(
        nnodes=int(given("nnodes", 1)), node_rank=int(given("node_rank", 0)),
        master_addr=getattr(args, "master_addr", None),
        master_port=int(given("master_port", DEFAULT_MASTER_PORT)),
        nproc_per_node=str(given("nproc_per_node", "1")), ifname=getattr(args, "ifname", None),
        debug=bool(getattr(args, "debug", False)),
        deadlines=Deadlines(float(given("connect_timeout", DEFAULT_CONNECT_TIMEOUT)),
                            int(given("rdzv_timeout", DEFAULT_RDZV_TIMEOUT)),
                            int(given("max_restarts", 0)), getattr(args, "job_timeout", None),
                            float(given("hang_timeout", DEFAULT_HANG_TIMEOUT)),
                            parse_choice(hang_action, HANG_ACTIONS, "--hang-action")),
        env_overrides=tuple(env_overrides(list(given("env", [])))),
        env_file=getattr(args, "env_file", None), hosts=getattr(args, "hosts", None),
        hostfile=getattr(args, "hostfile", None),
        ssh=SshSettings(float(given("ssh_connect_timeout", DEFAULT_SSH_CONNECT_TIMEOUT)),
                        tuple(given("ssh_option", [])), getattr(args, "ssh_config", None),
                        parallel=int(given("ssh_parallel", DEFAULT_SSH_PARALLEL))),
        remote_python=getattr(args, "remote_python", None), run_dir=getattr(args, "run_dir", None),
        output_dir=getattr(args, "output_dir", None),
        join_port=int(given("join_port", DEFAULT_JOIN_PORT)),
        join_timeout=float(given("join_timeout", 600.0)),
        token_file=getattr(args, "token_file", None),
        supervised=bool(getattr(args, "supervised", False)),
        env_stdin=bool(getattr(args, "env_stdin", False)),
        dry_run=bool(getattr(args, "dry_run", False)), as_json=bool(getattr(args, "json", False)))


def load_hosts(request: JobRequest) -> tuple[Host, ...]:
    hosts = load_hostfile(Path(request.hostfile)) if request.hostfile else \
        parse_hosts(request.hosts or "")
    if request.nnodes not in (1, len(hosts)):
        raise UsageError("nnodes-mismatch",
                         _("--nnodes {nnodes} but {count} hosts are listed",
                           nnodes=request.nnodes, count=len(hosts)),
                         _("drop --nnodes (the host list decides) or list that many hosts"))
    return hosts


def whole_job(request: JobRequest, command: JobCommandName, nnodes: int,
              tail: Sequence[str]) -> JobSpec:
    """The job every node runs (``tail``: the command's own flags and its entry, e.g.
    ``[-m] script args...``)."""
    return JobSpec(command=command, nnodes=nnodes, master_port=request.master_port,
                   nproc_per_node=request.nproc_per_node, deadlines=request.deadlines,
                   debug=request.debug, ifname=request.ifname, entry=tuple(tail))


def job_env(request: JobRequest, env: Mapping[str, str], cwd: Path,
            console: Console | None = None) -> PassedEnv:
    """What travels to every node: the allow-list of ``env``, the env file, then --env; with
    ``console``, one warning naming what frameworks read that will not travel
    (envpass.untravelled_warning)."""
    path = Path(request.env_file) if request.env_file else cwd / ENV_FILE_NAME
    loaded = load_env_file(path, required=bool(request.env_file))
    passed = passed_env(dict(env), file_values=loaded.values if loaded else None,
                        file_path=str(path) if loaded is not None else None,
                        file_prefixes=loaded.prefixes if loaded else (),
                        overrides=list(request.env_overrides))
    warning = untravelled_warning(untravelled(dict(env), passed, request.script_reads),
                                  request.env_file or ENV_FILE_NAME)
    if console is not None and warning:
        render.status(console, _("warning: {message}", message=warning))
    return with_job_secret(passed, env)


def with_job_secret(passed: PassedEnv, env: Mapping[str, str]) -> PassedEnv:
    """Every node of a whole job gets the job's secret (this machine's, else a new random one)
    with the passed environment, which never enters a command line: the ranks prove with it that
    they are the job's before the script runs (``ddpkit.workers.member_gate``)."""
    import secrets

    from ddpkit.launch.torchrun.command import JOB_SECRET_ENV

    secret = env.get(JOB_SECRET_ENV) or secrets.token_hex(24)
    return dataclasses.replace(passed, values={**passed.values, JOB_SECRET_ENV: secret},
                               sources={**passed.sources, JOB_SECRET_ENV: "ddpkit"})


@contextlib.contextmanager
def node_supervision(supervised: bool) -> Iterator[Callable[[], str | None] | None]:
    """With ``--supervised``: a should_stop hook that fires when stdin (the ssh session) ends."""
    if not supervised:
        yield None
        return
    from ddpkit.launch.watch import StopSwitch, watch_for_eof

    switch = StopSwitch(interrupt=lambda: os.kill(os.getpid(), signal.SIGTERM))
    watch_for_eof(sys.stdin.fileno(), switch, _("its job supervisor let go (the ssh session ended "
                                                "or another node failed)"))
    yield switch.should_stop


def run_this_node(request: JobRequest, console: Console, job: JobCommand[Options],
                  config: LaunchConfig, options: Options) -> int:
    """The per-node form (``--node-rank R --master-addr A``) of a whole-job command."""
    with sigterm_as_interrupt():
        values: dict[str, str] = {}
        if request.env_stdin:
            from ddpkit.launch.envpass import read_wire

            values, overrides = read_wire(sys.stdin.fileno())
            config = dataclasses.replace(config, extra_env=(*config.extra_env, *overrides))
        with node_supervision(request.supervised) as should_stop, stacks_on_signal() as asked:
            context = ShareContext.here(as_json=request.as_json, dry_run=request.dry_run,
                                        should_stop=should_stop, stack_request=asked,
                                        hide_peer_commands=request.supervised)
            context = dataclasses.replace(context, env={**context.env, **values})
            code, _ = job.share(console, config, context, options)
    return code
