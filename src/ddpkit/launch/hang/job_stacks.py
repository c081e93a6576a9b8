"""The whole job's stacks, from every node's JSON (``--hosts``, join token): pure.

Each node dumps its own ranks and returns its reports in the JSON it prints for its supervisor
(``stack_reports``, in the launch document or in the ``job-hung`` error's details). Grouping all
ranks of all nodes together names the odd one out across the job, which no node alone can.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ddpkit.launch.hang.stacks import RankStack, summary_lines


def node_reports(doc: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The stack reports in one node's JSON document (empty when it has none)."""
    if not isinstance(doc, Mapping):
        return []
    found = doc.get("stack_reports")
    if found is None:
        error = doc.get("error") if isinstance(doc.get("error"), Mapping) else doc.get("launch_error")
        details = error.get("details") if isinstance(error, Mapping) else None
        found = details.get("stack_reports") if isinstance(details, Mapping) else None
    return [r for r in found or () if isinstance(r, Mapping)]


def job_stacks(docs: Iterable[Mapping[str, Any] | None]) -> tuple[list[str], list[dict[str, Any]]]:
    """Summary lines over the latest report of every node (from its JSON), and those reports."""
    return job_stacks_of(node_reports(doc) for doc in docs)


def job_stacks_of(per_node: Iterable[Iterable[Mapping[str, Any]]]
                  ) -> tuple[list[str], list[dict[str, Any]]]:
    """The same from each node's list of reports (a join master's NodeOutcome.stack_reports)."""
    latest = []
    for found in per_node:
        reports = list(found)
        if reports:
            latest.append(dict(reports[-1]))
    stacks = [RankStack.from_dict(s) for r in latest for s in r.get("stacks") or ()
              if isinstance(s, Mapping)]
    return (summary_lines(stacks) if stacks else []), latest
