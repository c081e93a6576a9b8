"""Events in, findings out: ``ddpkit doctor --log``'s facts, then its table, then one ranking.

``Diagnosis.feed`` keeps bounded facts per event (:class:`~ddpkit.doctor.log.rules.reading.
Reading`) and hands each event's typed facts (:mod:`ddpkit.doctor.log.facts`) to the causes of
:mod:`ddpkit.doctor.log.causes.registry`; ``Diagnosis.findings`` decides once all logs are read
(that is what lets it correlate across files): the entries of the rule table
(:data:`ddpkit.doctor.log.rules.order.RULES`, in its order, each asked when its conditions
hold), then the causes, in the one ranking of :func:`ddpkit.doctor.log.causes.registry.rank`,
most likely root cause first.
"""

from __future__ import annotations

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.registry import Causes, rank
from ddpkit.doctor.log.rules.entry import evaluate
from ddpkit.doctor.log.rules.order import RULES
from ddpkit.doctor.log.rules.reading import Reading


class Diagnosis(Reading):
    """Feed it every event of every log, then ask for the findings."""

    def __init__(self) -> None:
        self.cause_table = Causes()
        super().__init__(self.cause_table)

    def findings(self) -> list[Finding]:
        found = [(finding, priority) for _rule, finding, priority in evaluate(RULES, self)]
        context = self.context()
        return rank(found, self.cause_table.findings(context), context.failed)
