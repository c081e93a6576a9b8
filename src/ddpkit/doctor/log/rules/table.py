"""Events in, findings out: ``ddpkit doctor --log``'s facts, then its table, then one ranking.

``Diagnosis.feed`` keeps bounded facts per event (:class:`~ddpkit.doctor.log.rules.reading.
Reading`) and hands each event's typed facts (:mod:`ddpkit.doctor.log.facts`) to the causes of
:mod:`ddpkit.doctor.log.causes.registry`; ``Diagnosis.findings`` decides once all logs are read
(that is what lets it correlate across files): :func:`ddpkit.doctor.log.causes.registry.judge`
asks the entries of the rule table (:data:`ddpkit.doctor.log.rules.order.RULES`, in its order,
each when its conditions hold), then the causes, and ranks them in the one ranking, most likely
root cause first.
"""

from __future__ import annotations

from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.causes.registry import Causes, judge
from ddpkit.doctor.log.rules.reading import Reading


class Diagnosis(Reading):
    """Feed it every event of every log, then ask for the findings."""

    def __init__(self) -> None:
        self.cause_table = Causes()
        super().__init__(self.cause_table)

    def findings(self) -> list[Finding]:
        return judge(self, self.cause_table)
