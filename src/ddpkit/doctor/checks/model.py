"""One row of ``ddpkit doctor``'s preflight table."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

Status = Literal["pass", "warn", "fail"]
_RANK = {"pass": 0, "warn": 1, "fail": 2}


@dataclass(frozen=True)
class CheckRow:
    """A check's verdict: ``id`` is stable kebab-case; ``fix`` is empty when it passed."""

    id: str
    title: str
    status: Status
    detail: str
    fix: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def worst(rows: Sequence[CheckRow]) -> Status:
    """The most severe status among ``rows`` (``pass`` for none)."""
    return max((row.status for row in rows), key=_RANK.__getitem__, default="pass")
