"""Running the bench's stages (one torchrun job each) on this node, one after another."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ddpkit.bench.merge import JobOutcome
from ddpkit.bench.run import BenchJob
from ddpkit.cli.node.node_events import ConsoleEvents
from ddpkit.cli.output import render
from ddpkit.cli.output.console import Console
from ddpkit.errors import DeadlineExceeded, JobFailed, NetworkProblem
from ddpkit.i18n import _
from ddpkit.launch.node.plan import NodePlan

_RANK_PREFIX = re.compile(r"^\[[^\]]*\]:")
_SUMMARY = re.compile(r"^# [A-Za-z0-9]")


class BenchEvents(ConsoleEvents):
    """Launch events for a bench: the first job's plan in full, then only the workers' summaries."""

    def __init__(self, console: Console, *, show_output: bool) -> None:
        super().__init__(console, output_to_stderr=True, quiet_output=not show_output)
        self.show_output = show_output
        self.announced = False

    def planned(self, plan: NodePlan) -> None:
        if not self.announced:
            super().planned(plan)
            self.announced = True

    def output(self, line: str) -> None:
        text = _RANK_PREFIX.sub("", line)
        if self.show_output:  # the workers' own lines, as they wrote them
            render.log(self.console, f"  {text}")
        elif _SUMMARY.match(text):  # their summaries, fitted to the console
            render.wrapped(self.console, text, first="  ", indent="  #   ", to_err=True)


CONTINUE_AFTER = (JobFailed, DeadlineExceeded, NetworkProblem)


def run_jobs(console: Console, jobs: tuple[BenchJob, ...], plans: list[NodePlan],
             results_dir: Path, events: BenchEvents,
             should_stop: Callable[[], str | None] | None = None) -> list[JobOutcome]:
    """Each stage in turn; a failed stage is recorded and the next one runs. ``should_stop`` (a
    job supervisor's) reaches every stage's torchrun."""
    from ddpkit.cli.torch_import import quiet_store_connector
    from ddpkit.launch.node import session

    outcomes = []
    for index, (job, plan) in enumerate(zip(jobs, plans)):
        if should_stop is not None and should_stop():
            break  # stopped (a supervisor, or a master that quit): start no further job
        render.log(console, _("ddpkit bench: [{index}/{total}] {title} (port {port}, at most"
                              " {limit:g} s)", index=index + 1, total=len(jobs), title=job.title,
                              port=plan.config.master_port, limit=plan.config.job_timeout))
        events.planned(plan)
        start = time.monotonic()
        try:
            session.execute(plan, events, should_stop=should_stop,
                            store_connector=quiet_store_connector(console.verbosity))
            outcome = JobOutcome(job, True, time.monotonic() - start, run_dir=plan.run_dir)
        except CONTINUE_AFTER as exc:
            stage = read_stage(results_dir / f"{job.output}.stage")
            raised = exc.details.get("exception") or {}
            outcome = JobOutcome(job, False, time.monotonic() - start, exc.error_id, exc.message,
                                 stage, plan.run_dir, hint=exc.hint or None,
                                 cause=raised.get("text") if isinstance(raised, dict) else None)
        state = _("ok") if outcome.ok else _("FAILED [{id}]", id=outcome.error_id)
        if outcome.stage and not outcome.ok:
            render.log(console, _("ddpkit bench:   {state} in {seconds:.1f} s ({stage})",
                                  state=state, seconds=outcome.duration_s, stage=outcome.stage))
        else:
            render.log(console, _("ddpkit bench:   {state} in {seconds:.1f} s", state=state,
                                  seconds=outcome.duration_s))
        outcomes.append(outcome)
    return outcomes


def read_stage(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def load_doc(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
