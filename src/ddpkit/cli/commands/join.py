"""`ddpkit join TOKEN`: take part in a job started on the master with `ddpkit launch --nnodes N`.

Fetches the job from the master's job store (torch's c10d TCPStore), checks its signature with the
token's secret, takes the next node rank, picks this machine's interface by route to the master,
and runs its share (`launch` or `test`, whichever the master started). No ssh needed.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from ddpkit import __version__
from ddpkit.cli.command_table import COMMANDS, build_parser, load_command
from ddpkit.cli.job.job_command import JobCommand
from ddpkit.cli.node.launch_options import ShareContext, process_context, sigterm_as_interrupt
from ddpkit.cli.options import add_flag, add_json_flag, add_verbosity_flags
from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.error_ids import JOB_STOPPED, JOIN_STORE_LOST
from ddpkit.errors import (
    ConfigError,
    DdpkitError,
    EnvironmentProblem,
    NetworkProblem,
    UsageError,
)
from ddpkit.file_safety import NotRegularFile, read_regular
from ddpkit.i18n import _
from ddpkit.launch.config import DEFAULT_CONNECT_TIMEOUT
from ddpkit.launch.outcomes import INTERRUPTED, STOPPED, NodeOutcome, outcome_from_error

HELP = _("join a job started on the master with a ddpk:// token")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("token", nargs="?", default=None,
                        help=_("the ddpk://ADDRESS:PORT/RUN/SECRET token the master printed, or - "
                               "to read it from stdin (safer: --token-file or $DDPKIT_JOIN_TOKEN, "
                               "which keep it out of `ps`)"))
    add_flag(parser, "--token-file", default=None, metavar="FILE",
             help=_("read the token from FILE (the master's --token-file, copied over; - is "
                    "stdin)"))
    add_flag(parser, "--ifname", default=None,
             help=_("force this machine's inter-node interface (default: the route to the "
                    "master)"))
    add_flag(parser, "--connect-timeout", type=float, default=DEFAULT_CONNECT_TIMEOUT,
             help=_("seconds to wait for the master (default {seconds:g})",
                    seconds=DEFAULT_CONNECT_TIMEOUT))
    add_flag(parser, "--run-dir", default=None,
             help=_("where per-rank logs go (default ./ddpkit-runs/<time>-node<R>-<pid>)"))
    parser.add_argument("--show-output", action="store_true",
                        help=_("ddpkit test jobs: stream the ranks' own output"))
    add_json_flag(parser)
    add_verbosity_flags(parser)


def run(args: argparse.Namespace, console: Console) -> int:
    from ddpkit.cli.torch_import import import_torch
    from ddpkit.launch.join.store import connect_store
    from ddpkit.launch.join.tokens import TOKEN_ENV, parse_token
    from ddpkit.launch.join.worker import WorkerSide
    from ddpkit.launch.watch import StopSwitch
    from ddpkit.net.route import route_to

    env, home, cwd, python = process_context()
    token = parse_token(token_text(args, env))
    env.pop(TOKEN_ENV, None)  # the secret stays with ddpkit, never in the job's environment
    route = route_to(token.address)
    render.status(console, _("joining the job at {endpoint} via {ifname} (source {source})",
                             endpoint=token.endpoint, ifname=route.ifname, source=route.source))
    import_torch(console.verbosity)  # after the environment was read: see cli/torch_import.py
    with sigterm_as_interrupt():
        worker = WorkerSide(connect_store(token, timeout=args.connect_timeout))
        spec = worker.fetch_job()
        _check_version(spec)
        _check_script(spec, node_args(spec, 1, args), cwd)  # before a rank is taken
        host = socket.gethostname()
        rank = worker.claim_rank(spec, host, route.source, route.ifname)
        render.status(console, _("joined as node {rank} of {nnodes} ({job}); waiting for the "
                                 "other nodes", rank=rank, nnodes=spec.nnodes,
                                 job=" ".join([spec.command, *spec.job.entry])))
        switch = StopSwitch(interrupt=lambda: os.kill(os.getpid(), signal.SIGTERM))
        lost: list[str] = []  # why the heartbeat lost the master's store

        def on_lost(why: str) -> None:
            lost.append(why)
            switch.trigger(why)

        worker.start_heartbeat(on_lost=on_lost)
        try:
            worker.wait_for_go(spec.join_timeout + 30.0)
            rank = worker.rank or rank  # the go's, for this node's claim (it may have moved)
            job = job_command(spec.command)
            config, options = job.node_config(node_args(spec, rank, args))
            config = dataclasses.replace(config, progress_key=spec.progress_key)
            context = ShareContext(
                env={**env, **dict(spec.env)}, home=home, cwd=cwd, python=python, as_json=args.json,
                should_stop=lambda: switch.should_stop() or worker.should_stop(),
                hide_peer_commands=True)
            code, outcome = job.share(console, config, context, options)
        except DdpkitError as exc:
            switch.settle()
            if (why := _master_lost(worker, lost)) is not None:
                raise _lost_error(worker, why, rank, host, exc) from None
            _report(console, worker, outcome_from_error(exc.to_dict(), node_rank=rank, host=host))
            raise
        except KeyboardInterrupt as exc:
            switch.settle()  # (the switch's own interrupt: the master lost, nobody polling)
            if (why := _master_lost(worker, lost)) is not None:
                raise _lost_error(worker, why, rank, host, exc) from None
            state, message = (STOPPED, switch.reason) if switch.reason else (INTERRUPTED, "Ctrl-C")
            _report(console, worker, NodeOutcome(node_rank=rank, host=host, state=state,
                                                 message=message or ""))
            raise
        switch.settle()
        _report(console, worker, outcome)
        return code


def _master_lost(worker: Any, lost: list[str]) -> str | None:
    """How this node lost the master's job store (its heartbeat's connection, or its own):
    ``lost the job store at ADDRESS:PORT (why)``; None while the store answers."""
    if lost:
        return lost[0]
    store = worker.store
    return None if store.lost is None else _("lost the job store at {endpoint} ({why})",
                                             endpoint=store.token.endpoint, why=store.lost)


def _lost_error(worker: Any, why: str, rank: int, host: str,
                exc: BaseException) -> NetworkProblem:
    """``join-store-lost`` for a node that lost its master: which store, why, and what became of
    this node's ranks (stopped for it, or ended before). Nothing is written to the lost store."""
    ranks: str
    if isinstance(exc, DdpkitError) and exc.error_id == JOB_STOPPED:
        ranks = _("its torchrun and ranks were stopped")
    elif isinstance(exc, DdpkitError) and exc.error_id != JOIN_STORE_LOST:
        ranks = _("its ranks had ended: {summary}", summary=exc.message)
    elif isinstance(exc, KeyboardInterrupt) and exc.args and isinstance(exc.args[0], str):
        ranks = exc.args[0]  # (session's Interrupted: what it stopped, on which node)
    else:
        ranks = _("no rank of it was running")
    details = exc.details if isinstance(exc, DdpkitError) else None
    return NetworkProblem(
        "join-store-lost",
        _("node {rank} ({host}) lost the master: {lost}; {ranks}", rank=rank, host=host,
          lost=why, ranks=ranks),
        _("check that the master still runs and that this machine reaches {address} (`ddpkit "
          "nics --to {address}`); this node's ranks' logs are in its run directory",
          address=worker.store.token.address),
        details=details)


