"""`ddpkit bench`: is multi-node worth it here? Raw TCP, collective sweep and DDP scaling, measured
through `ddpkit launch` on every node; node 0 prints the tables and writes the ``ddpkit.bench/1``
file that `ddpkit plan --from-bench` reads. docs/bench.md describes it all.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ddpkit.bench.formulas import parse_sweep_size
from ddpkit.bench.merge import ClusterInfo, JobOutcome, build_payload
from ddpkit.bench.outputs import check_outputs, write_outputs, write_text
from ddpkit.bench.quit_notice import QuitWatch
from ddpkit.bench.run import (
    QUICK,
    BenchJob,
    BenchOptions,
    job_config,
    peer_argv,
    plan_jobs,
    resolve_backend,
    socket_sweep_skip_reason,
)
from ddpkit.bench.units import parse_count, parse_duration, parse_size
from ddpkit.cli.job.bench_job import bench_flags
from ddpkit.cli.job.job_command import NODE, JobCommand, job_request, run_this_node
from ddpkit.cli.node.bench_stages import BenchEvents, load_doc, run_jobs
from ddpkit.cli.node.launch_options import (
    ShareContext,
    add_cluster_options,
    add_launch_options,
    config_from_args,
    with_master,
    without_peer_commands,
)
from ddpkit.cli.node.node_events import print_plan
from ddpkit.cli.options import add_flag, add_json_flag, add_verbosity_flags
from ddpkit.cli.output import render
from ddpkit.cli.output.bench_tables import show_bench
from ddpkit.cli.output.console import Console
from ddpkit.errors import DdpkitError, ExitCode, JobFailed, UsageError
from ddpkit.i18n import _, _n
from ddpkit.launch.config import LaunchConfig
from ddpkit.launch.node.plan import NodePlan
from ddpkit.launch.outcomes import OK, NodeOutcome, first_failure, job_summary
from ddpkit.report import document

HELP = _("measure raw TCP, collective busbw and DDP scaling across the nodes; is multi-node worth"
         " it?")


def configure(parser: argparse.ArgumentParser) -> None:
    add_launch_options(parser)
    add_cluster_options(parser)
    add_json_flag(parser)
    add_verbosity_flags(parser)
    what = parser.add_argument_group(_("what to measure (default: --tcp --collectives --scaling)"))
    for flag, text in (("--tcp", _("raw TCP between every node pair, 1 and several streams")),
                       ("--collectives", _("nccl-tests-style collective sweep")),
                       ("--scaling", _("DDP step time on 1 node vs all nodes, per setting")),
                       ("--socket-sweep",
                        _("NCCL only: NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD"))):
        what.add_argument(flag, action="store_true", default=False, help=text)
    add_flag(what, "--strategies", default=None,
             help=_("comma list of ddp, fsdp, hsdp: their steps (same MLP, Adam) beside plan's "
                    "prediction (off unless given)"))
    sweep = parser.add_argument_group(_("collective sweep (nccl-tests' flags)"))
    sweep.add_argument("-b", "--min-bytes", "--minbytes", dest="min_bytes", default=None,
                       help=_("smallest size, binary suffixes: 1K = 1024 (default 1K)"))
    sweep.add_argument("-e", "--max-bytes", "--maxbytes", dest="max_bytes", default=None,
                       help=_("largest size (default 64M)"))
    sweep.add_argument("-f", "--step-factor", "--stepfactor", dest="step_factor", type=int,
                       default=None, help=_("size multiplier (default 2)"))
    sweep.add_argument("-w", "--warmup-iters", dest="warmup_iters", type=int, default=None,
                       help=_("warm-up iterations per size (default 2)"))
    sweep.add_argument("-n", "--iters", dest="iters", type=int, default=None,
                       help=_("timed iterations per size (default 5)"))
    add_flag(sweep, "--ops", default=None, help=_("comma list (default: all five)"))
    tcp = parser.add_argument_group(_("raw TCP baseline"))
    add_flag(tcp, "--tcp-seconds", default=None, help=_("per pair and stream count (default 2s)"))
    add_flag(tcp, "--tcp-streams", default=None, help=_("stream counts, comma list (default 1,4)"))
    add_flag(tcp, "--tcp-max-bytes", default=None, help=_("cap per measurement (default 1GiB)"))
    scaling = parser.add_argument_group(_("scaling run"))
    add_flag(scaling, "--params", default=None, help=_("MLP parameters, SI: 25M (default)"))
    add_flag(scaling, "--batch", type=int, default=None, help=_("samples per rank (default 64)"))
    add_flag(scaling, "--steps", type=int, default=None, help=_("timed micro-steps (default 10)"))
    add_flag(scaling, "--warmup", type=int, default=None, help=_("untimed steps first (default 3)"))
    add_flag(scaling, "--powersgd-warmup", type=int, default=None,
             help=_("PowerSGD start_powerSGD_iter in the bench (default 2, torch's minimum)"))
    add_flag(scaling, "--settings", default=None,
             help=_("comma list: none, bf16, fp16, powersgd:R, accumulate:K, bf16+accumulate:K"))
    add_flag(scaling, "--setting-timeout", default=None,
             help=_("each setting's job is stopped (and the setting failed) after this"
                    " (default 300s)"))
    add_flag(scaling, "--efficiency-threshold", type=float, default=None,
             help=_("efficiency that justifies going multi-node (default 0.7)"))
    parser.add_argument("--backend", choices=["auto", "gloo", "nccl"], default=None,
                        help=_("auto: NCCL when CUDA is present, Gloo otherwise"))
    add_flag(parser, "--net-timeout", default=None,
             help=_("limit of the TCP + sweep job (default 900s)"))
    out = parser.add_argument_group(_("output (node 0)"))
    out.add_argument("--out", default=None, help=_("also write the ddpkit.bench/1 JSON here"))
    out.add_argument("--csv", default=None, metavar="FILE", help=_("every measurement as CSV"))
    out.add_argument("--plot", default=None, metavar="FILE.png",
                     help=_("busbw vs size and efficiency bars (needs the 'plot' extra:"
                            " matplotlib)"))
    parser.add_argument("--quick", action="store_true",
                        help=_("a short run: small model, few steps, few sizes (explicit flags"
                               " win)"))
    parser.add_argument("--show-output", action="store_true", help=_("stream the ranks' own output"))


def _sweep_size(text: str, flag: str) -> int:
    try:
        return parse_sweep_size(text)
    except ValueError:  # (formulas is stdlib-only, for the workers: its reason is English)
        raise UsageError("bad-size", _("{flag}: {text!r} is not a sweep size: a number of bytes "
                                       "above 0 with an optional binary suffix, like 8, 1K, 64M, "
                                       "1G or 64MiB (K = 1024)", flag=flag, text=text),
                         _("e.g. -b 1K -e 64M (K = 1024)")) from None


def _streams(text: str) -> tuple[int, ...]:
    try:
        return tuple(sorted({int(item) for item in text.split(",") if item.strip()}))
    except ValueError:
        raise UsageError("bad-bench-option", _("--tcp-streams {text!r} is not a comma list of "
                         "numbers", text=text), _("e.g. --tcp-streams 1,4")) from None


def options_from_args(args: argparse.Namespace) -> BenchOptions:
    """The flags as :class:`BenchOptions`: defaults, then ``--quick``'s, then explicit flags."""
    values: dict[str, Any] = {f.name: f.default for f in fields(BenchOptions)}
    if args.quick:
        values.update(QUICK, quick=True)
    phases = {name: getattr(args, name) for name in ("tcp", "collectives", "scaling",
                                                     "socket_sweep")}
    if any(phases.values()) or args.strategies:
        values.update(phases)
    given: dict[str, Any] = {
        "min_bytes": args.min_bytes and _sweep_size(args.min_bytes, "-b"),
        "max_bytes": args.max_bytes and _sweep_size(args.max_bytes, "-e"),
        "step_factor": args.step_factor, "warmup_iters": args.warmup_iters, "iters": args.iters,
        "ops": args.ops and tuple(op.strip() for op in args.ops.split(",") if op.strip()),
        "tcp_seconds": args.tcp_seconds and parse_duration(args.tcp_seconds, flag="--tcp-seconds"),
        "tcp_streams": args.tcp_streams and _streams(args.tcp_streams),
        "tcp_max_bytes": args.tcp_max_bytes and parse_size(args.tcp_max_bytes,
                                                           flag="--tcp-max-bytes"),
        "params": args.params and parse_count(args.params, flag="--params"),
        "batch": args.batch, "steps": args.steps, "warmup_steps": args.warmup,
        "powersgd_warmup": args.powersgd_warmup,
        "settings": args.settings and tuple(s.strip() for s in args.settings.split(",")
                                            if s.strip()),
        "backend": args.backend,
        "setting_timeout": args.setting_timeout and parse_duration(args.setting_timeout,
                                                                   flag="--setting-timeout"),
        "net_timeout": args.net_timeout and parse_duration(args.net_timeout, flag="--net-timeout"),
        "efficiency_threshold": args.efficiency_threshold,
        "strategies": None if args.strategies is None else tuple(
            s.strip() for s in args.strategies.split(",") if s.strip()),
    }
    values.update({k: v for k, v in given.items() if v is not None})
    return BenchOptions(**values)


