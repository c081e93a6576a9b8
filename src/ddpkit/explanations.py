"""The entries of docs/errors.md and docs/errors.zh-CN.md, shipped with the package, for
``ddpkit explain ID`` (offline: the docs site may be slow or unreachable from where the user is).

``explanations.json`` is package data generated with the pages from one source,
docs/errors-source.toml (``python tools/errors_doc.py write``; its ``check`` fails when stale).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

Kind = Literal["error", "finding"]


@dataclass(frozen=True)
class Explanation:
    """One id's entry: an error's (with its exit code) or a doctor finding's (with its
    severity); ``cause`` and ``fix`` by language (``en``, ``zh``)."""

    id: str
    kind: Kind
    cause: dict[str, str]
    fix: dict[str, str]
    exit_code: int | None = None
    severity: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "cause": self.cause, "fix": self.fix,
                "exit_code": self.exit_code, "severity": self.severity}


@cache
def _data() -> dict[str, Any]:
    text = resources.files("ddpkit").joinpath("explanations.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def explanations(entry_id: str) -> list[Explanation]:
    """Every entry of ``entry_id``: the error, then the finding (an id may be both); [] when
    neither knows it."""
    found: list[Explanation] = []
    error = _data()["errors"].get(entry_id)
    if error is not None:
        found.append(Explanation(entry_id, "error", error["cause"], error["fix"],
                                 exit_code=error["exit_code"]))
    finding = _data()["findings"].get(entry_id)
    if finding is not None:
        found.append(Explanation(entry_id, "finding", finding["cause"], finding["fix"],
                                 severity=finding["severity"]))
    return found


def known_ids() -> list[str]:
    """Every id there is an entry for, sorted."""
    return sorted({*_data()["errors"], *_data()["findings"]})
