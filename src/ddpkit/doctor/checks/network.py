"""Preflight rows about the network: the interface to use, the route to the master, and the NCCL
settings in effect with their provenance. Built on :mod:`ddpkit.net` and :mod:`ddpkit.ncclconf`.

``network_checks`` does the I/O (interface discovery, route lookup, reading nccl.conf files);
``interface_row``, ``route_row`` and ``nccl_settings_row`` are pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ddpkit.doctor.checks.model import CheckRow
from ddpkit.errors import DdpkitError
from ddpkit.i18n import _
from ddpkit.ncclconf.home import nccl_home
from ddpkit.wording import clauses

if TYPE_CHECKING:
    from ddpkit.ncclconf.effective import EffectiveConfig
    from ddpkit.ncclconf.problems import NcclConfWarning
    from ddpkit.net.interfaces import Nic
    from ddpkit.net.route import Route
    from ddpkit.net.select import Recommendation


def interface_row(choice: Recommendation | None, problem: DdpkitError | None) -> CheckRow:
    title = _("interface for inter-node traffic")
    if choice is None:
        message = problem.message if problem else _("no interface could be chosen")
        return CheckRow("interface", title, "fail", message, problem.hint if problem else "")
    name = choice.nic.name
    detail = _("{name} {address}: {reason}", name=name, address=choice.address,
               reason=choice.reason)
    export = f"export NCCL_SOCKET_IFNAME=={name} GLOO_SOCKET_IFNAME={name}"
    if any(trap.blocking for trap in choice.traps):
        return CheckRow("interface", title, "fail", detail,
                        _("give the private NIC an address and route, then see `ddpkit nics`"))
    if choice.traps:
        return CheckRow("interface", title, "warn",
                        clauses([detail, *(t.message for t in choice.traps)]), export)
    return CheckRow("interface", title, "pass", detail)


def route_row(master: str, route: Route | None, problem: DdpkitError | None) -> CheckRow:
    title = _("route to the master")
    if route is None:
        message = problem.message if problem else _("no route")
        return CheckRow("route", title, "fail", message,
                        problem.hint if problem else _("check --master-addr and `ip route`"))
    if route.local:
        return CheckRow("route", title, "pass",
                        _("{master} is this node ({ifname})", master=master, ifname=route.ifname))
    if route.gateway:
        return CheckRow("route", title, "pass",
                        _("{master} through {ifname} via {gateway} from {source}", master=master,
                          ifname=route.ifname, gateway=route.gateway, source=route.source))
    return CheckRow("route", title, "pass",
                    _("{master} through {ifname} from {source}", master=master,
                      ifname=route.ifname, source=route.source))


def nccl_settings_row(effective: EffectiveConfig, warnings: Sequence[NcclConfWarning],
                      recommended: str | None) -> CheckRow:
    title = _("NCCL settings (nccl-conf show)")
    ifname = effective.get("NCCL_SOCKET_IFNAME")
    fix_set = (f"ddpkit nccl-conf set NCCL_SOCKET_IFNAME=={recommended}" if recommended
               else "ddpkit nccl-conf set --auto --to <master-addr>")
    if ifname is None or ifname.source == "default":
        return CheckRow("nccl-settings", title, "warn",
                        _("NCCL_SOCKET_IFNAME is not set: NCCL picks an interface by itself, and "
                          "its bootstrap takes the first one (often a NAT/container eth0)"),
                        fix_set)
    detail = _("NCCL_SOCKET_IFNAME={value} (from {origin})", value=ifname.value,
               origin=ifname.origin)
    if warnings:
        shown = [_("{id}: {message}", id=w.id, message=w.message) for w in warnings[:3]]
        hints = clauses(list(dict.fromkeys(w.hint for w in warnings[:3] if w.hint)))
        return CheckRow("nccl-settings", title, "warn", clauses([detail, *shown]),
                        hints or fix_set)
    return CheckRow("nccl-settings", title, "pass", detail)


@dataclass(frozen=True)
class NetworkChecks:
    rows: tuple[CheckRow, ...]
    interface: str | None  # the interface to use for inter-node traffic, when one was found


def network_checks(
    env: Mapping[str, str],
    master_addr: str | None = None,
    *,
    nics: Sequence[Nic] | None = None,
    home: Path | None = None,
    lookup_route: Callable[[str, Sequence[Nic]], Route] | None = None,
) -> NetworkChecks:
    """Interface, route (when ``master_addr`` is given) and NCCL-settings rows for this node.

    ``nics`` (default: discovered now), ``home`` (NCCL's ``~``) and ``lookup_route`` (default
    :func:`ddpkit.net.route.route_to`) replace the real edges in tests.
    """
    from ddpkit.ncclconf.checks import settings_warnings, source_warnings
    from ddpkit.ncclconf.effective import load_effective
    from ddpkit.net.interfaces import discover
    from ddpkit.net.route import route_to
    from ddpkit.net.select import recommend

    found = tuple(nics) if nics is not None else discover()
    rows: list[CheckRow] = []
    route: Route | None = None
    route_problem: DdpkitError | None = None
    if master_addr:
        try:
            route = (lookup_route or route_to)(master_addr, found)
        except DdpkitError as exc:
            route_problem = exc
    choice: Recommendation | None = None
    problem: DdpkitError | None = None
    try:
        choice = recommend(found, route)
    except DdpkitError as exc:
        problem = exc
    rows.append(interface_row(choice, problem))
    if master_addr:
        rows.append(route_row(master_addr, route, route_problem))
    where = home or nccl_home()
    effective = load_effective(dict(env), where)
    warnings = (source_warnings(dict(env), where, effective.sources) + effective.problems
                + settings_warnings(effective.settings, found))
    name = choice.nic.name if choice else None
    rows.append(nccl_settings_row(effective, warnings, name))
    return NetworkChecks(tuple(rows), name)