def _dry_run(console: Console, as_json: bool, jobs: tuple[BenchJob, ...], plans: list[NodePlan],
             notes: tuple[str, ...]) -> int:
    if as_json:
        render.emit_json(console, document("bench-plan", 1, {
            "jobs": [{"name": j.name, "port": p.config.master_port, "timeout_s": p.config.job_timeout,
                      "argv": list(p.argv), "env": dict(j.env)} for j, p in zip(jobs, plans)],
            "notes": list(notes), "launch": plans[0].to_dict() if plans else None}))
        return 0
    if plans:
        print_plan(console, plans[0])
    render.line(console, _n("the bench runs {count} job:", "the bench runs {count} jobs, one after"
                            " another:", len(jobs)))
    # the files the workers write, relative to their common directory, so the table stays narrow
    paths = [a for j in jobs for a in j.args if os.path.isabs(a)]
    base = os.path.commonpath(paths) if len(paths) > 1 else ""
    render.table(console, ["#", _("job"), _("port"), _("limit"), _("worker")],
                 [[str(i), j.name, str(p.config.master_port), f"{p.config.job_timeout:g} s",
                   " ".join(["-m", j.module] + [os.path.relpath(a, base) if base and
                                                os.path.isabs(a) else a for a in j.args])]
                  for i, (j, p) in enumerate(zip(jobs, plans))])
    if base:
        render.wrapped(console, _("(the workers' files are relative to {base})", base=base))
    for note in notes:
        render.line(console, _("note: {note}", note=note))
    return 0


