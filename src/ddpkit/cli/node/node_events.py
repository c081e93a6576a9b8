"""One node's launch on a terminal: its plan (``--dry-run`` and the start-up summary) and the
events :func:`ddpkit.launch.node.session.execute` reports while it runs."""

from __future__ import annotations

from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.i18n import _
from ddpkit.launch.envpass import shown_env
from ddpkit.launch.node.plan import FLIGHT_RECORDER_PREFIXES, NodePlan
from ddpkit.report import document
from ddpkit.wording import commas

_SOURCES = {"flag": _("flag"), "default": _("default")}  # else "Slurm: SLURM_NODEID" (a name)


def scheduler_of(sources: tuple[tuple[str, str], ...]) -> str | None:
    """The scheduler this node's rank came from (``"Slurm: SLURM_NODEID"`` -> Slurm), else None."""
    source = dict(sources).get("node_rank", "")
    name, sep, _rest = source.partition(": ")
    return name if sep else None


def set_names(plan: NodePlan) -> str:
    """One line for what ddpkit set in the ranks' environment: the names (``-v`` shows the
    values), torch's flight-recorder settings as one family."""
    recorder = [k for k in plan.env_set if k.startswith(FLIGHT_RECORDER_PREFIXES)]
    names = [k for k in sorted(plan.env_set) if k not in recorder]
    if recorder:
        names.append(_("{count} TORCH_* of the flight recorder", count=len(recorder)))
    return _("ddpkit: set {names} (-v: values)", names=commas(names))


class ConsoleEvents:
    """Launch events for a terminal: plan and progress on stderr, worker output on stdout."""

    def __init__(self, console: Console, *, output_to_stderr: bool = False,
                 quiet_output: bool = False) -> None:
        self.console = console
        self.output_to_stderr = output_to_stderr  # keep stdout for one JSON document
        self.quiet_output = quiet_output

    def planned(self, plan: NodePlan) -> None:
        c = self.console
        render.wrapped(c, _("ddpkit: node {rank}/{nnodes} on {host}: inter-node interface "
                            "{ifname} ({reason})", rank=plan.config.node_rank,
                            nnodes=plan.config.nnodes, host=plan.hostname,
                            ifname=plan.interface.ifname, reason=plan.interface.reason),
                       indent="ddpkit:   ", to_err=True)
        verbose = c.verbosity == "verbose"
        if verbose:
            for key, value in shown_env(plan.env_set).items():
                render.clipped(c, f"ddpkit:   {key}={value}", middle=True, to_err=True)
        elif plan.env_set:
            render.wrapped(c, set_names(plan), indent="ddpkit:   ", to_err=True)
        # a user's script (not ddpkit's own worker); "none" is torchrun's own way: said with -v
        if plan.local_rank.mode and (verbose or plan.local_rank.flag):
            render.wrapped(c, _("ddpkit: local-rank argument: {how}",
                                how=plan.local_rank.describe()),
                           indent="ddpkit:   ", to_err=True)
        for text in plan.config.notes:
            render.wrapped(c, _("ddpkit: note: {text}", text=text), indent="ddpkit:   ",
                           to_err=True)
        for text in plan.warnings:
            render.warn(c, text)
        started_by = scheduler_of(plan.config.cluster_sources)
        if plan.peer_commands and started_by:
            # srun (or the PyTorchJob, RunPod, SkyPilot) starts every node: nothing to type.
            render.status(c, _("the other nodes are started by {scheduler}, as this one was",
                               scheduler=started_by))
        elif plan.peer_commands:
            render.log(c, _("ddpkit: now run on every other node:"))
            for command in plan.peer_commands:
                render.command(c, command, to_err=True)
        if plan.config.debug:
            render.status(c, _("debug logs go to {path}", path=str(plan.run_dir)))

    def waiting(self, message: str) -> None:
        render.status(self.console, message)

    def warned(self, message: str) -> None:
        render.warn(self.console, message)

    def torch_internal(self, line: str, condensed: str | None) -> None:
        """torch's C++ log: raw with -v, else as ddpkit condensed it (or not at all)."""
        if self.console.verbosity == "verbose":
            self.output(line)
        elif condensed is not None and not self.quiet_output:
            # ddpkit's own line (a rank's "[default0]:" kept in front): fits the console
            render.wrapped(self.console, condensed, indent="    ", to_err=self.output_to_stderr)

    def output(self, line: str) -> None:
        if self.quiet_output:
            return
        if self.output_to_stderr:
            render.log(self.console, line)
        else:
            render.line(self.console, line)


def print_plan(console: Console, plan: NodePlan) -> None:
    d = plan.to_dict()
    render.line(console, _("node {rank} of {nnodes} on {host}, master {master}",
                           rank=d["node_rank"], nnodes=d["nnodes"], host=d["hostname"],
                           master=d["master"]))
    render.wrapped(console, _("interface: {ifname} {address} ({reason})",
                              ifname=plan.interface.ifname, address=plan.interface.address,
                              reason=plan.interface.reason))
    if plan.env_set:
        render.line(console, _("environment set for the workers:"))
        for key, value in shown_env(plan.env_set).items():
            render.clipped(console, f"  {key}={value}", middle=True)
    else:
        render.line(console, _("environment set for the workers: nothing (loopback needs no "
                               "interface variable)") if plan.interface.source == "loopback" else
                    _("environment set for the workers: nothing"))
    if any(source not in ("flag", "default") for _name, source in plan.config.cluster_sources):
        render.line(console, _("cluster from the environment:"))
        for name, source in plan.config.cluster_sources:
            value = getattr(plan.config, name)
            render.line(console, _("  --{flag} {value}  ({source})", flag=name.replace("_", "-"),
                                   value=value, source=_SOURCES.get(source, source)))
    if plan.local_rank.mode:
        render.wrapped(console, _("local-rank argument: {how}", how=plan.local_rank.describe()))
    for text in plan.config.notes:
        render.wrapped(console, _("note: {text}", text=text))
    for text in plan.warnings:
        render.wrapped(console, _("warning: {text}", text=text))
    render.line(console, _("command:"))
    from ddpkit.launch.torchrun.command import quote_command

    render.command(console, quote_command(plan.argv))
    if plan.peer_commands:
        render.line(console, _("on every other node:"))
        for command in plan.peer_commands:
            render.command(console, command)


def show_plan(console: Console, plan: NodePlan, *, as_json: bool) -> None:
    """``--dry-run``: the plan as text, or as a ``ddpkit.launch-plan/1`` document."""
    if as_json:
        render.emit_json(console, document("launch-plan", 1, plan.to_dict()))
    else:
        print_plan(console, plan)
