"""The launch flags shared by `ddpkit launch` and `ddpkit test`, and their front end."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from ddpkit.cli.options import add_flag
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
from ddpkit.launch.node.plan import NodePlan
from ddpkit.net.ports import DEFAULT_MASTER_PORT

# The cluster flags' defaults: a flag still at its default may be filled from a scheduler's
# environment (apply_scheduler_layout).
CLUSTER_DEFAULTS: dict[str, Any] = {"nnodes": 1, "node_rank": None, "master_addr": None,
                                    "master_port": DEFAULT_MASTER_PORT, "nproc_per_node": "1"}


def add_launch_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(_("cluster (torchrun's spellings work too; inside Slurm, a "
                                        "PyTorchJob, RunPod or SkyPilot they come from there)"))
    add_flag(group, "--nnodes", type=_nnodes, default=CLUSTER_DEFAULTS["nnodes"],
             help=_("number of machines (default 1)"))
    add_flag(group, "--node-rank", type=int, default=CLUSTER_DEFAULTS["node_rank"],
             help=_("this machine's rank, 0 = master"))
    add_flag(group, "--master-addr", default=CLUSTER_DEFAULTS["master_addr"],
             help=_("the master's private address (default 127.0.0.1 for one node)"))
    add_flag(group, "--master-port", type=int, default=CLUSTER_DEFAULTS["master_port"],
             help=_("rendezvous port on the master (default {port})", port=DEFAULT_MASTER_PORT))
    add_flag(group, "--nproc-per-node", default=CLUSTER_DEFAULTS["nproc_per_node"],
             help=_("processes on this machine, usually its GPU count (default 1; 'auto' allowed)"))
    add_flag(group, "--ifname", default=None,
             help=_("force the inter-node interface (default: the route to the master)"))
    add_flag(group, "--connect-timeout", type=float, default=DEFAULT_CONNECT_TIMEOUT,
             help=_("seconds a worker waits for the master (default {seconds:g})",
                    seconds=DEFAULT_CONNECT_TIMEOUT))
    add_flag(group, "--rdzv-timeout", type=int, default=DEFAULT_RDZV_TIMEOUT,
             help=_("seconds the master waits for every node to join (default {seconds})",
                    seconds=DEFAULT_RDZV_TIMEOUT))
    add_flag(group, "--max-restarts", type=int, default=0, help=_("torchrun worker-group restarts"))
    add_flag(group, "--job-timeout", type=float, default=None,
             help=_("stop the job after this many seconds"))
    add_flag(group, "--hang-timeout", type=float, default=DEFAULT_HANG_TIMEOUT, metavar="SECONDS",
             help=_("the job is hung when no rank printed or used CPU for this long: every "
                    "rank's stack goes to <run dir>/stacks/ (default {seconds:g}; 0 = off)",
                    seconds=DEFAULT_HANG_TIMEOUT))
    add_flag(group, "--hang-action", choices=HANG_ACTIONS, default=REPORT,
             help=_("on a hang: report the stacks and keep waiting, or report and stop the job "
                    "(default report)"))
    add_flag(group, "--run-dir", default=None,
             help=_("where per-rank logs go (default ./ddpkit-runs/<time>-node<R>-<pid>)"))
    add_flag(group, "--env", action="append", default=[], metavar="K=V",
             help=_("extra environment for the workers (repeatable)"))
    parser.add_argument("--debug", action="store_true",
                        help=_("NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,NET, "
                               "TORCH_DISTRIBUTED_DEBUG=DETAIL, and where the logs are"))
    parser.add_argument("--dry-run", action="store_true",
                        help=_("print the plan (argv, env, interface and why) and start nothing"))


def _nnodes(text: str) -> int:
    from ddpkit.launch.torchrun.rendezvous import fixed_node_count

    try:
        return fixed_node_count(text)  # torchrun's MIN:MAX with MIN == MAX is a fixed count
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_overrides(items: list[str]) -> list[tuple[str, str]]:
    """``--env K=V`` flags as pairs; UsageError ``bad-env``."""
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError("bad-env", _("--env {item!r} is not KEY=VALUE", item=item),
                             _("e.g. --env OMP_NUM_THREADS=4"))
        if not _ENV_NAME.fullmatch(key):
            raise UsageError("bad-env", _("--env {item!r}: {key!r} is not a variable name",
                                          item=item, key=key),
                             _("names are letters, digits and _, not starting with a digit, e.g. "
                               "--env OMP_NUM_THREADS=4"))
        pairs.append((key, value))
    return pairs


def config_from_args(args: argparse.Namespace, *, entry: str, entry_args: list[str],
                     is_module: bool, **launch_only: Any) -> LaunchConfig:
    """``launch_only``: LaunchConfig fields only `ddpkit launch` has (the local-rank argument,
    torchrun's flags: ``TorchOptions.config_fields()``)."""
    extra_env = env_overrides(args.env)
    master = args.master_addr
    if master is None:
        if args.nnodes > 1:
            raise UsageError("missing-master-addr",
                             _("--nnodes {nnodes} needs --master-addr", nnodes=args.nnodes),
                             _("pass the master's private address, from `ddpkit nics` on the "
                               "master; or start the job on the master without it and run the "
                               "`ddpkit join TOKEN` line it prints here"))
        master = "127.0.0.1"
    return LaunchConfig(
        nnodes=args.nnodes, node_rank=args.node_rank or 0, master_addr=master,
        master_port=args.master_port, nproc_per_node=str(args.nproc_per_node),
        ifname=args.ifname, debug=args.debug, connect_timeout=args.connect_timeout,
        rdzv_timeout=args.rdzv_timeout, max_restarts=args.max_restarts, run_dir=args.run_dir,
        job_timeout=args.job_timeout, entry=entry, entry_args=tuple(entry_args),
        is_module=is_module, extra_env=tuple(extra_env),
        cluster_sources=tuple(getattr(args, "cluster_sources", ())),
        hang_timeout=args.hang_timeout, hang_action=args.hang_action,
        **launch_only,
    )


def with_scheduler_layout(args: argparse.Namespace,
                          env: dict[str, str]) -> tuple[argparse.Namespace, tuple[str, ...]]:
    """A copy of ``args`` whose cluster flags left at their defaults are filled from the scheduler
    or platform whose variables ``env`` holds (ddpkit.launch.schedulers), with each field's source
    in ``cluster_sources``; and the notes (traps noticed) to show. With --hosts/--hostfile the
    host list decides and the environment is not read."""
    given = {name: getattr(args, name) for name, default in CLUSTER_DEFAULTS.items()
             if getattr(args, name) != default}
    sources = {name: ("flag" if name in given else "default") for name in CLUSTER_DEFAULTS}
    filled: dict[str, Any] = {}
    notes: tuple[str, ...] = ()
    if not (getattr(args, "hosts", None) or getattr(args, "hostfile", None)):
        from ddpkit.launch import schedulers

        layout = schedulers.detect(env, resolve=_resolve_host,
                                   hostnames=lambda listed: _scontrol_hostnames(listed, env))
        if layout is not None:
            for name, value in schedulers.merge_flags(layout, given).items():
                filled[name] = int(str(value)) if name in ("nnodes", "node_rank", "master_port") \
                    else value
                if name not in given:
                    sources[name] = f"{layout.scheduler}: {layout.sources.get(name, '?')}"
            notes = layout.notes
    return argparse.Namespace(**{**vars(args), **filled,
                                 "cluster_sources": tuple(sources.items())}), notes


def _resolve_host(name: str) -> str:
    from ddpkit.net.route import resolve

    return resolve(name)[0]


SLURM_DEFAULT_CONF = "/etc/slurm/slurm.conf"  # Debian's and Slurm's default --sysconfdir


def _scontrol_hostnames(listed: str, env: Mapping[str, str],
                        default_conf: str = SLURM_DEFAULT_CONF) -> list[str] | None:
    """``scontrol show hostnames LIST``, or None (then the tested parser expands the list).

    Only run where scontrol has a config file to read (``SLURM_CONF``, else the default path):
    without one, Slurm 22.05's scontrol retries a missing SLURM_CONF for 60 s, and with neither it
    asks DNS for the controller's SRV record (configless mode), seen on a real Slurm on the sim.
    """
    import shutil
    import subprocess

    tool = shutil.which("scontrol")
    conf = env.get("SLURM_CONF") or default_conf
    if tool is None or not os.path.isfile(conf):
        return None
    try:
        done = subprocess.run([tool, "show", "hostnames", listed], capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return [line.strip() for line in done.stdout.splitlines() if line.strip()] or None


@contextlib.contextmanager
def stacks_on_signal() -> Iterator[threading.Event]:
    """SIGUSR1 or SIGQUIT (Ctrl-\\) asks for every rank's stack; the launch loop answers."""
    request = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        request.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGUSR1, signal.SIGQUIT)}
    try:
        yield request
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops a launch exactly like Ctrl-C does (the whole process tree goes). Only the
    first one: a second (``timeout`` signals the process and its group, ``sim exec`` passes it
    on) would otherwise break into the stop it started, whose own end is bounded anyway."""
    stopping = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        if stopping.is_set():
            return
        stopping.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def process_context() -> tuple[dict[str, str], Path, Path, str]:
    """The edge: this process's env, home, cwd and python, read once and passed down.

    ``home`` is where NCCL looks for ``~/.nccl.conf`` (the password database, not $HOME).
    """
    from ddpkit.ncclconf.home import nccl_home

    return dict(os.environ), nccl_home(), Path.cwd(), sys.executable


# -- the whole job from one machine: ssh fan-out, or a join token ---------------------------------

def add_cluster_options(parser: argparse.ArgumentParser) -> None:
    from ddpkit.launch.ssh.remote import DEFAULT_SSH_CONNECT_TIMEOUT, DEFAULT_SSH_PARALLEL
    from ddpkit.net.ports import DEFAULT_JOIN_PORT

    group = parser.add_argument_group(
        _("the whole job from this machine: over ssh (--hosts/--hostfile), or, with --nnodes N "
          "and no --master-addr, a `ddpkit join` token for the other machines"))
    add_flag(group, "--hosts", default=None, metavar="H1,H2[:SLOTS]",
             help=_("run on these machines over ssh; node 0 (the master) first"))
    add_flag(group, "--hostfile", default=None, metavar="FILE",
             help=_("like --hosts, from a file: `HOST slots=N` (DeepSpeed), `HOST:N` (MPI), "
                    "`[USER@]HOST[:PORT] slots=N`, # comments"))
    add_flag(group, "--ssh-option", action="append", default=[], metavar="KEY=VALUE",
             help=_("an extra `ssh -o` option, e.g. StrictHostKeyChecking=accept-new (repeatable)"))
    add_flag(group, "--ssh-config", default=None, metavar="FILE",
             help=_("an ssh client config file (`ssh -F`; default: ~/.ssh/config as always)"))
    add_flag(group, "--ssh-connect-timeout", type=float, default=DEFAULT_SSH_CONNECT_TIMEOUT,
             help=_("seconds ssh waits for a host (default {seconds:g})",
                    seconds=DEFAULT_SSH_CONNECT_TIMEOUT))
    add_flag(group, "--ssh-parallel", type=int, default=DEFAULT_SSH_PARALLEL, metavar="N",
             help=_("connect to at most N hosts at once; each has its own deadline, and the job "
                    "reuses one connection per host (default {count})", count=DEFAULT_SSH_PARALLEL))
    add_flag(group, "--remote-python", default=None, metavar="PATH",
             help=_("python on the other machines (default: the same path as here)"))
    add_flag(group, "--output-dir", default=None, metavar="DIR",
             help=_("also write every node's output to DIR/node<R>-<host>.log"))
    add_flag(group, "--env-file", default=None, metavar="FILE",
             help=_("KEY=VALUE lines for every node (default: ./.ddpkit_env when it exists)"))
    add_flag(group, "--join-port", type=int, default=DEFAULT_JOIN_PORT,
             help=_("token mode: the job store's port on the master (default {port})",
                    port=DEFAULT_JOIN_PORT))
    add_flag(group, "--join-timeout", type=float, default=600.0,
             help=_("token mode: seconds the master waits for every node to join (default 600)"))
    add_flag(group, "--token-file", default=None, metavar="FILE",
             help=_("token mode: also write the join token to FILE (mode 0600)"))
    parser.add_argument("--supervised", action="store_true", help=argparse.SUPPRESS)
    # ^ run under a job supervisor: stop when stdin reaches end of file, print no peer commands
    parser.add_argument("--env-stdin", action="store_true", help=argparse.SUPPRESS)
    # ^ the supervisor sends the passed env and --env values as one JSON line on stdin, not argv


def with_master(args: argparse.Namespace, address: str) -> argparse.Namespace:
    """A copy of ``args`` with the master's address (token mode: the address the master chose)."""
    return argparse.Namespace(**{**vars(args), "master_addr": address})


def without_peer_commands(plan: NodePlan) -> NodePlan:
    """A supervised node's plan: the supervisor starts the other nodes, nobody types commands."""
    return dataclasses.replace(plan, peer_commands=())


@dataclasses.dataclass(frozen=True)
class ShareContext:
    """How one node's share runs: the process edge (env, home, cwd, python) and the front end."""

    env: dict[str, str]
    home: Path
    cwd: Path
    python: str
    as_json: bool = False
    dry_run: bool = False
    should_stop: Callable[[], str | None] | None = None
    stack_request: threading.Event | None = None  # set on SIGUSR1: dump every rank's stack
    hide_peer_commands: bool = False  # a supervisor or a join token starts the other nodes

    @classmethod
    def here(cls, **front: Any) -> ShareContext:
        env, home, cwd, python = process_context()
        return cls(env=env, home=home, cwd=cwd, python=python, **front)