@dataclass(frozen=True)
class BenchShareOptions:
    """A node's bench options, and where node 0 (or the fan-out's supervisor) writes results."""

    bench: BenchOptions
    out: str | None = None
    csv: str | None = None
    plot: str | None = None
    show_output: bool = False


def run(args: argparse.Namespace, console: Console) -> int:
    """Per node (``--node-rank R --master-addr A``), the whole job over ssh (``--hosts``), or
    from the master with a join token (``--nnodes N`` alone)."""
    request = job_request(args)
    options = share_options(args)  # bad bench flags fail here, before any node is started
    mode = request.mode()

    def render_job(c: Console, outcomes: Sequence[NodeOutcome], payload: dict[str, Any]) -> int:
        return _render_job(c, outcomes, options, as_json=request.as_json)

    if mode != NODE:
        from ddpkit.cli.job.whole_job import run_whole_job

        if not request.dry_run:  # written here, by the front end: checked before any node starts
            check_outputs(options.out, options.csv, options.plot)
        return run_whole_job(request, console, JOB, tail=bench_flags(args),
                             own_config=lambda address: node_config(with_master(args, address)),
                             render_result=render_job)
    config, node_options = node_config(args)
    return run_this_node(request, console, JOB, config, node_options)


def _tell_the_others(console: Console, config: LaunchConfig,
                     exc: DdpkitError | KeyboardInterrupt) -> None:
    from ddpkit.bench.quit_notice import HOLD_S, serve_notice

    reason = (f"{exc.error_id}: {exc.message}" if isinstance(exc, DdpkitError)
              else _("interrupted (Ctrl-C)"))
    render.log(console, _("ddpkit bench: telling the other nodes that node 0 quit (port {port}, "
                          "up to {seconds:g} s; Ctrl-C skips)", port=config.master_port,
                          seconds=HOLD_S))
    with contextlib.suppress(KeyboardInterrupt):
        serve_notice(config.master_addr, config.master_port, reason, config.nnodes - 1)


