"""The process of mp.spawn that raised first, named by its parent.

torch.multiprocessing.spawn's parent waits on its children; when one raises, it stops the others
and raises ProcessRaisedException itself, whose message starts with a line break (so Python
prints the type alone on its line), then "-- Process <index> terminated with the following
error:" and the child's own traceback (torch/multiprocessing/spawn.py, ProcessContext.join; the
facts' ``SPAWNED_FAILED``). The child's exception, the first one after that line, is the failure;
the parent's ProcessRaisedException only reports it. Its index is the first argument mp.spawn
gave the function, which most scripts make the rank.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import GENERIC
from ddpkit.doctor.findings import Evidence, Finding
from ddpkit.doctor.log.causes.base import Cause, Context, made, others_first
from ddpkit.doctor.log.facts.kinds import Fact, FactKind
from ddpkit.doctor.log.kinds import EventKind
from ddpkit.doctor.log.prefixes import raised
from ddpkit.doctor.log.scan import Event
from ddpkit.i18n import _


class SpawnedFailure(Cause):
    kinds = frozenset({EventKind.JOB_FACT.value, EventKind.EXCEPTION.value})
    specificity = 10
    supersedes = GENERIC
    yields_to = others_first("rank-failed")

    def __init__(self) -> None:
        self.marker: Event | None = None  # the parent's line naming the process
        self.index = ""
        self.failure: tuple[str, Event] | None = None  # the child's own exception

    def feed(self, event: Event, facts: tuple[Fact, ...]) -> None:
        if self.failure is not None:
            return
        if event.kind == EventKind.JOB_FACT:
            index = next((f.value for f in facts if f.kind is FactKind.SPAWNED_FAILED), None)
            if index is not None and self.marker is None:
                self.marker, self.index = event, index
        elif self.marker is not None and raised(event.text, results=True):
            self.failure = (event.exception_text(), event)

    def finding(self, context: Context) -> Finding | None:
        if self.marker is None or self.failure is None:
            return None
        text, event = self.failure
        words = _("Process {index} of mp.spawn (the index it gave the function, most often the "
                  "rank) failed first: {error} mp.spawn then stopped the other processes and "
                  "raised ProcessRaisedException in the parent, which only reports it.",
                  index=self.index, error=text.rstrip(".") + ".")
        fix = _("Fix what process {index} reports: its traceback, under the parent's '-- Process "
                "{index} terminated with the following error:', shows where it raised.",
                index=self.index)
        return made("rank-failed", "error", words, fix,
                    tuple(Evidence(e.file, e.line, e.text) for e in (event, self.marker)))
