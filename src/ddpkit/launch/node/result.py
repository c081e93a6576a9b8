"""What one node's run came to: torchrun's outcome, the rank that failed first and why, the
hangs and restarts seen. Data with its own rendering (summary, to_dict); read only by
:mod:`ddpkit.launch.node.session`."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddpkit.launch.hang.watcher import StackReport
from ddpkit.launch.node.plan import NodePlan
from ddpkit.launch.outcomes import describe_exit
from ddpkit.launch.torchrun.command import RankFailure
from ddpkit.launch.torchrun.processes import ProcessOutcome
from ddpkit.launch.torchrun.tracebacks import (
    PythonException,
    common_exception,
    exit_abort_fix,
    last_exception,
    without_warnings,
)


@dataclass(frozen=True)
class NodeResult:
    plan: NodePlan
    outcome: ProcessOutcome
    root_cause: RankFailure | None
    failures: tuple[RankFailure, ...]
    stack_reports: tuple[StackReport, ...] = ()  # hangs seen, stacks asked for (SIGUSR1)
    restarts: int = 0  # of the job's worker group, seen on this node (launch/restarts.py)

    @property
    def ok(self) -> bool:
        return self.outcome.returncode == 0 and not self.outcome.timed_out

    def rank_logs(self) -> dict[int, list[str]]:
        """Per local rank: the log files torchrun wrote for it in its last start on this node
        (each start, a job-wide restart included, makes its own directory under the log dir)."""
        found: dict[int, list[str]] = {}
        runs = [d for d in glob.glob(os.path.join(glob.escape(self.plan.log_dir), "*"))
                if os.path.isdir(d)]
        if not runs:
            return found
        newest = max(runs, key=_created)  # torchrun's own directory of this node's last start
        pattern = os.path.join(glob.escape(newest), "attempt_*", "*", "*.log")
        for path in sorted(glob.glob(pattern)):
            local_rank = Path(path).parent.name
            if local_rank.isdigit():
                found.setdefault(int(local_rank), []).append(path)
        return found

    def summary(self) -> str:
        """One paragraph: what failed, where, how, and the last words of the failing rank."""
        plan = self.plan
        where = f"node {plan.config.node_rank} ({plan.hostname})"
        if self.outcome.timed_out:
            return (f"{where}: the job did not finish within {plan.config.job_timeout:g} s and was "
                    "stopped")
        failure = self.root_cause or (self.failures[0] if self.failures else None)
        if failure is None:
            return f"{where}: torchrun exited with {describe_exit(self.outcome.returncode)}"
        text = (f"{where}: rank {failure.rank} (local rank {failure.local_rank}, host "
                f"{failure.host}) failed first: {describe_exit(failure.exitcode, failure.signal)}")
        others = [f for f in self.failures if f.rank != failure.rank]
        if others:
            text += f"; {len(others)} more rank(s) on this node stopped after it"
        raised = self.exception()
        if raised is not None:
            every = len(self.failures) > 1 and self._raised_by_every_failed_rank(raised)
            text += f". {'Every failed rank' if every else 'It'} raised {raised}"
            return text
        last = self._last_error_lines(failure.local_rank)
        if last:
            text += ". Its last output: " + " | ".join(last)
        return text

    def exception(self) -> PythonException | None:
        """The Python exception the first failed rank died of, from its stderr log."""
        failure = self.root_cause or (self.failures[0] if self.failures else None)
        return None if failure is None else last_exception(self._stderr_lines(failure.local_rank))

    def exit_fix(self) -> str | None:
        """The fix for a first failure that is a known crash at interpreter exit, if it is one."""
        failure = self.root_cause or (self.failures[0] if self.failures else None)
        if failure is None:
            return None
        return exit_abort_fix(self._stderr_lines(failure.local_rank), failure.exitcode)

    def _raised_by_every_failed_rank(self, raised: PythonException) -> bool:
        per_rank = [last_exception(self._stderr_lines(f.local_rank)) for f in self.failures]
        return common_exception(per_rank) == raised

    def _stderr_lines(self, local_rank: int) -> list[str]:
        for path in self.rank_logs().get(local_rank, []):
            if path.endswith("stderr.log"):
                try:
                    return Path(path).read_text(errors="replace").splitlines()
                except OSError:
                    return []
        return []

    def _last_error_lines(self, local_rank: int, count: int = 3) -> list[str]:
        meaningful = [line.strip() for line in without_warnings(self._stderr_lines(local_rank))
                      if line.strip()]
        return meaningful[-count:]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "returncode": self.outcome.returncode,
            "duration_s": round(self.outcome.duration_s, 3),
            "timed_out": self.outcome.timed_out,
            "interrupted": self.outcome.interrupted,
            "stopped": self.outcome.stopped,
            "root_cause": _failure_dict(self.root_cause),
            "exception": (raised.to_dict() if (raised := self.exception()) is not None else None),
            "failures": [_failure_dict(f) for f in self.failures],
            "run_dir": self.plan.run_dir,
            "plan": self.plan.to_dict(),
            "stack_reports": [r.to_dict() for r in self.stack_reports],
            "restarts": self.restarts,
        }


def _failure_dict(failure: RankFailure | None) -> dict[str, Any] | None:
    if failure is None:
        return None
    return {"host": failure.host, "rank": failure.rank, "local_rank": failure.local_rank,
            "exitcode": failure.exitcode, "signal": failure.signal,
            "how": describe_exit(failure.exitcode, failure.signal)}


def _created(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
