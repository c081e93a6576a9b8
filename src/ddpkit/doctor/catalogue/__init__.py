"""The finding catalogue: every id ``ddpkit doctor`` can report, in plain words, with its fix.

The entries live by family (:mod:`.network`, :mod:`.node`, :mod:`.job`); ``ORDER`` is the order
``docs/findings.md`` lists them in. ``docs/findings.md`` is generated from this table
(``render_markdown``) and a test keeps the two identical. ``priority`` orders findings of the
same severity: the most likely root cause first.
"""

from __future__ import annotations

from ddpkit.doctor.catalogue import docs, job, network, node
from ddpkit.doctor.catalogue.base import Entry
from ddpkit.doctor.catalogue.docs import PREFLIGHT

ORDER = (
    "wrong-interface",
    "interface-not-found",
    "container-network",
    "port-in-use",
    "duplicate-gpu",
    "shm",
    "version-mismatch",
    "rendezvous-config",
    "local-rank-argument",
    "rank-assignment",
    "ib-error",
    "p2p",
    "out-of-memory",
    "cuda-error",
    "node-mismatch",
    "firewall",
    "peer-unreachable",
    "rendezvous-timeout",
    "job-hung",
    "dump-unreadable",
    "collective-timeout",
    "connection-lost",
    "rank-failed",
    "invalid-usage",
    "internal-error",
    "stopped-while-waiting",
    "unexplained-failure",
    "no-result",
    "no-failure",
)
_BY_ID = {item.id: item for item in (*network.ENTRIES, *node.ENTRIES, *job.ENTRIES)}
ENTRIES: tuple[Entry, ...] = tuple(_BY_ID[finding_id] for finding_id in ORDER)
CATALOGUE: dict[str, Entry] = {item.id: item for item in ENTRIES}
# Findings that only say something failed (or nothing did), and name no cause.
GENERIC = frozenset({"unexplained-failure", "no-result", "no-failure", "stopped-while-waiting",
                     "rank-failed"})

__all__ = ["CATALOGUE", "ENTRIES", "GENERIC", "ORDER", "PREFLIGHT", "Entry", "entry",
           "render_markdown"]


def entry(finding_id: str) -> Entry:
    """The catalogue entry for ``finding_id`` (KeyError for an unknown id: a programming error)."""
    return CATALOGUE[finding_id]


def render_markdown() -> str:
    """``docs/findings.md``: every finding id with its meaning, how it is recognised and the fix."""
    return docs.render_markdown(ENTRIES)
