"""`ddpkit launch`: this node's share of a multi-node job, through torchrun, interface chosen right."""

from __future__ import annotations

import argparse

from ddpkit.cli import render
from ddpkit.cli.console import Console
from ddpkit.cli.launch_options import (
    ConsoleEvents,
    add_launch_options,
    config_from_args,
    print_plan,
    process_context,
    sigterm_as_interrupt,
)
from ddpkit.cli.options import add_json_flag
from ddpkit.report import document

HELP = "run this node's share of a multi-node job via torchrun, with the right interface"


def configure(parser: argparse.ArgumentParser) -> None:
    add_launch_options(parser)
    add_json_flag(parser)
    parser.add_argument("-m", "--module", action="store_true",
                        help="run the entry as a Python module (python -m)")
    parser.add_argument("script", help="training script (or module with -m)")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, help="arguments for the script")


def run(args: argparse.Namespace, console: Console) -> int:
    from ddpkit.launch import session

    config = config_from_args(args, entry=args.script, entry_args=args.script_args,
                              is_module=args.module)
    env, home, cwd, python = process_context()
    plan = session.prepare(config, env, home=home, cwd=cwd, python=python)
    if args.dry_run:
        if args.json:
            render.emit_json(console, document("launch-plan", 1, plan.to_dict()))
        else:
            print_plan(console, plan)
        return 0
    events = ConsoleEvents(console, output_to_stderr=args.json)
    events.planned(plan)
    with sigterm_as_interrupt():
        result = session.execute(plan, events)
    if args.json:
        render.emit_json(console, document("launch", 1, result.to_dict()))
    render.log(console, f"ddpkit: node {config.node_rank} finished in "
                        f"{result.outcome.duration_s:.1f} s; logs in {plan.run_dir}")
    return 0