def share_options(args: argparse.Namespace) -> BenchShareOptions:
    return BenchShareOptions(options_from_args(args), out=args.out, csv=args.csv, plot=args.plot,
                             show_output=bool(args.show_output))


def node_config(args: argparse.Namespace) -> tuple[LaunchConfig, BenchShareOptions]:
    """This node's configuration and bench options from its parsed command line (also how a
    joining node reads the master's job)."""
    config = config_from_args(args, entry="ddpkit.workers.scaling", entry_args=[], is_module=True)
    return config, share_options(args)


def share(console: Console, base: LaunchConfig, context: ShareContext,
          given: BenchShareOptions) -> tuple[int, NodeOutcome]:
    """This node's share of the bench: every stage in turn; node 0 merges, writes and shows. A
    master that quits before its jobs are done tells the others, who wait for it on its port."""
    if not base.is_master or base.nnodes < 2 or context.dry_run:
        return _share(console, base, context, given, [])
    done: list[bool] = []  # once the jobs ran, the others no longer wait for this node
    try:
        return _share(console, base, context, given, done)
    except (DdpkitError, KeyboardInterrupt) as exc:
        if not done:
            _tell_the_others(console, base, exc)
        raise


def _share(console: Console, base: LaunchConfig, context: ShareContext,
           given: BenchShareOptions, done: list[bool]) -> tuple[int, NodeOutcome]:
    from ddpkit.launch.node import session

    options = given.bench
    env, home, cwd, python = context.env, context.home, context.cwd, context.python
    run_dir = Path(base.run_dir) if base.run_dir else session.default_run_dir(base, cwd)
    results_dir = run_dir / "results"
    if base.is_master and not context.dry_run:
        check_outputs(given.out, given.csv, given.plot)  # fail now, not after a long run
    if options.socket_sweep and options.backend == "auto":
        from ddpkit.cli.torch_import import import_torch

        import_torch(console.verbosity)  # the environment is read (context.env): see its note
    backend = resolve_backend(options.backend) if options.socket_sweep else options.backend
    jobs, notes = plan_jobs(options, str(results_dir), nnodes=base.nnodes, backend=backend)
    if not jobs:
        raise UsageError("nothing-to-measure", _("every requested measurement is skipped here: "
                                                 "{notes}", notes="; ".join(notes)),
                         _("run on 2+ nodes, or ask for --collectives/--scaling"))
    plans = [session.prepare(job_config(base, job, i, jobs[i - 1] if i else None, str(run_dir)),
                             env, home=home, cwd=cwd, python=python, peer_command=peer_argv(options))
             for i, job in enumerate(jobs)]
    if context.hide_peer_commands:
        plans = [without_peer_commands(plan) for plan in plans]
    outcome = NodeOutcome(node_rank=base.node_rank, host=plans[0].hostname, state=OK)
    if context.dry_run:
        return _dry_run(console, context.as_json, jobs, plans, notes), outcome
    results_dir.mkdir(parents=True, exist_ok=True)
    for note in notes:
        render.log(console, _("ddpkit bench: {note}", note=note))
    watch = None if base.is_master or base.nnodes < 2 else QuitWatch(
        base.master_addr, base.master_port, base.node_rank).start()  # hears a master that quit
    try:
        outcomes = run_jobs(console, jobs, plans, results_dir,
                            BenchEvents(console, show_output=given.show_output),
                            should_stop=_either(context.should_stop, watch))
    finally:
        if watch is not None:
            watch.stop()
    done.append(True)
    if watch is not None and (quit_reason := watch.reason() or (
            watch.look() if any(not o.ok for o in outcomes) else None)):
        raise JobFailed("job-stopped", _("node 0 quit: {reason}", reason=quit_reason),
                        _("fix what node 0 said, then start the bench again on every node"))
    if not base.is_master:
        return _node_summary(console, context.as_json, base.node_rank, outcomes), outcome
    docs = {name: doc for name in sorted({j.output for j in jobs} | {"tcp.json"})
            if (doc := load_doc(results_dir / name)) is not None}
    first = plans[0]
    cluster = ClusterInfo(base.nnodes, base.nproc_per_node, first.interface.ifname,
                          first.interface.address, first.hostname)
    skipped = socket_sweep_skip_reason(backend, base.nnodes) if options.socket_sweep else None
    payload = build_payload(options, cluster, outcomes, docs, notes, skipped)
    payload["run_dir"] = str(run_dir)
    doc = document("bench", 1, payload)
    write_text(run_dir / "bench.json", json.dumps(doc, indent=2) + "\n")
    return report(console, doc, given, as_json=context.as_json,
                  where=given.out or str(run_dir / "bench.json")), outcome


