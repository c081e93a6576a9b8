"""`ddpkit bench`'s tables, notes and verdict on the console, from a ``ddpkit.bench/1`` payload
(the words and tables come from :mod:`ddpkit.bench.report`)."""

from __future__ import annotations

from typing import Any

from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.i18n import _


def show_bench(console: Console, payload: dict[str, Any]) -> None:
    from ddpkit.bench import report
    from ddpkit.bench.strategy_report import strategy_tables

    tables = [report.tcp_table(payload), *report.collective_tables(payload),
              report.scaling_table(payload), *strategy_tables(payload),
              report.socket_table(payload)]
    for table in tables:
        if table is None:
            continue
        render.table(console, table.headers, table.rows, title=table.title)
        for text in table.footer:
            render.wrapped(console, text, first="  ", indent="    ")
        render.line(console)
    for note in payload.get("notes", []):
        render.wrapped(console, _("note: {note}", note=note), name="dim")
    for text in [*report.failed_stages(payload), *report.headline(payload)]:
        lead = text[:len(text) - len(text.lstrip())]
        render.wrapped(console, text, first=lead, indent=lead + "  ")
