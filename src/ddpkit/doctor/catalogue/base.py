"""One catalogue entry: a finding id, in plain words, with its fix."""

from __future__ import annotations

from dataclasses import dataclass

from ddpkit.doctor.findings import Severity


@dataclass(frozen=True)
class Entry:
    id: str
    severity: Severity
    title: str
    explanation: str  # what it means, in plain words (specifics are prepended by the rules)
    fix: str  # the generic fix; rules replace it with a concrete one when they know more
    recognised: str  # how the log reveals it (for the docs)
    priority: int  # higher = more likely the root cause when several findings hold