def report(console: Console, doc: dict[str, Any], given: BenchShareOptions, *, as_json: bool,
           where: str) -> int:
    """Node 0's (or a fan-out supervisor's) end of a bench: write --out/--csv/--plot, then show."""
    payload = doc
    write_outputs(doc, out=given.out, csv=given.csv, plot=given.plot,
                  threshold=given.bench.efficiency_threshold)
    if as_json:
        render.emit_json(console, doc)
    else:
        show_bench(console, payload)
    render.status(console, _("results in {where}", where=where), prefix="ddpkit bench: ",
                  keep=True)
    render.command(console, f"ddpkit plan --from-bench {where}", indent=_("  next: "),
                   more="        ", to_err=True, keep=True)
    return ExitCode.OK if payload["ok"] else ExitCode.FAILURE


def _either(should_stop: Callable[[], str | None] | None,
            watch: QuitWatch | None) -> Callable[[], str | None] | None:
    if watch is None:
        return should_stop
    return lambda: (should_stop() if should_stop else None) or (
        _("node 0 quit: {reason}", reason=said) if (said := watch.reason()) else None)


def _node_summary(console: Console, as_json: bool, node_rank: int,
                  outcomes: list[JobOutcome]) -> int:
    failed = [o for o in outcomes if not o.ok]
    if as_json:
        render.emit_json(console, document("bench-node", 1, {
            "node_rank": node_rank, "results_on": "node 0",
            "jobs": [o.to_dict() for o in outcomes]}))
    else:
        render.line(console, _n("node {node}: {count} bench job run, {failed} failed; node 0 "
                                "prints and writes the results", "node {node}: {count} bench "
                                "jobs run, {failed} failed; node 0 prints and writes the results",
                                len(outcomes), node=node_rank, failed=len(failed)))
    essential = [o for o in failed if o.job.kind in ("net", "tcp") or o.job.setting == "none"]
    return ExitCode.FAILURE if essential else ExitCode.OK


def _render_job(console: Console, outcomes: Sequence[NodeOutcome], given: BenchShareOptions, *,
                as_json: bool) -> int:
    """A whole job's result: node 0's bench document, written and shown here, then the job."""
    doc = next((o.document for o in outcomes
                if o.document and str(o.document.get("schema", "")).startswith("ddpkit.bench/")),
               None)
    failure = first_failure(outcomes)
    code = int(ExitCode.OK)
    if doc is not None:
        where = given.out or _("{run_dir}/bench.json (on node 0)",
                               run_dir=doc.get("run_dir", "node 0"))
        code = report(console, dict(doc), given, as_json=as_json, where=where)
    if failure is not None:
        render.status(console, _("job failed: {summary}", summary=job_summary(outcomes)),
                      keep=True)
        return max(code, int(ExitCode.JOB_FAILED))
    if doc is None:
        render.result(console, _("ddpkit bench: node 0 printed no bench document"))
        return int(ExitCode.FAILURE)
    return code


JOB: JobCommand[BenchShareOptions] = JobCommand("bench", node_config, share)
