"""`ddpkit sim up|status|exec|down`: a rehearsal cluster of network-namespace nodes (root only).

Imports no torch: it only drives ``ip``, ``tc`` and friends through ``ddpkit.sim``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
from types import FrameType
from typing import Any

from ddpkit.cli.options import add_flag, add_json_flag
from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.errors import ConfigError, ExitCode, UsageError
from ddpkit.i18n import _, _n
from ddpkit.report import document
from ddpkit.sim import (
    DEFAULT_NAME,
    DEFAULT_SUBNET,
    SimCluster,
    SimSpec,
    SimStatus,
    bring_up,
    build_cluster,
    down,
    inspect,
    node_argv,
    parse_ifname_style,
    plan_up,
)
from ddpkit.sim import ssh as sim_ssh
from ddpkit.sim.host import find_tools, require_root
from ddpkit.sim.spec import PUBLIC_PREFIXLEN

HELP = _("a simulated multi-node cluster in network namespaces (root)")
SCHEMA_KIND, SCHEMA_VERSION = "sim", 1


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    up = actions.add_parser(
        "up", help=_("bring up N nodes (idempotent)"),
        description=_("Bring up N network-namespace nodes modelled on rented GPU containers: "
                      "eth0 172.17.0.4 on every node (reaching nothing), a private NIC on a shared"
                      " bridge, hostname nodeI resolving to eth0."),
    )
    up.add_argument("nodes", type=int, metavar="N", help=_("number of nodes"))
    _add_name(up)
    add_flag(up, "--subnet", default=DEFAULT_SUBNET, metavar="CIDR",
             help=_("private network; the host gets .1, node I gets .(2+I) (default {subnet})",
                    subnet=DEFAULT_SUBNET))
    add_flag(up, "--rate", metavar="RATE",
             help=_("shape every private NIC in both directions with tc tbf, e.g. 1gbit, 100mbit"))
    add_flag(up, "--delay", metavar="TIME",
             help=_("add latency per direction with tc netem, e.g. 5ms (needs sch_netem)"))
    add_flag(up, "--loss", metavar="PERCENT",
             help=_("drop packets per direction with tc netem, e.g. 0.1%% (needs sch_netem)"))
    add_flag(up, "--ifname-style", action="append", default=[], metavar="I=NAME[,I=NAME]",
             help=_("name node I's private NIC NAME instead of eth1, e.g. 1=ens5 (repeatable)"))
    add_flag(up, "--no-private-network", action="store_true",
             help=_("no private NIC: every node has only eth0 172.17.0.4, reaching no other node"))
    add_flag(up, "--ssh", action="store_true",
             help=_("also run an OpenSSH server in every node, with keys, known_hosts, an ssh "
                    "config and a hostfile for `--hostfile`/`--ssh-config` (see docs/sim.md)"))
    add_flag(up, "--dry-run", action="store_true",
             help=_("print every step up would run, run nothing (no root needed)"))
    add_json_flag(up)

    status = actions.add_parser("status", help=_("nodes, addresses, rate, live process counts"),
                                description=_("Show a sim cluster; exit 0 only when it is fully"
                                              " up."))
    _add_name(status)
    add_json_flag(status)

    exec_ = actions.add_parser(
        "exec", help=_("run a command inside node I"),
        description=_("Run CMD in node I (its network namespace and hostname), with this "
                      "terminal's stdin/stdout/stderr and environment; exits with CMD's exit "
                      "status."),
    )
    _add_name(exec_)
    exec_.add_argument("index", type=int, metavar="I", help=_("node index"))
    exec_.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ...")

    down_ = actions.add_parser("down", help=_("remove every namespace, link, file and process"),
                               description=_("Remove the cluster, killing every process still"
                                             " in it."))
    _add_name(down_)
    add_json_flag(down_)


def _add_name(parser: argparse.ArgumentParser) -> None:
    add_flag(parser, "--name", default=DEFAULT_NAME, metavar="NAME",
             help=_("cluster name, 1-6 lowercase letters/digits (default {name})",
                    name=DEFAULT_NAME))


def run(args: argparse.Namespace, console: Console) -> int:
    action: str = args.action
    if action == "up":
        return _up(args, console)
    if action == "status":
        return _status(args, console)
    if action == "exec":
        return _exec(args)
    return _down(args, console)


def _up(args: argparse.Namespace, console: Console) -> int:
    spec = SimSpec(
        nodes=args.nodes, name=args.name, subnet=args.subnet, rate=args.rate,
        ifnames=parse_ifname_style(args.ifname_style), delay=args.delay, loss=args.loss,
        private_network=not args.no_private_network,
    )
    if args.dry_run:
        steps = plan_up(spec)
        if args.ssh:
            steps += sim_ssh.plan(build_cluster(spec))
        if args.json:
            render.emit_json(console, _doc("up", spec.name, "planned", {
                "dry_run": True, "spec": spec.to_dict(), "plan": [s.to_dict() for s in steps]}))
        else:
            render.line(console, _n("# ddpkit sim up {nodes} --name {name}: {count} step (dry run,"
                                    " nothing was run)",
                                    "# ddpkit sim up {nodes} --name {name}: {count} steps (dry run,"
                                    " nothing was run)", len(steps), nodes=spec.nodes,
                                    name=spec.name))
            for step in steps:
                render.wrapped(console, f"# {step.summary}", indent="#   ")
                render.command(console, step.shell(), indent="")
        return ExitCode.OK
    result = bring_up(spec)
    servers = sim_ssh.start(result.cluster) if args.ssh else sim_ssh.read_state(spec.name)
    if args.json:
        render.emit_json(console, _doc("up", spec.name, "up", {
            "changed": result.created, "cluster": result.cluster.to_dict(),
            "steps_run": len(result.steps), "ssh": servers.to_dict() if servers else None}))
        return ExitCode.OK
    if result.created:
        render.line(console, _("sim cluster {name} is up: {summary}", name=spec.name,
                               summary=_summary(result.cluster)))
    else:
        render.line(console, _("sim cluster {name} is already up with this spec; nothing to do",
                               name=spec.name))
    _node_table(console, result.cluster, None)
    flag = "" if spec.name == DEFAULT_NAME else f" --name {spec.name}"
    render.line(console)
    if servers is not None:
        _ssh_lines(console, servers)
    render.line(console, _("run a command in a node:  ddpkit sim exec{flag} 0 -- hostname",
                           flag=flag))
    render.line(console, _("tear it down:             ddpkit sim down{flag}", flag=flag))
    return ExitCode.OK


def _status(args: argparse.Namespace, console: Console) -> int:
    found = inspect(args.name)
    code = ExitCode.OK if found.phase == "up" else ExitCode.FAILURE
    if args.json:
        servers = sim_ssh.read_state(found.name)
        render.emit_json(console, _doc("status", found.name, found.phase, {
            **found.to_dict(), "ssh": servers.to_dict() if servers else None}))
        return code
    flag = "" if found.name == DEFAULT_NAME else f" --name {found.name}"
    if found.phase == "absent":
        raise ConfigError("sim-not-up", _("no sim cluster named {name}", name=found.name),
                          _("start one: `ddpkit sim up 2{flag}`; `ddpkit sim status` with no "
                            "--name shows the default cluster", flag=flag))
    if found.cluster is None or found.phase != "up":
        what = {"building": _n("half-built ({count} step done)", "half-built ({count} steps done)",
                               found.steps_done),
                "damaged": _("damaged"), "leftovers": _("leftovers without a state file")}
        render.line(console, _("sim cluster {name}: {phase}", name=found.name,
                               phase=what.get(found.phase, found.phase)))
        if found.missing:
            render.line(console, _("  missing: {names}", names=", ".join(found.missing)))
        if found.present:
            render.line(console, _("  present: {names}", names=", ".join(found.present)))
        render.line(console, _("  fix: ddpkit sim down{flag}", flag=flag))
        return code
    render.line(console, _("sim cluster {name} is up: {summary}", name=found.name,
                           summary=_summary(found.cluster)))
    _node_table(console, found.cluster, found)
    servers = sim_ssh.read_state(found.name)
    if servers is not None:
        render.line(console)
        _ssh_lines(console, servers)
    return code


def _exec(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise UsageError("bad-usage", _("sim exec needs a command to run"),
                         _("give it after --, e.g. `ddpkit sim exec 0 -- hostname`"))
    require_root(action="ddpkit sim exec")
    found = inspect(args.name)
    flag = "" if args.name == DEFAULT_NAME else f" --name {args.name}"
    if found.cluster is None or found.phase != "up":
        raise ConfigError("sim-not-up", _("sim cluster {name} is not up ({phase})",
                                          name=args.name, phase=found.phase),
                          _("bring it up first: `ddpkit sim up 2{flag}`", flag=flag))
    if not 0 <= args.index < len(found.cluster.nodes):
        raise UsageError(
            "sim-no-such-node",
            _("sim cluster {name} has nodes 0..{last}, not {index}", name=args.name,
              last=len(found.cluster.nodes) - 1, index=args.index),
            _("give a node index from `ddpkit sim status`"),
        )
    argv = node_argv(found.cluster, args.index, command)
    argv[0] = find_tools({"ip", "nsenter"}).paths["ip"]
    returncode = _run_passing_signals(argv)
    if returncode < 0:
        return 128 + int(signal.Signals(-returncode))
    return returncode


# What `kill`, `timeout`, a closed terminal and Ctrl-C send. `ip netns exec` and `nsenter` exec the
# command in place, so the child is the command itself.
_PASSED_ON = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _run_passing_signals(argv: list[str]) -> int:
    """Run ``argv`` (in this terminal's process group) and hand it every stop signal this process
    gets, then wait for it: a ``sim exec`` that died on SIGTERM would leave its command running
    inside the node (a ``ddpkit launch`` holding the master port). Ctrl-C at a terminal whose
    foreground group is ours already reached the command, so it is not sent twice; and if this
    process is killed outright, the command gets SIGTERM from the kernel (``die_with_parent``)."""
    from ddpkit.launch.torchrun.processes import die_with_parent

    proc = subprocess.Popen(argv, env=dict(os.environ), preexec_fn=die_with_parent(os.getpid()))

    def pass_on(signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGINT and _terminal_sent_it():
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    previous = {sig: signal.signal(sig, pass_on) for sig in _PASSED_ON}
    try:
        return proc.wait()  # a handled signal does not interrupt the wait (PEP 475)
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _terminal_sent_it() -> bool:
    """Whether our process group is the foreground of the terminal on stdin (then a SIGINT came
    from its Ctrl-C and went to the whole group, the command included)."""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def _down(args: argparse.Namespace, console: Console) -> int:
    report = down(args.name)
    if args.json:
        render.emit_json(console, _doc("down", report.name, "absent",
                                       {"changed": report.found, "removed": report.to_dict()}))
        return ExitCode.OK
    if not report.found:
        render.line(console, _("no sim cluster named {name}: nothing to remove",
                               name=report.name))
        return ExitCode.OK
    killed = report.processes_killed
    values = {"name": report.name, "namespaces": len(report.namespaces),
              "links": len(report.links), "paths": len(report.paths)}
    if killed:
        render.line(console, _n(
            "removed sim cluster {name}: {namespaces} namespaces, {links} host links, {paths} "
            "files/dirs, {count} process killed (pids {pids})",
            "removed sim cluster {name}: {namespaces} namespaces, {links} host links, {paths} "
            "files/dirs, {count} processes killed (pids {pids})", len(killed),
            pids=", ".join(map(str, killed)), **values))
    else:
        render.line(console, _("removed sim cluster {name}: {namespaces} namespaces, {links} host"
                               " links, {paths} files/dirs, 0 processes killed", **values))
    return ExitCode.OK


def _ssh_lines(console: Console, servers: sim_ssh.SshState) -> None:
    files = servers.files
    render.line(console, _n("an sshd runs in {count} node (root, this cluster's key; host keys "
                            "checked)", "an sshd runs in each of the {count} nodes (root, this "
                            "cluster's key; host keys checked)", len(servers.pids)))
    render.line(console, _("the whole job over ssh, from this machine:"))
    render.command(console, f"ddpkit test --hostfile {files.hostfile} --ssh-config "
                            f"{files.client_config}", indent="  ")
    render.line(console, _("one node by hand:  ssh -F {config} {address} hostname",
                           config=files.client_config, address=_first_address(files.hostfile)))


def _first_address(hostfile: str) -> str:
    with open(hostfile, encoding="utf-8") as handle:
        return next((line.split()[0] for line in handle if line.strip() and
                     not line.startswith("#")), "")


def _summary(cluster: SimCluster) -> str:
    spec = cluster.spec
    shaping = [f"rate {spec.rate}"] if spec.rate else []
    shaping += [f"delay {spec.delay}"] if spec.delay else []
    shaping += [f"loss {spec.loss}"] if spec.loss else []
    shaped = (_(", private NICs shaped: {shaping} each way", shaping=" ".join(shaping))
              if shaping else _(", unshaped"))
    if not spec.private_network:
        return _n("{count} node with no private network: only eth0, the same address on each",
                  "{count} nodes with no private network: only eth0, the same address on each",
                  spec.nodes)
    return _n("{count} node on {subnet} (host {host} on {bridge}){shaped}",
              "{count} nodes on {subnet} (host {host} on {bridge}){shaped}", spec.nodes,
              subnet=spec.subnet, host=cluster.host_address, bridge=cluster.bridge, shaped=shaped)


def _node_table(console: Console, cluster: SimCluster, found: SimStatus | None) -> None:
    headers = [_("NODE"), _("NAMESPACE"), _("HOSTNAME"), _("PRIVATE NIC"), _("PUBLIC NIC (trap)")]
    headers += [_("PROCESSES")] if found is not None else []
    rows = []
    for node in cluster.nodes:
        row: list[Any] = [
            node.index, node.namespace, node.hostname,
            f"{node.private_ifname} {node.private_address}/{node.prefixlen}" if node.private
            else "-",
            f"{node.public_ifname} {node.public_address}/{PUBLIC_PREFIXLEN}",
        ]
        if found is not None:
            row.append(found.processes.get(node.index, 0))
        rows.append(row)
    render.table(console, headers, rows)


def _doc(action: str, name: str, state: str, payload: dict[str, Any]) -> dict[str, Any]:
    payload = {k: v for k, v in payload.items() if k not in ("name", "state")}
    return document(SCHEMA_KIND, SCHEMA_VERSION,
                    {"action": action, "name": name, "state": state, **payload})
