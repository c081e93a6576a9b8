"""The launch configuration: one frozen, validated value built once from the command line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ddpkit.errors import UsageError
from ddpkit.i18n import _
from ddpkit.net.ports import DEFAULT_MASTER_PORT, is_tcp_port

DEFAULT_CONNECT_TIMEOUT = 60.0
DEFAULT_RDZV_TIMEOUT = 600  # torch's own default for the static rendezvous
DEFAULT_HANG_TIMEOUT = 300.0  # seconds without progress before a node's ranks count as hung
HangAction = Literal["report", "stop"]  # what a hang does: dump the stacks, or also stop the job
REPORT: HangAction = "report"
STOP: HangAction = "stop"
HANG_ACTIONS: tuple[HangAction, ...] = (REPORT, STOP)
# How a script gets its local rank: decided from its source (auto), --local-rank (dash),
# --local_rank (underscore) or not at all (none); "" for ddpkit's own workers (LOCAL_RANK).
LocalRankMode = Literal["auto", "dash", "underscore", "none", ""]
FLIGHT_RECORDER_DIR = "flight-recorder"  # in the run directory: torch's flight-recorder dumps


@dataclass(frozen=True)
class LaunchConfig:
    """Everything one node needs to take part in a job. Validated on construction."""

    nnodes: int
    node_rank: int
    master_addr: str
    entry: str  # a script path, or a module name when ``is_module``
    entry_args: tuple[str, ...] = ()
    is_module: bool = False
    master_port: int = DEFAULT_MASTER_PORT
    nproc_per_node: str = "1"
    ifname: str | None = None
    debug: bool = False
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    rdzv_timeout: int = DEFAULT_RDZV_TIMEOUT
    max_restarts: int = 0
    run_dir: str | None = None  # None: chosen by the session (./ddpkit-runs/<stamp>-node<R>-<pid>)
    job_timeout: float | None = None  # kill the job after this many seconds
    extra_env: tuple[tuple[str, str], ...] = field(default=())  # --env K=V, applied last
    local_rank_arg: LocalRankMode = ""  # see ddpkit.launch.torchrun.local_rank;
    # "" for ddpkit's own workers (`ddpkit test`, bench), which read LOCAL_RANK
    use_env: bool = False  # torch.distributed.launch's --use-env: the script reads LOCAL_RANK
    torchrun_options: tuple[tuple[str, str | None], ...] = field(default=())
    # ^ the user's own torchrun flags (canonical spelling, value or None for a switch), passed on
    notes: tuple[str, ...] = field(default=())  # how the user's torchrun flags were read
    cluster_sources: tuple[tuple[str, str], ...] = field(default=())
    # ^ where nnodes, node_rank, master_addr, master_port, nproc_per_node came from (flag,
    #   default, or a scheduler's variable: ddpkit.launch.schedulers), in that order
    hang_timeout: float = DEFAULT_HANG_TIMEOUT  # no progress on any rank for this long: hung; 0 off
    hang_action: HangAction = REPORT
    progress_key: str = field(default="", repr=False)  # seals the hang watch's job-wide progress
    # counters (token mode: it travels inside the sealed job); "" = unsealed (see hang.model)

    def __post_init__(self) -> None:
        if self.nnodes < 1:
            raise UsageError("bad-nnodes", _("--nnodes must be at least 1, got {value}",
                                             value=self.nnodes),
                             _("give the number of machines in the job, e.g. --nnodes 2"))
        if not 0 <= self.node_rank < self.nnodes:
            raise UsageError(
                "node-rank-out-of-range",
                _("--node-rank {rank} is outside 0..{last} for --nnodes {nnodes}",
                  rank=self.node_rank, last=self.nnodes - 1, nnodes=self.nnodes),
                _("number the machines 0 (the master) to nnodes-1, one distinct rank per machine"),
            )
        if not is_tcp_port(self.master_port):
            raise UsageError("bad-port", _("--master-port {port} is not a TCP port",
                                           port=self.master_port),
                             _("use a port between 1024 and 65535, e.g. 29500"))
        if not (self.nproc_per_node.isdigit() and int(self.nproc_per_node) > 0) and \
                self.nproc_per_node not in ("auto", "gpu", "cpu", "xpu"):
            raise UsageError("bad-nproc-per-node",
                             _("--nproc-per-node {value!r} is not a positive number",
                               value=self.nproc_per_node),
                             _("give the processes per machine (usually its GPU count) or 'auto'"))
        if self.connect_timeout <= 0:
            raise UsageError("bad-timeout", _("--connect-timeout must be positive"),
                             _("e.g. --connect-timeout 60"))
        if self.hang_timeout < 0:
            raise UsageError("bad-timeout", _("--hang-timeout must be 0 (off) or positive"),
                             _("e.g. --hang-timeout 300"))
        if self.hang_action not in HANG_ACTIONS:
            raise UsageError("bad-hang-action", _("--hang-action {value!r} is not one of {known}",
                                                  value=self.hang_action,
                                                  known=", ".join(HANG_ACTIONS)),
                             _("e.g. --hang-action stop"))
        if not self.entry:
            raise UsageError("missing-script", _("no training script or -m module given"),
                             _("e.g. ddpkit launch --nnodes 2 --node-rank 0 --master-addr A "
                               "train.py"))

    def torchrun_option(self, flag: str) -> str | None:
        return dict(self.torchrun_options).get(flag)

    def has_torchrun_option(self, flag: str) -> bool:
        return any(name == flag for name, _ in self.torchrun_options)

    @property
    def is_master(self) -> bool:
        return self.node_rank == 0

    @property
    def multi_node(self) -> bool:
        return self.nnodes > 1
