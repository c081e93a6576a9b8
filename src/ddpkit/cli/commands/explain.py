"""`ddpkit explain ID`: an error's or a doctor finding's entry, offline, in the user's language
(like ``rustc --explain``): the entry of docs/errors.md / docs/errors.zh-CN.md that ships with the
package, and for a finding the catalogue's explanation (docs/findings.md). No torch import."""

from __future__ import annotations

import argparse
import difflib

from ddpkit.cli.options import add_json_flag
from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.errors import ExitCode, UsageError
from ddpkit.explanations import Explanation, explanations, known_ids
from ddpkit.i18n import _, current_language, localized
from ddpkit.plain_text import shown
from ddpkit.report import document
from ddpkit.wording import commas

HELP = _("explain an error id or a doctor finding id, offline")
EXAMPLES = _("examples:\n  ddpkit explain wrong-interface\n  ddpkit explain no-private-network "
             "--json")
SCHEMA_KIND, SCHEMA_VERSION = "explain", 1
_SEVERITY = {"error": _("error"), "warning": _("warning"), "info": _("info")}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", metavar="ID",
                        help=_("the id in an error's brackets (error [ID]) or a finding's id"))
    add_json_flag(parser)


def run(args: argparse.Namespace, console: Console) -> int:
    entry_id = shown(args.id, 80).strip()
    found = explanations(entry_id)
    if not found:
        nearest = difflib.get_close_matches(entry_id, known_ids(), n=3, cutoff=0.5)
        raise UsageError(
            "unknown-id", _("no error or doctor finding has the id {id!r}", id=entry_id),
            _("did you mean {ids}?", ids=commas(nearest)) if nearest else
            _("the id is the word in an error's brackets, e.g. `ddpkit explain bad-usage`"),
            details={"nearest": nearest})
    link = render.error_link(entry_id)
    if args.json:
        render.emit_json(console, document(SCHEMA_KIND, SCHEMA_VERSION, {
            "id": entry_id, "entries": [e.to_dict() for e in found], "link": link}))
        return ExitCode.OK
    for index, entry in enumerate(found):
        if index:
            render.line(console)
        _show(console, entry)
    render.line(console)
    render.wrapped(console, _("online: {link}", link=link), indent="  ")
    return ExitCode.OK


def _show(console: Console, entry: Explanation) -> None:
    lang = current_language()
    if entry.kind == "error":
        render.line(console, _("error [{id}] (exit code {code})", id=entry.id,
                               code=entry.exit_code))
    else:
        severity = _SEVERITY.get(entry.severity or "error", entry.severity or "")
        render.line(console, _("doctor finding {id} ({severity})", id=entry.id,
                               severity=severity))
    render.wrapped(console, _("cause: {text}", text=entry.cause[lang]), first="  ",
                   indent="    ")
    render.wrapped(console, _("fix: {hint}", hint=entry.fix[lang]), first="  ", indent="    ")
    if entry.kind == "finding":
        _show_catalogue(console, entry.id)


def _show_catalogue(console: Console, finding_id: str) -> None:
    """The catalogue's title, explanation and fix of a finding (docs/findings.md), translated."""
    from ddpkit.doctor.catalogue import CATALOGUE

    item = CATALOGUE.get(finding_id)
    if item is None:
        return
    render.line(console)
    render.wrapped(console, item.title, first="  ", indent="  ")
    render.wrapped(console, item.explanation, first="  ", indent="  ")
    render.line(console, _("  what to do:"))
    for fix_line in localized(item.fix).splitlines():  # its commands are lines of their own
        if fix_line.strip():
            render.wrapped(console, fix_line.strip(), first="    ", indent="      ")
