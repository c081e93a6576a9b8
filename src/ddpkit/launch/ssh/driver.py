"""The whole job over ssh (``--hosts``/``--hostfile``): preflight every host, choose the master,
then supervise one ``ddpkit <command> --node-rank I`` per host (:mod:`.fanout`).

The front end builds a :class:`HostsJob` (what to run where, decided from its flags) and gets a
:class:`~ddpkit.launch.outcomes.JobResult` back; it is told what happens meanwhile through
:class:`HostsEvents`. Preflight problems raise before any node starts
(``preflight-failed``, ``master-address-unknown``); Ctrl-C stops every node, then raises
``Interrupted``. A node that fails is not an exception: it is in the result, the others stopped.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ddpkit import __version__
from ddpkit.errors import DdpkitError, NetworkProblem
from ddpkit.i18n import _
from ddpkit.launch.envpass import PassedEnv
from ddpkit.launch.events import Progress
from ddpkit.launch.job import JobSpec
from ddpkit.launch.outcomes import JobResult
from ddpkit.launch.ssh.fanout import NodeCommand, NodeEvents, plan_nodes, supervise
from ddpkit.launch.ssh.hostfile import Host
from ddpkit.launch.ssh.probe import (
    HostProbe,
    MasterChoice,
    RouteSource,
    choose_master,
    probe_hosts,
    require_fit,
)
from ddpkit.launch.ssh.remote import SshSettings, remote_command, ssh_argv
from ddpkit.launch.ssh.reuse import shared_connections
from ddpkit.net.route import LOOPBACK_NAMES
from ddpkit.wording import clauses


class HostsEvents(Progress, NodeEvents, Protocol):
    """The ssh fan-out (``hosts_driver.run``): preflight progress, then its nodes."""


HOSTS_LISTED = 8  # up to this many hosts, each gets its preflight line; beyond, only those failing
MASTER_PLACEHOLDER = "<node 0's address, found at run time>"  # a dry run's master address


@dataclass(frozen=True)
class HostsJob:
    """One job over ssh: the hosts (node 0, the master, first), which of them are this machine
    (:func:`this_machine_flags`; reached without ssh), the job every host runs, and how."""

    hosts: tuple[Host, ...]
    local: tuple[bool, ...]
    job: JobSpec
    python: str  # the python on every host (the same path as here unless told otherwise)
    cwd: str  # every node runs in this working directory
    passed: PassedEnv  # the environment every node gets, over its stdin
    base_env: Mapping[str, str]  # a node on this machine runs with this environment
    ssh: SshSettings = field(default_factory=SshSettings)
    run_dir_base: str | None = None  # node I's run directory is <this>/node<I>
    output_dir: Path | None = None  # every node's output also goes to <this>/node<I>-<host>.log
    master_addr: str | None = None  # given (--master-addr); None: node 0's route to node 1


class Prober(Protocol):
    def __call__(self, hosts: Sequence[Host], *, local: Sequence[bool], python: str, cwd: str,
                 settings: SshSettings, version: str) -> tuple[HostProbe, ...]: ...


NodeRoute = Callable[[Host, str, str, SshSettings], tuple[str, str]]
"""(node 0, target, python, ssh settings) -> node 0's (source address, interface) to target."""


@dataclass(frozen=True)
class HostsTools:
    """What the preflight does to the hosts and the network (replaced by fakes in tests)."""

    probe: Prober
    route_here: RouteSource
    route_on_node0: NodeRoute

    @classmethod
    def real(cls) -> HostsTools:
        return cls(probe=probe_hosts, route_here=route_here, route_on_node0=route_on_node0)


def this_machine_flags(hosts: Sequence[Host]) -> tuple[bool, ...]:
    """Per host: reached without ssh (no user or port given, and its name is one of our
    addresses). The interfaces are read once for the whole list, not once per host."""
    from ddpkit.net.interfaces import discover, interface_holding
    from ddpkit.net.route import resolve

    nics = None
    flags = []
    for host in hosts:
        if host.user or host.port:
            flags.append(False)
            continue
        if host.name in LOOPBACK_NAMES:
            flags.append(True)
            continue
        try:
            addresses = resolve(host.name)
        except DdpkitError:
            flags.append(False)
            continue
        nics = nics if nics is not None else discover()
        flags.append(any(interface_holding(address, nics) is not None for address in addresses))
    return tuple(flags)


