"""`ddpkit launch`: a multi-node job through torchrun, interface chosen right on every node.

Three ways to start it: this node's share (``--node-rank R --master-addr A``, one command per
machine); the whole job over ssh from the master (``--hosts``/``--hostfile``); or the whole job
from the master with a join token the other machines paste (``--nnodes N``, no master address).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Sequence

from ddpkit.cli.job.job_command import JOIN, NODE, JobCommand, job_request, run_this_node
from ddpkit.cli.node.launch_options import (
    ShareContext,
    add_cluster_options,
    add_launch_options,
    config_from_args,
    with_master,
    with_scheduler_layout,
    without_peer_commands,
)
from ddpkit.cli.node.node_events import ConsoleEvents, show_plan
from ddpkit.cli.node.torch_options import add_installed_torchrun_flags, add_torch_options, resolve
from ddpkit.cli.options import add_json_flag, add_verbosity_flags
from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.i18n import _
from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.outcomes import OK, NodeOutcome
from ddpkit.report import document

HELP = _("run a multi-node job via torchrun (one node, all nodes over ssh, or with a join token)")
EXAMPLES = _("""examples:
  ddpkit launch --nnodes 2 --node-rank 0 --master-addr 10.0.0.2 train.py
  ddpkit launch --hostfile hosts.txt train.py   # every node, over ssh
  ddpkit launch --nnodes 2 train.py             # prints a line for the others
""")


def configure(parser: argparse.ArgumentParser) -> None:
    add_launch_options(parser)
    add_cluster_options(parser)
    add_json_flag(parser)
    add_verbosity_flags(parser)
    add_torch_options(parser)
    parser.add_argument("-m", "--module", action="store_true",
                        help=_("run the entry as a Python module (python -m)"))
    parser.add_argument("script", help=_("the training script, or a module name with -m"))
    parser.add_argument("script_args", nargs=argparse.REMAINDER,
                        help=_("arguments for the script"))


def extend_parser(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """Called by the entry before parsing: torchrun flags newer than ddpkit's list are read from
    the installed torch, so every torchrun flag is accepted."""
    add_installed_torchrun_flags(parser, argv)


def run(args: argparse.Namespace, console: Console) -> int:
    args, torch = resolve(args)  # before the job mode: --rdzv-endpoint may give the master
    args, notes = with_scheduler_layout(args, dict(os.environ))
    for note in notes:
        render.status(console, _("note: {text}", text=note))
    request = job_request(args)
    mode = request.mode()
    tail = [*torch.node_flags(), *(["-m"] if args.module else []), args.script, *args.script_args]
    # ^ what every node's command ends with: torch's flags, then ``[-m] script args...``
    if mode != NODE:
        from ddpkit.cli.job.whole_job import run_whole_job

        torch.check_whole_job()  # each node decides the local-rank argument from its own copy
        if mode == JOIN:
            _check_own_entry(args)  # node 0 is this machine: before the others are asked to join
        reads = _preview_entry(args, console)
        request = dataclasses.replace(request, script_reads=reads)
        return run_whole_job(request, console, JOB, tail=tail,
                             own_config=lambda address: node_config(with_master(args, address)))
    config, options = node_config(args)
    if config.multi_node and not request.supervised:
        _warn_open_membership(console, config, dict(os.environ))
    return run_this_node(request, console, JOB, config, options)


def _warn_open_membership(console: Console, config: LaunchConfig, env: dict[str, str]) -> None:
    """Per node without the job's secret, torchrun's rendezvous takes any node: say so once."""
    from ddpkit.launch.torchrun.command import JOB_SECRET_ENV

    if not env.get(JOB_SECRET_ENV):
        render.warn(console, _(
            "anyone on the private network who reaches {master}:{port} can join this job and "
            "read its data. Close it: `export {name}=$(openssl rand -hex 24)` on one node and "
            "the same value on the others, or --hosts or a join token",
            master=config.master_addr, port=config.master_port, name=JOB_SECRET_ENV))


def node_config(args: argparse.Namespace) -> tuple[LaunchConfig, None]:
    """This node's configuration from its parsed command line (also how a joining node reads the
    master's job). launch has no options of its own beyond the config."""
    args, torch = resolve(args)
    config = config_from_args(args, entry=args.script, entry_args=args.script_args,
                              is_module=args.module, **torch.config_fields())
    return config, None


def _check_own_entry(args: argparse.Namespace) -> None:
    import sys
    from pathlib import Path

    from ddpkit.launch.node.entry_check import entry_error, entry_problem

    problem = entry_problem(args.script, cwd=Path.cwd(), is_module=args.module,
                            no_python=bool(args.torchrun_flag_no_python), env=dict(os.environ),
                            sys_path=sys.path)
    if problem is not None and not args.dry_run:
        raise entry_error(problem, entry=args.script, is_module=args.module, node_rank=0)


def _preview_entry(args: argparse.Namespace, console: Console) -> tuple[str, ...]:
    """A whole job: every node decides the local-rank argument from its own copy of the script
    (the copy it runs); with -v, say what this machine's copy gives. Returns the environment
    names the script reads, for the warning about what will not travel."""
    import sys
    from pathlib import Path

    from ddpkit.launch.torchrun.entry_file import environment_names, read_entry
    from ddpkit.launch.torchrun.local_rank import AUTO, decide

    source = read_entry(args.script, cwd=Path.cwd(), is_module=args.module,
                        no_python=bool(args.torchrun_flag_no_python), sys_path=sys.path)
    if console.verbosity == "verbose":
        auto = args.local_rank_arg == AUTO and not args.use_env
        choice = decide(args.local_rank_arg, source if auto else None, tuple(args.script_args),
                        use_env=args.use_env)
        render.status(console, _("local-rank argument: decided on every node from its own "
                                 "copy; this machine's gives {how}", how=choice.describe()))
    return environment_names(source.data) if source.data is not None else ()


def share(console: Console, config: LaunchConfig, context: ShareContext,
          options: None) -> tuple[int, NodeOutcome]:
    """This node's share of the job; raises the launch's DdpkitError when it fails."""
    from ddpkit.cli.torch_import import quiet_store_connector
    from ddpkit.launch.node import session

    plan = session.prepare(config, context.env, home=context.home, cwd=context.cwd,
                           python=context.python)
    if context.hide_peer_commands:
        plan = without_peer_commands(plan)
    outcome = NodeOutcome(node_rank=config.node_rank, host=plan.hostname, state=OK)
    if context.dry_run:
        show_plan(console, plan, as_json=context.as_json)
        return 0, outcome
    session.check_startable(plan)  # before the plan (and the other nodes' commands) is shown
    events = ConsoleEvents(console, output_to_stderr=context.as_json)
    events.planned(plan)
    result = session.execute(plan, events, should_stop=context.should_stop,
                             stack_request=context.stack_request,
                             store_connector=quiet_store_connector(console.verbosity))
    if context.as_json:
        render.emit_json(console, document("launch", 1, result.to_dict()))
    render.status(console, _("node {rank} finished in {seconds:.1f} s; logs in {path}",
                             rank=config.node_rank, seconds=result.outcome.duration_s,
                             path=str(plan.run_dir)), keep=True)
    return 0, outcome


JOB: JobCommand[None] = JobCommand("launch", node_config, share)
