"""The root cause of a failed whole job, on the master, from the engine of ``doctor --log``
(issue 24): every node sends its reading of its own run directory with its outcome
(doctor/log/verdict.NodeLogs); the master judges them together (``verdict``), as ``ddpkit doctor
--log <every node's run directory>`` would, names the node of the rank that started it first and
says the top finding when it is more than that rank's failure."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ddpkit.doctor.log.verdict import RANK_FINDINGS, NodeLogs, Verdict, verdict
from ddpkit.i18n import _
from ddpkit.launch.outcomes import NodeOutcome, first_failure, job_summary
from ddpkit.wording import clauses


def judge(outcomes: Sequence[NodeOutcome]) -> tuple[NodeOutcome | None, Verdict | None]:
    """The failed node to name first and the job's verdict (None when no node sent a reading
    of its logs: the outcomes' own order then decides, ``first_failure``)."""
    nodes: list[NodeLogs] = []
    for outcome in outcomes:
        if outcome.logs is None:
            continue
        try:
            nodes.append(NodeLogs.from_dict(outcome.logs, outcome.node_rank))
        except (AttributeError, KeyError, TypeError, ValueError):
            continue  # a malformed reading counts as none
    first = first_failure(outcomes)
    if not nodes:
        return first, None
    judged = verdict(nodes)
    if judged.root is None or not judged.root.is_cause:
        return first, judged  # no rank failed of its own: a node lost (its ssh session, its
        # heartbeat) may be the cause, which only the outcomes know
    named = next((o for o in outcomes if o.failed and o.node_rank == judged.root_node), None)
    return named or first, judged


def failure_summary(outcomes: Sequence[NodeOutcome], payload: dict[str, Any],
                    general_fix: str) -> tuple[str, str]:
    """The job summary and its fix, from one judgement of the job. The summary names the
    verdict's first failure, quoting what the root rank raised and said last as the engine read
    them; the fix is the one that failure's node gave for its own end when that end names its
    cause (a missing module, the exit-time abort), before ``general_fix`` (where the details
    are), else ``general_fix`` alone. ``payload`` (the job's JSON) gets the verdict as
    ``diagnosis`` and that failure as ``first_failure``."""
    first, judged = judge(outcomes)
    fix = clauses([first.fix, general_fix]) if first is not None and first.fix else general_fix
    root = judged.root if judged is not None else None
    if first is not None and root is not None and root.rank == first.rank:
        quoted = dataclasses.replace(first, raised=str(root.raised) if root.raised else
                                     first.raised, last_lines=root.last_lines or first.last_lines)
        outcomes = [quoted if o is first else o for o in outcomes]
        first = quoted
    text = job_summary(outcomes, first)
    if judged is None:
        return text, fix
    payload["diagnosis"] = judged.to_dict()
    if first is not None:
        payload["first_failure"] = first.to_dict(logs=False)
    top = judged.top
    if top is not None and top.id not in RANK_FINDINGS and top.severity == "error":
        text = _("{summary}. Most likely cause: {title} [{id}] (ddpkit doctor --log on every "
                 "node's run directory explains it)", summary=text, title=top.title, id=top.id)
    return text, fix