def plan(job: HostsJob, master_addr: str) -> tuple[NodeCommand, ...]:
    """Pure: every node's command with ``master_addr`` as the master (a dry run shows these with
    the given --master-addr, or :data:`MASTER_PLACEHOLDER`)."""
    return plan_nodes(job.hosts, job.local, job=job.job, master_addr=master_addr,
                      python=job.python, cwd=job.cwd, passed=job.passed, base_env=job.base_env,
                      settings=job.ssh, run_dir_base=job.run_dir_base)


def run(job: HostsJob, events: HostsEvents, tools: HostsTools | None = None) -> JobResult:
    """Preflight every host in parallel, choose the master, run every node to its end (the first
    failure stops the others); over one ssh connection per host (:mod:`.reuse`)."""
    tools = tools or HostsTools.real()
    with shared_connections(job.hosts, job.local, job.ssh) as settings:
        return _run(dataclasses.replace(job, ssh=settings), events, tools)


def _run(job: HostsJob, events: HostsEvents, tools: HostsTools) -> JobResult:
    from ddpkit.launch.hang.job_stacks import job_stacks

    events.waiting(_("checking {count} hosts in parallel (ssh, python, ddpkit, torch, working "
                     "directory)", count=len(job.hosts)))
    probes = tools.probe(job.hosts, local=job.local, python=job.python, cwd=job.cwd,
                         settings=job.ssh, version=__version__)
    many = len(probes) > HOSTS_LISTED
    for probe in probes:
        if many and probe.ok:
            continue  # at scale, by exception: the hosts with a problem, then one line
        where = _("this machine") if probe.local else f"ssh {probe.host.ssh_target}"
        state = _("ok") if probe.ok else clauses(probe.problems)
        events.waiting(_("  node {node} {host} ({hostname}, {where}): {state}",
                         node=probe.node_rank, host=probe.host.label, hostname=probe.hostname,
                         where=where, state=state))
    if many:
        fit = sum(1 for probe in probes if probe.ok)
        events.waiting(_("  {fit} of {total} hosts ok", fit=fit, total=len(probes)))
    require_fit(probes)
    master = choose_master(probes, explicit=job.master_addr, route_here=tools.route_here,
                           route_on_master=lambda target: tools.route_on_node0(
                               job.hosts[0], target, job.python, job.ssh))
    events.waiting(_("master address {address} ({reason})", address=master.address,
                     reason=master.reason))
    outcomes = supervise(plan(job, master.address), events, output_dir=job.output_dir)
    lines, reports = job_stacks(o.document for o in outcomes)
    return JobResult(mode="hosts", master=_master_dict(master), outcomes=outcomes,
                     stack_lines=tuple(lines), stack_reports=tuple(reports))


def _master_dict(master: MasterChoice) -> dict[str, str]:
    return {"address": master.address, "reason": master.reason}


def route_here(target: str) -> tuple[str, str]:
    """This machine's (source address, interface) on its route to ``target``."""
    from ddpkit.net.route import route_to

    route = route_to(target)
    return route.source, route.ifname


def route_on_node0(host: Host, target: str, python: str, settings: SshSettings) -> tuple[str, str]:
    """Node 0's own route lookup (``ddpkit nics --to``), run there over ssh."""
    argv = ssh_argv(host, remote_command([python, "-m", "ddpkit", "nics", "--to", target, "--json"]),
                    settings)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=settings.connect_timeout + 30)
        route = json.loads(proc.stdout[proc.stdout.find("{"):])["route"]
        return str(route["source"]), str(route["ifname"])
    except (subprocess.TimeoutExpired, ValueError, KeyError, TypeError) as exc:
        raise NetworkProblem("remote-route-failed",
                             _("`ddpkit nics --to {target}` on {host} gave no route ({error})",
                               target=target, host=host.ssh_target, error=str(exc)),
                             _("pass --master-addr")) from None
