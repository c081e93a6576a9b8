"""``doctor --log`` on a stacks directory (what `ddpkit launch` dumps when a job hangs): the ranks
grouped by where they are, as a ``job-hung`` finding with the odd one out named."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from ddpkit.doctor.catalogue import entry
from ddpkit.doctor.findings import Evidence, Finding
from ddpkit.doctor.wording import specific_then_general
from ddpkit.file_safety import read_regular
from ddpkit.i18n import _
from ddpkit.launch.hang.stacks import RankStack, group, odd_one_out, summary_lines

STACKS_DIR, STACKS_JSON = "stacks", "stacks.json"
MAX_STACKS_BYTES = 64 * 1024 * 1024  # a node's ranks' stacks are a few hundred kB


def stack_files(path: str) -> list[str]:
    """The stacks.json a path holds: itself, in it (a stacks directory), or in its stacks/."""
    if os.path.isfile(path) and os.path.basename(path) == STACKS_JSON:
        return [path]
    for candidate in (os.path.join(path, STACKS_JSON), os.path.join(path, STACKS_DIR, STACKS_JSON)):
        if os.path.isfile(candidate):
            return [candidate]
    return []


def split(paths: Sequence[str]) -> tuple[list[str], list[str]]:
    """(stacks.json files, paths that are logs). A run directory is both; a stacks directory or
    a stacks.json file is only the first."""
    stacks, logs = [], []
    for path in paths:
        found = stack_files(path) if path != "-" else []
        stacks += found
        only_stacks = found and (os.path.basename(path) == STACKS_JSON or
                                 os.path.isfile(os.path.join(path, STACKS_JSON)))
        if not only_stacks:
            logs.append(path)
    return stacks, logs


def finding(files: Sequence[str]) -> Finding | None:
    """One ``job-hung`` finding over every rank in ``files`` (several nodes' dumps together)."""
    stacks: list[RankStack] = []
    for path in files:
        try:  # written by ddpkit, but anyone who can write the run directory can craft one
            doc = json.loads(read_regular(path, MAX_STACKS_BYTES).decode("utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        if not isinstance(doc, dict):
            continue
        stacks += [RankStack.from_dict(s) for s in doc.get("stacks") or () if isinstance(s, dict)]
    if not stacks:
        return None
    lines = summary_lines(stacks)
    groups, _stragglers = group(stacks)
    odd = odd_one_out(groups)
    e = entry("job-hung")
    title = e.title if odd is not None else _("The job hung: every rank waits at the same place")
    where = os.path.dirname(files[0])
    evidence = tuple(Evidence(os.path.join(where, "summary.txt"), number, text)
                     for number, text in enumerate(lines, start=2))
    return Finding("job-hung", e.severity, title, specific_then_general(lines[-1], e.explanation)
                   if odd is not None and lines else e.explanation, e.fix, evidence)
