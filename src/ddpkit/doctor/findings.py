"""What ``ddpkit doctor`` reports: findings with a stable id, a severity, evidence and a fix.

Findings are data, never exceptions. ``to_dict`` gives the shape of one entry of the
``ddpkit.doctor/1`` document's ``findings`` list.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

Severity = Literal["error", "warning", "info"]

SEVERITY_ORDER: dict[str, int] = {"error": 0, "warning": 1, "info": 2}

EVIDENCE_TEXT_LIMIT = 300  # characters of a log line kept as evidence


@dataclass(frozen=True, order=True)
class Evidence:
    """One log line that supports a finding: where it is and (a bounded copy of) what it says."""

    file: str
    line: int
    text: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Finding:
    """One diagnosis: ``id`` is a catalogue id (see :mod:`ddpkit.doctor.catalogue`)."""

    id: str
    severity: Severity
    title: str
    explanation: str
    fix: str
    evidence: tuple[Evidence, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity,
            "title": self.title,
            "explanation": self.explanation,
            "fix": self.fix,
            "evidence": [item.to_dict() for item in self.evidence],
        }


def has_errors(findings: tuple[Finding, ...] | list[Finding]) -> bool:
    """True when any finding is an error (the command then exits with ``ExitCode.FAILURE``)."""
    return any(finding.severity == "error" for finding in findings)


def clip(text: str, limit: int = EVIDENCE_TEXT_LIMIT) -> str:
    """``text`` shortened to ``limit`` characters, marking the cut with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
