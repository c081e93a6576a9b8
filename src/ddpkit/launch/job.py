"""A multi-node job as one value: what every node runs, and the one way it becomes a node's command.

The printed command for the other nodes (``launch/node/plan.py``), the ssh fan-out (``fanout``) and the
join token (``join``) all carry a job to other nodes. They used to spell it three times, and
drifted (the printed command lost ``--max-restarts``, ``--job-timeout`` and ``--rdzv-timeout``).
Now each builds a :class:`JobSpec` and uses :func:`node_argv` (a node's ``ddpkit`` argv, which that
node's own parser reads back) or :meth:`JobSpec.to_dict` / :meth:`JobSpec.from_dict` (versioned
JSON, for the join store). Pure data; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ddpkit.choices import parse_choice
from ddpkit.errors import ConfigError
from ddpkit.i18n import _, current_language
from ddpkit.launch.config import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_HANG_TIMEOUT,
    DEFAULT_RDZV_TIMEOUT,
    HANG_ACTIONS,
    REPORT,
    HangAction,
    LaunchConfig,
)
from ddpkit.launch.envpass import shown
from ddpkit.net.ports import DEFAULT_MASTER_PORT

JOB_SCHEMA = "ddpkit.job/1"
COMMANDS = ("launch", "test", "bench", "doctor")
TORCHRUN_COMMANDS = ("launch", "test", "bench")  # a torchrun job per node: deadlines, run dirs
# (doctor's cluster check meets on the master port with its own bounded --timeout)


@dataclass(frozen=True)
class Deadlines:
    """How long each wait of the job may take, and how often torchrun may restart its workers."""

    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    rdzv_timeout: int = DEFAULT_RDZV_TIMEOUT
    max_restarts: int = 0
    job_timeout: float | None = None
    hang_timeout: float = DEFAULT_HANG_TIMEOUT  # no rank progressed this long: hung (0: off)
    hang_action: HangAction = REPORT


@dataclass(frozen=True)
class JobSpec:
    """One job, the same on every node: the ddpkit command, the cluster shape, the deadlines, the
    workers' ``--env`` overrides, the command's own flags (validated again by each node's parser)
    and what it runs (``[-m] script args...`` for launch)."""

    command: str
    nnodes: int
    master_port: int = DEFAULT_MASTER_PORT
    nproc_per_node: str = "1"
    deadlines: Deadlines = field(default_factory=Deadlines)
    debug: bool = False
    ifname: str | None = None  # one interface name for every node (ssh fan-out's --ifname)
    overrides: tuple[tuple[str, str], ...] = ()  # --env K=V, for every node's workers
    command_flags: tuple[str, ...] = ()  # the command's own options, e.g. ("--quick",)
    entry: tuple[str, ...] = ()  # the end of the command line: ("-m", "pkg", "--lr", "1")

    def __post_init__(self) -> None:
        if self.command not in COMMANDS:
            raise ConfigError("bad-job", _("a job runs one of {known}, not {command!r}",
                                           known=", ".join(COMMANDS), command=self.command),
                              _("run the same ddpkit version on every node"))
        if self.nnodes < 1:
            raise ConfigError("bad-job", _("a job has at least one node, not {nnodes}",
                                           nnodes=self.nnodes),
                              _("run the same ddpkit version on every node"))

    @classmethod
    def from_config(cls, command: str, config: LaunchConfig, *, command_flags: Sequence[str] = (),
                    entry: Sequence[str] = ()) -> JobSpec:
        """The job a node's own configuration belongs to (on the master)."""
        return cls(
            command=command, nnodes=config.nnodes, master_port=config.master_port,
            nproc_per_node=config.nproc_per_node,
            deadlines=Deadlines(config.connect_timeout, config.rdzv_timeout, config.max_restarts,
                                config.job_timeout, config.hang_timeout, config.hang_action),
            debug=config.debug, overrides=tuple(config.extra_env),
            command_flags=tuple(command_flags), entry=tuple(entry))

    def to_dict(self) -> dict[str, Any]:
        d = self.deadlines
        return {
            "schema": JOB_SCHEMA, "command": self.command, "nnodes": self.nnodes,
            "master_port": self.master_port, "nproc_per_node": self.nproc_per_node,
            "deadlines": {"connect_timeout": d.connect_timeout, "rdzv_timeout": d.rdzv_timeout,
                          "max_restarts": d.max_restarts, "job_timeout": d.job_timeout,
                          "hang_timeout": d.hang_timeout, "hang_action": d.hang_action},
            "debug": self.debug, "ifname": self.ifname,
            "overrides": [list(pair) for pair in self.overrides],
            "command_flags": list(self.command_flags), "entry": list(self.entry),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobSpec:
        """The inverse of :meth:`to_dict`; ConfigError ``bad-job`` for anything else."""
        try:
            if data.get("schema") != JOB_SCHEMA:
                raise ValueError(f"schema {data.get('schema')!r}, expected {JOB_SCHEMA}")
            d = data["deadlines"]
            job_timeout = d.get("job_timeout")
            return cls(
                command=str(data["command"]), nnodes=int(data["nnodes"]),
                master_port=int(data["master_port"]), nproc_per_node=str(data["nproc_per_node"]),
                deadlines=Deadlines(float(d["connect_timeout"]), int(d["rdzv_timeout"]),
                                    int(d["max_restarts"]),
                                    None if job_timeout is None else float(job_timeout),
                                    float(d["hang_timeout"]),
                                    parse_choice(d["hang_action"], HANG_ACTIONS, "hang action")),
                debug=bool(data["debug"]),
                ifname=None if data.get("ifname") is None else str(data["ifname"]),
                overrides=tuple((str(k), str(v)) for k, v in data["overrides"]),
                command_flags=tuple(str(a) for a in data["command_flags"]),
                entry=tuple(str(a) for a in data["entry"]))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError("bad-job", _("the master's job description is not one this ddpkit "
                                           "reads ({error})", error=str(exc)),
                              _("run the same ddpkit version on every node")) from None


def lang_flags() -> list[str]:
    """``--lang zh`` while this run speaks Chinese: every node ddpkit starts (the printed peer
    commands, the ssh fan-out, a join token's job) then speaks it too."""
    language = current_language()
    return [] if language == "en" else ["--lang", language]


def node_argv(spec: JobSpec, node_rank: int, master_addr: str, *,
              nproc_per_node: str | None = None, env_in_argv: bool = True,
              node_flags: Sequence[str] = (), for_display: bool = False) -> list[str]:
    """The ``ddpkit`` arguments (after the program name) that run node ``node_rank``'s share.

    A deadline at its default is left out (the node's default is the same, and the printed
    command stays short); ``nproc_per_node`` overrides the job's for one node (a hostfile's
    slots). ``env_in_argv=False`` leaves the ``--env`` values out, for a transport that carries
    them off the command line (the ssh fan-out sends them on stdin). ``node_flags`` are this
    node's own (its run directory, ``--supervised``), placed before the command's flags and the
    entry (after the script, a flag would be the script's). ``for_display``: a command ddpkit
    prints (or puts in a JSON plan), whose ``--env`` values with secret-looking names are masked
    (:func:`ddpkit.launch.envpass.shown`).
    """
    argv = [spec.command, *lang_flags(), "--nnodes", str(spec.nnodes), "--node-rank", str(node_rank),
            "--master-addr", master_addr, "--master-port", str(spec.master_port)]
    if spec.command not in TORCHRUN_COMMANDS:
        return [*argv, *node_flags, *spec.command_flags, *spec.entry]
    argv += ["--nproc-per-node", nproc_per_node or spec.nproc_per_node]
    d = spec.deadlines
    if d.connect_timeout != DEFAULT_CONNECT_TIMEOUT:
        argv += ["--connect-timeout", f"{d.connect_timeout:g}"]
    if d.rdzv_timeout != DEFAULT_RDZV_TIMEOUT:
        argv += ["--rdzv-timeout", str(d.rdzv_timeout)]
    if d.max_restarts:
        argv += ["--max-restarts", str(d.max_restarts)]
    if d.job_timeout is not None:
        argv += ["--job-timeout", f"{d.job_timeout:g}"]
    if d.hang_timeout != DEFAULT_HANG_TIMEOUT:
        argv += ["--hang-timeout", f"{d.hang_timeout:g}"]
    if d.hang_action != REPORT:
        argv += ["--hang-action", d.hang_action]
    if spec.ifname:
        argv += ["--ifname", spec.ifname]
    if spec.debug:
        argv.append("--debug")
    if env_in_argv:
        for key, value in spec.overrides:
            argv += ["--env", f"{key}={shown(key, value) if for_display else value}"]
    return [*argv, *node_flags, *spec.command_flags, *spec.entry]
