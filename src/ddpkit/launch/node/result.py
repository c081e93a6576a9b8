"""What one node's run came to: torchrun's outcome, the rank that failed first and why, the
hangs and restarts seen. Data with its own rendering (summary, to_dict); read only by
:mod:`ddpkit.launch.node.session`."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ddpkit.doctor.log.rank_ends import (
    RankEnd,
    ends_of,
    newest_rank_logs,
    read_lines,
    root_end,
    unreported_ends,
)
from ddpkit.i18n import _, _n
from ddpkit.launch.hang.watcher import StackReport
from ddpkit.launch.node.plan import NodePlan
from ddpkit.launch.outcomes import describe_exit
from ddpkit.launch.torchrun.command import RankFailure
from ddpkit.launch.torchrun.processes import ProcessOutcome
from ddpkit.launch.torchrun.tracebacks import (
    PythonException,
    common_exception,
    exit_abort_fix,
    known_fix,
)

if TYPE_CHECKING:  # the doctor's engine (regexes by the hundred) is imported on a failure only:
    # a successful launch does not pay for it (benchmarks/launch_overhead.py)
    from ddpkit.doctor.log.verdict import NodeLogs, Verdict


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
        """Per local rank: the log files torchrun wrote for it in its last start on this node."""
        return newest_rank_logs(self.plan.log_dir)

    def ends(self) -> list[RankEnd]:
        """Every failed rank's end, as ``doctor --log`` reads it (doctor/log/rank_ends.py)."""
        return list(self._ends)

    @cached_property
    def _ends(self) -> tuple[RankEnd, ...]:
        failures = self.failures or ((self.root_cause,) if self.root_cause else ())
        if failures:
            return tuple(ends_of(failures, self.plan.log_dir))
        if self.outcome.stopped:  # torchrun stopped before it reported: the ranks' own logs
            return tuple(unreported_ends(self.plan.log_dir, self.plan.hostname))
        return ()

    def root_end(self) -> RankEnd | None:
        """The failed rank that is the cause: one that failed on its own account before those
        that lost a peer, whichever exited first; then torchrun's first observed failure."""
        return root_end(self._ends, self.root_cause)

    def first(self) -> RankFailure | None:
        """The failed rank the summary names (:meth:`root_end`'s, else torchrun's first)."""
        end = self.root_end()
        candidates = [*([self.root_cause] if self.root_cause else []), *self.failures]
        if end is not None:
            return next((f for f in candidates if (f.rank, f.host) == (end.rank, end.host)),
                        RankFailure(end.host, end.rank, end.local_rank, end.exitcode, None,
                                    end.signal, ""))
        return candidates[0] if candidates else None

    def summary(self) -> str:
        """One paragraph: what failed, where, how, what the failing rank raised and its last
        words: the rank the engine of ``doctor --log`` names as the cause (doctor/log/rank_ends)."""
        plan = self.plan
        node, host = plan.config.node_rank, plan.hostname
        if self.outcome.timed_out:
            return _("node {node} ({host}): the job did not finish within {seconds:g} s and was "
                     "stopped", node=node, host=host, seconds=plan.config.job_timeout)
        failure = self.first()
        if failure is None:
            return _("node {node} ({host}): torchrun exited with {how}", node=node, host=host,
                     how=describe_exit(self.outcome.returncode))
        text: str = _("node {node} ({host}): rank {rank} (local rank {local}, host {rank_host}) "
                      "failed first: {how}", node=node, host=host, rank=failure.rank,
                      local=failure.local_rank, rank_host=failure.host,
                      how=describe_exit(failure.exitcode, failure.signal))
        ends = self.ends()
        end = self.root_end()
        others = [f for f in self.failures if f.rank != failure.rank]
        if others:
            text = _n("{summary}; {count} more rank on this node stopped after it",
                      "{summary}; {count} more ranks on this node stopped after it", len(others),
                      summary=text)
        raised = end.raised if end is not None else None
        if raised is not None and len(ends) > 1 and \
                common_exception([e.raised for e in ends]) == raised:
            return _("{summary}. Every failed rank raised {raised}", summary=text,
                     raised=str(raised))
        if end is not None and not end.is_cause:
            text = _("{summary} ({consequence}: it followed a failure elsewhere; look for the "
                     "cause in the other nodes' output)", summary=text,
                     consequence=end.consequence)
        from ddpkit.doctor.log.verdict import RANK_FINDINGS

        top = self.verdict().top  # what doctor --log on this run directory tops
        if top is not None and top.severity == "error" and top.id not in RANK_FINDINGS:
            text = _("{summary}; most likely cause: {title} [{id}]", summary=text,
                     title=top.title, id=top.id)
        words = end.sentence() if end is not None else ""
        return _("{summary}. {words}", summary=text, words=words) if words else text

    def exception(self) -> PythonException | None:
        """The Python exception the first failed rank died of, from its stderr log."""
        end = self.root_end()
        return None if end is None else end.raised

    def known_fix(self) -> str | None:
        """The fix for a first failure whose cause its own end names: an exception whose message
        does (a missing module) or a known crash at interpreter exit; None for any other."""
        raised = self.exception()
        if raised is not None:
            return known_fix(raised)
        end = self.root_end()
        if end is None:
            return None
        return exit_abort_fix(read_lines(end.stderr or None), end.exitcode)

    def verdict(self) -> Verdict:
        """This node's run directory judged as ``doctor --log RUN_DIR`` judges it."""
        return self._verdict

    @cached_property
    def _verdict(self) -> Verdict:
        from ddpkit.doctor.log.verdict import verdict

        return verdict([self.logs])

    @cached_property
    def logs(self) -> NodeLogs:
        """This node's run directory as ``doctor --log`` reads it (doctor/log/verdict.py): what
        the master judges the job from, with the other nodes' readings."""
        from ddpkit.doctor.log.verdict import read_node

        return read_node(self.plan.run_dir, self.plan.config.node_rank)

    def to_dict(self) -> dict[str, Any]:
        failed = not self.ok and not self.outcome.timed_out
        return {
            "ok": self.ok,
            "returncode": self.outcome.returncode,
            "duration_s": round(self.outcome.duration_s, 3),
            "timed_out": self.outcome.timed_out,
            "interrupted": self.outcome.interrupted,
            "stopped": self.outcome.stopped,
            "root_cause": _failure_dict(self.first()),
            "torchrun_root_cause": _failure_dict(self.root_cause),
            "exception": (raised.to_dict() if (raised := self.exception()) is not None else None),
            "root_end": end.to_dict() if (end := self.root_end()) is not None else None,
            "known_fix": self.known_fix() if failed else None,
            "failures": [_failure_dict(f) for f in self.failures],
            "run_dir": self.plan.run_dir,
            "plan": self.plan.to_dict(),
            "stack_reports": [r.to_dict() for r in self.stack_reports],
            "restarts": self.restarts,
            **({"diagnosis": self.verdict().to_dict(), "logs": self.logs.to_dict()}
               if failed else {}),
        }


def _failure_dict(failure: RankFailure | None) -> dict[str, Any] | None:
    if failure is None:
        return None
    return {"host": failure.host, "rank": failure.rank, "local_rank": failure.local_rank,
            "exitcode": failure.exitcode, "signal": failure.signal,
            "how": describe_exit(failure.exitcode, failure.signal)}

