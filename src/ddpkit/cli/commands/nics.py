"""`ddpkit nics`: every interface, the traps, and the one to use for inter-node traffic.

Start-up is a target (<= 8x `python -c pass`): this module imports no torch and no rich.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from ddpkit.cli.options import add_flag, add_json_flag
from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.errors import DdpkitError, UsageError
from ddpkit.i18n import _
from ddpkit.net.interfaces import Nic, discover
from ddpkit.net.route import Route, route_to
from ddpkit.net.select import (
    Recommendation,
    env_lines,
    export_lines,
    recommend,
    traps,
)
from ddpkit.report import document

HELP = _("list network interfaces and pick the one for inter-node traffic")
SCHEMA_KIND, SCHEMA_VERSION = "nics", 1


def configure(parser: argparse.ArgumentParser) -> None:
    add_flag(
        parser,
        "--to",
        metavar="HOST[:PORT]",
        help=_("a peer (e.g. the master): recommend the interface this machine's routing table"
               " uses to reach it"),
    )
    add_flag(
        parser,
        "--export",
        action="store_true",
        help=_("print only shell `export` lines for the recommendation (for eval or copy-paste)"),
    )
    add_json_flag(parser)


def run(args: argparse.Namespace, console: Console) -> int:
    if args.export and args.json:
        raise UsageError("bad-usage", _("--export and --json cannot be combined"),
                         _("use one of them"))
    nics = discover()
    route = route_to(args.to, nics) if args.to else None
    try:
        choice: Recommendation | None = recommend(nics, route)
        problem: DdpkitError | None = None
    except DdpkitError as exc:
        if args.export:
            raise
        choice, problem = None, exc
    if args.export:
        assert choice is not None
        for text in export_lines(choice.env):
            render.line(console, text)
        _warn_traps(console, choice, route)
        return 0
    if args.json:
        render.emit_json(console, _document(nics, route, choice, problem))
    else:
        _print_human(console, nics, route, choice)
    if problem is not None:
        render.error(console, problem, as_json=False)
        return int(problem.exit_code)
    assert choice is not None
    _warn_traps(console, choice, route)
    return 0


def _document(
    nics: Sequence[Nic],
    route: Route | None,
    choice: Recommendation | None,
    problem: DdpkitError | None,
) -> dict[str, Any]:
    interfaces = []
    for nic in nics:
        entry = nic.to_dict()
        entry["traps"] = [t.to_dict() for t in traps(nic, nics)]
        interfaces.append(entry)
    env = choice.env if choice is not None else {}
    payload: dict[str, Any] = {
        "interfaces": interfaces,
        "route": route.to_dict() if route is not None else None,
        "recommendation": choice.to_dict() if choice is not None else None,
        "env": env,
        "env_lines": env_lines(env),
    }
    if problem is not None:
        payload["error"] = problem.to_dict()
    return document(SCHEMA_KIND, SCHEMA_VERSION, payload)


def _print_human(
    console: Console, nics: Sequence[Nic], route: Route | None, choice: Recommendation | None
) -> None:
    rows: list[list[str]] = []
    for nic in nics:
        notes = [t.id for t in traps(nic, nics)]
        if nic.rdma:
            notes.append("rdma")
        addresses = [a.with_prefix for a in nic.addresses] or ["-"]
        rows.append([
            nic.name,
            _state(nic),
            nic.kind.word(),
            addresses[0],
            str(nic.mtu) if nic.mtu is not None else "-",
            _speed(nic.speed_mbps),
            _notes(", ".join(notes), nic.master),
        ])  # fmt: skip
        rows.extend(["", "", "", extra, "", "", ""] for extra in addresses[1:])
    headers = [_("NAME"), _("STATE"), _("KIND"), _("ADDRESSES"), "MTU", _("SPEED"),
               _("TRAPS / NOTES")]
    render.table(console, headers, rows)
    render.line(console)
    if route is not None:
        render.line(console, _route_line(route))
    if choice is None:
        return
    render.line(console, _("recommended: {nic} ({address})", nic=choice.nic.name,
                           address=choice.address))
    render.wrapped(console, _("why: {reason}", reason=choice.reason), first="  ", indent="    ")
    render.line(console)
    render.line(console, _("set on every process of this node (`ddpkit nics --export` for a"
                           " shell):"))
    for text in env_lines(choice.env):
        render.line(console, text)


def _warn_traps(console: Console, choice: Recommendation, route: Route | None) -> None:
    for trap in choice.traps:
        if route is None:
            render.warn(console, _("{message} [{id}]", message=trap.message, id=trap.id))
        else:
            render.warn(console, _("the route to {host} uses {nic}, {message} [{id}]",
                                   host=route.host, nic=choice.nic.name, message=trap.message,
                                   id=trap.id))


def _notes(notes: str, master: str | None) -> str:
    if not master:
        return notes
    if not notes:
        return _("in {bond}", bond=master)
    return _("{notes}, in {bond}", notes=notes, bond=master)


def _route_line(route: Route) -> str:
    values = {"host": route.host, "nic": route.ifname, "source": route.source,
              "method": route.method, "gateway": route.gateway}
    if route.gateway and route.local:
        return _("route to {host}: {nic}, source {source} via {gateway} ({method}, own address)",
                 **values)
    if route.gateway:
        return _("route to {host}: {nic}, source {source} via {gateway} ({method})", **values)
    if route.local:
        return _("route to {host}: {nic}, source {source} ({method}, own address)", **values)
    return _("route to {host}: {nic}, source {source} ({method})", **values)


def _state(nic: Nic) -> str:
    """up; down (administratively); no-carrier; or the kernel's operstate (lowerlayerdown...)."""
    if nic.up:
        return "up"
    if "UP" not in nic.flags:
        return "down"
    return "no-carrier" if nic.operstate in (None, "down") else str(nic.operstate)


def _speed(mbps: int | None) -> str:
    if mbps is None:
        return "-"
    if mbps >= 1000 and mbps % 1000 == 0:
        return f"{mbps // 1000} Gb/s"
    return f"{mbps} Mb/s"