MAX_TOKEN_BYTES = 4096


def token_text(args: argparse.Namespace, env: dict[str, str]) -> str:
    """The token from exactly one place: the argument (``-``: stdin), --token-file (``-``: stdin)
    or $DDPKIT_JOIN_TOKEN. UsageError ``no-token`` / ``token-file-unreadable``."""
    from ddpkit.launch.join.tokens import TOKEN_ENV

    given = [s for s in (args.token, args.token_file) if s is not None]
    if len(given) > 1:
        raise UsageError("bad-usage", _("give the token once: as an argument or with "
                                        "--token-file"), _("drop one of them"))
    if not given:
        if env.get(TOKEN_ENV):
            return env[TOKEN_ENV]
        raise UsageError("no-token", _("no join token given"),
                         _("pass --token-file FILE (safest), set {variable}, or pipe it in with "
                           "`ddpkit join -`", variable=TOKEN_ENV))
    source = given[0]
    if source == "-":
        return sys.stdin.readline(MAX_TOKEN_BYTES)
    if args.token is not None:
        return str(source)
    try:
        return read_regular(source, MAX_TOKEN_BYTES).decode("utf-8")
    except NotRegularFile as exc:  # a FIFO would wait for a writer until Ctrl-C
        raise ConfigError("token-file-unreadable",
                          _("cannot read the token file {why}", why=exc.strerror),
                          _("pipe the token in instead (`cat {path} | ddpkit join -`), or copy "
                            "the master's --token-file here (scp) and pass its path",
                            path=source)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("token-file-unreadable",
                          _("cannot read the token file {path}: {why}", path=source,
                            why=getattr(exc, "strerror", None) or str(exc)),
                          _("copy the master's --token-file here (scp) and pass its path")) \
            from None


def node_args(spec: Any, rank: int, args: argparse.Namespace) -> argparse.Namespace:
    """This node's share of the master's job, read as its own command line would be: the job's
    node_argv (the same one the printed peer commands and the ssh fan-out use), plus this node's
    own --ifname, --run-dir and --show-output, through the command's own parser."""
    from ddpkit.launch.job import node_argv

    own = [*(["--ifname", args.ifname] if args.ifname else []),
           *(["--run-dir", args.run_dir] if args.run_dir else []),
           *(["--show-output"] if args.show_output and spec.command == "test" else [])]
    argv = node_argv(spec.job, rank, spec.master_addr, node_flags=own)
    parser, _unused = build_parser(argv[0], argv=argv[1:])
    try:
        return parser.parse_args(argv[1:])
    except SystemExit:
        raise ConfigError("bad-job", _("this ddpkit cannot read the master's job ({argv})",
                                       argv=" ".join(argv)),
                          _("install the same ddpkit version on every machine")) from None


def _check_version(spec: Any) -> None:
    if spec.ddpkit_version != __version__:
        raise EnvironmentProblem(
            "version-mismatch",
            _("the master runs ddpkit {master}, this machine {here}",
              master=spec.ddpkit_version, here=__version__),
            _("install the same ddpkit version on every machine"))


def _check_script(spec: Any, parsed: argparse.Namespace, cwd: Path) -> None:
    script = getattr(parsed, "script", None)
    if script and not parsed.module and not (cwd / script).is_file():
        raise ConfigError(
            "script-not-found",
            _("the job's script {script} is not in this directory ({cwd})", script=script,
              cwd=str(cwd)),
            _("run `ddpkit join` from the directory that holds it (on the master: {path})",
              path=spec.cwd))


def job_command(name: str) -> JobCommand[Any]:
    """The whole-job command the master started, found by name in the command table."""
    job = getattr(load_command(name), "JOB", None) if name in COMMANDS else None
    if not isinstance(job, JobCommand):
        raise ConfigError("bad-job", _("the master's job runs `ddpkit {name}`, which this ddpkit "
                                       "cannot join", name=name),
                          _("install the same ddpkit version on every machine"))
    return job


def _report(console: Console, worker: Any, outcome: NodeOutcome) -> None:
    try:
        worker.report(outcome)
    except (RuntimeError, OSError, DdpkitError) as exc:
        render.status(console, _("could not tell the master how this node ended ({why})",
                                 why=str(exc)))
