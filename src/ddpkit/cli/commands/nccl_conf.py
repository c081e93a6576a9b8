"""`ddpkit nccl-conf`: what NCCL will use and why (show), and safe edits of nccl.conf (set/unset).

Start-up is a target: this module imports no torch and no rich. The machine's facts are read
through the small functions below (``nccl_home``, ``local_interfaces``, ``interface_traps``,
``route_recommendation``) and ``SYSTEM_CONF``, so tests can point them at temporary files.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddpkit.cli.options import add_flag
from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.errors import UsageError
from ddpkit.i18n import _
from ddpkit.ncclconf.checks import settings_warnings, source_warnings
from ddpkit.ncclconf.edit import (
    EditPlan,
    apply_plan,
    check_name,
    check_name_syntax,
    check_value,
    parse_assignment,
    plan_edit,
    target_warnings,
)
from ddpkit.ncclconf.effective import (
    DEFAULT,
    USER_CONF_NAME,
    EffectiveConfig,
    Setting,
    load_effective,
)
from ddpkit.ncclconf.home import nccl_home
from ddpkit.ncclconf.problems import NcclConfWarning
from ddpkit.report import document

if TYPE_CHECKING:
    from ddpkit.net.interfaces import Nic
    from ddpkit.net.select import Recommendation, Trap

HELP = _("show or persist NCCL settings (nccl.conf) with provenance")
SCHEMA_KIND, SCHEMA_VERSION = "nccl-conf", 1

SYSTEM_CONF = Path("/etc/nccl.conf")


def local_interfaces() -> tuple[Nic, ...]:
    from ddpkit.net.interfaces import discover

    return discover()


def interface_traps(nic: Nic, nics: Sequence[Nic]) -> tuple[Trap, ...]:
    from ddpkit.net.select import traps

    return traps(nic, nics)


def route_recommendation(host: str, nics: Sequence[Nic]) -> Recommendation:
    from ddpkit.net.route import route_to
    from ddpkit.net.select import recommend

    return recommend(nics, route_to(host, nics))


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    show = actions.add_parser(
        "show", help=_("every NCCL variable a process started now gets, where from, and"
                       " warnings")
    )
    _json_flag(show)
    set_ = actions.add_parser("set",
                              help=_("set variables in nccl.conf (default /etc/nccl.conf)"))
    set_.add_argument("assignments", nargs="*", metavar="KEY=VALUE",
                      help=_("e.g. NCCL_SOCKET_IFNAME==eth1 NCCL_DEBUG=WARN"))
    add_flag(set_, "--auto", action="store_true",
             help=_("set NCCL_SOCKET_IFNAME to the interface the route to --to leaves through"))
    add_flag(set_, "--to", metavar="HOST[:PORT]", help=_("the master (or any peer), for --auto"))
    _target_flags(set_)
    add_flag(set_, "--force", action="store_true",
             help=_("write names ddpkit does not know and values it cannot check here"))
    unset = actions.add_parser("unset", help=_("remove variables from nccl.conf"))
    unset.add_argument("keys", nargs="+", metavar="KEY")
    _target_flags(unset)
    for sub in (show, set_, unset):
        sub.console = getattr(parser, "console", None)  # type: ignore[attr-defined]


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help=_("print one versioned JSON document on stdout (logs stay on"
                               " stderr)"))


def _target_flags(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group()
    add_flag(target, "--user", action="store_true",
             help=_("edit ~/{name} (read when NCCL_CONF_FILE is unset)", name=USER_CONF_NAME))
    add_flag(target, "--file", metavar="PATH", type=Path,
             help=_("edit this file (NCCL reads it only if NCCL_CONF_FILE names it)"))
    add_flag(parser, "--dry-run", action="store_true", help=_("show the diff, write nothing"))
    _json_flag(parser)


def run(args: argparse.Namespace, console: Console) -> int:
    action = args.action or "show"
    env = dict(os.environ)
    home = nccl_home()
    if action == "show":
        return _show(args, console, env, home)
    return _edit(args, console, env, home, action)


# ------------------------------------------------------------------------------------------ show


def collect_show(
    env: dict[str, str], home: Path, etc: Path, nics: Sequence[Nic]
) -> tuple[EffectiveConfig, tuple[NcclConfWarning, ...]]:
    effective = load_effective(env, home, etc)
    warnings = (
        source_warnings(env, home, effective.sources)
        + effective.problems
        + settings_warnings(effective.settings, nics, traps=interface_traps)
    )
    return effective, warnings


def _show(args: argparse.Namespace, console: Console, env: dict[str, str], home: Path) -> int:
    nics = local_interfaces()
    effective, warnings = collect_show(env, home, SYSTEM_CONF, nics)
    if args.json:
        render.emit_json(console, document(SCHEMA_KIND, SCHEMA_VERSION, {
            "action": "show",
            "home": str(home),
            "interfaces": sorted(nic.name for nic in nics),
            "files": [s.to_dict() for s in effective.sources],
            "settings": [s.to_dict() for s in effective.settings],
            "warnings": [w.to_dict() for w in warnings],
        }))
        return 0
    order: str = _("the environment")
    for source in effective.sources:
        order = _("{before}, then {source}", before=order,
                  source=_describe_source(source.path, source.exists, source.error))
    render.wrapped(console, _("NCCL reads: {order}", order=order))
    render.table(console, [_("NAME"), _("VALUE"), _("SOURCE"), _("NOTE")],
                 [_row(s) for s in effective.settings])
    _print_warnings(console, warnings)
    return 0


def _describe_source(path: str, exists: bool, error: str | None) -> str:
    if error is not None:
        return _("{path} (unreadable: {error})", path=path, error=error)
    return path if exists else _("{path} (missing)", path=path)


def _row(setting: Setting) -> list[str]:
    if setting.source == DEFAULT:
        value = setting.value or _("(unset)")
        return [setting.name, value, setting.origin, setting.note]
    hidden = ""
    for h in setting.shadowed:
        what = (_("hides {path}:{line} ({value})", path=h.path, line=h.line, value=h.value)
                if h.path else _("hides env ({value})", value=h.value))
        hidden = _("{before}, {more}", before=hidden, more=what) if hidden else what
    return [setting.name, setting.value, setting.origin, hidden]


def _print_warnings(console: Console, warnings: Sequence[NcclConfWarning]) -> None:
    for warning in warnings:
        render.warn(console, _("[{id}] {message}", id=warning.id, message=warning.message))
        if warning.hint:
            render.log(console, _("  fix: {hint}", hint=warning.hint))


# ------------------------------------------------------------------------------------- set/unset


def _target(args: argparse.Namespace, home: Path) -> Path:
    if args.file is not None:
        return Path(args.file)
    if args.user:
        return home / USER_CONF_NAME
    return SYSTEM_CONF


def _edit(
    args: argparse.Namespace, console: Console, env: dict[str, str], home: Path, action: str
) -> int:
    target = _target(args, home)
    extra: list[NcclConfWarning] = []
    gloo: dict[str, str] = {}
    if action == "set":
        updates, extra, gloo = _updates(args)
        plan = plan_edit(target, updates=updates)
    else:
        for key in args.keys:
            check_name_syntax(key)
        plan = plan_edit(target, removals=list(dict.fromkeys(args.keys)))
        for key in dict.fromkeys(args.keys):
            if key not in {c.key for c in plan.changes}:
                extra.append(NcclConfWarning("not-in-file", _("{key} is not set in {target}",
                                                              key=key, target=str(target)),
                                             _("nothing to remove"), str(target)))
    warnings = tuple(extra) + target_warnings(plan, env, home, SYSTEM_CONF)
    if args.dry_run and plan.changed and not _writable(target):
        warnings += (NcclConfWarning(
            "permission-denied", _("a real run could not write {target}", target=str(target)),
            _("use --user (~/.nccl.conf) or --file PATH, or run as root (sudo)"), str(target)),)
    written = None
    if plan.changed and not args.dry_run:
        written = apply_plan(plan)
    if args.json:
        payload: dict[str, Any] = {"action": action, **plan.to_dict(),
                                   "dry_run": bool(args.dry_run), "written": written is not None,
                                   "backup": str(written.backup) if written and written.backup
                                   else None,
                                   "warnings": [w.to_dict() for w in warnings]}
        if gloo:
            payload["environment"] = gloo
        render.emit_json(console, document(SCHEMA_KIND, SCHEMA_VERSION, payload))
        return 0
    _print_edit(console, plan, args.dry_run, written is not None,
                str(written.backup) if written and written.backup else None)
    for key, value in gloo.items():
        render.log(console, _("also export in the job's environment: {key}={value}", key=key,
                              value=value))
    _print_warnings(console, warnings)
    return 0


def _updates(
    args: argparse.Namespace,
) -> tuple[dict[str, str], list[NcclConfWarning], dict[str, str]]:
    updates: dict[str, str] = {}
    for text in args.assignments:
        key, value = parse_assignment(text)
        if key in updates:
            raise UsageError("duplicate-key", _("{key} is given twice", key=key),
                             _("give each name once"))
        updates[key] = value
    warnings: list[NcclConfWarning] = []
    gloo: dict[str, str] = {}
    if args.to and not args.auto:
        raise UsageError("bad-usage", _("--to only makes sense with --auto"),
                         _("use `nccl-conf set --auto --to MASTER`"))
    nics: Sequence[Nic] | None = None
    if args.auto:
        if not args.to:
            raise UsageError("missing-to", _("--auto needs --to MASTER (the peer to route to)"),
                             _("e.g. `ddpkit nccl-conf set --auto --to 10.0.0.3`"))
        if "NCCL_SOCKET_IFNAME" in updates:
            raise UsageError("bad-usage", _("--auto sets NCCL_SOCKET_IFNAME itself"),
                             _("drop NCCL_SOCKET_IFNAME=... or --auto"))
        nics = local_interfaces()
        choice = route_recommendation(args.to, nics)
        env_lines = choice.env
        updates["NCCL_SOCKET_IFNAME"] = env_lines["NCCL_SOCKET_IFNAME"]
        gloo = {k: v for k, v in env_lines.items() if k != "NCCL_SOCKET_IFNAME"}
        for trap in choice.traps:
            warnings.append(NcclConfWarning(
                "ifname-selects-trap", _("the route to {host} leaves through {nic}: {message}",
                                         host=args.to, nic=choice.nic.name,
                                         message=trap.message),
                _("check that peers can reach this address (`ddpkit nics`)")))
    if not updates:
        raise UsageError("nothing-to-set", _("give KEY=VALUE pairs or --auto --to MASTER"),
                         _("e.g. `ddpkit nccl-conf set NCCL_SOCKET_IFNAME==eth1`"))
    for key in updates:
        check_name(key, force=args.force)
    if "NCCL_SOCKET_IFNAME" in updates and not args.force:
        nics = nics if nics is not None else local_interfaces()
    names = [nic.name for nic in nics or ()]
    for key, value in updates.items():
        check_value(key, value, names, force=args.force)
    return updates, warnings, gloo


def _writable(target: Path) -> bool:
    real = Path(os.path.realpath(target))
    if real.exists():
        return os.access(real, os.W_OK) and os.access(real.parent, os.W_OK)
    return os.access(real.parent, os.W_OK)


def _print_edit(
    console: Console, plan: EditPlan, dry_run: bool, written: bool, backup: str | None
) -> None:
    if not plan.changed:
        render.log(console, _("no change: {path} already says that", path=str(plan.path)))
        return
    for text in plan.diff.rstrip("\n").split("\n"):
        render.line(console, text)
    if dry_run:
        render.log(console, _("dry run: {path} not written", path=str(plan.path)))
    elif written and backup:
        render.log(console, _("wrote {path} (previous version in {backup})", path=str(plan.path),
                              backup=backup))
    elif written:
        render.log(console, _("wrote {path}", path=str(plan.path)))
