"""The finding catalogue is complete, well-formed and documented."""

from __future__ import annotations

import re
from pathlib import Path

from ddpkit.doctor.catalogue import CATALOGUE, render_markdown

DOCS = Path(__file__).resolve().parents[2] / "docs" / "findings.md"

REQUIRED = {
    "wrong-interface", "interface-not-found", "container-network", "firewall", "peer-unreachable",
    "shm", "port-in-use", "rendezvous-config", "rendezvous-timeout", "duplicate-gpu",
    "rank-assignment", "node-mismatch", "version-mismatch", "ib-error", "p2p",
    "collective-timeout", "rank-failed", "out-of-memory", "connection-lost", "no-failure",
    "local-rank-argument", "job-hung", "dump-unreadable", "stopped-while-waiting",
    "unexplained-failure", "no-result",
    # issue 24: kinds the message catalogue reads from NCCL's result codes and the raise sites
    "invalid-usage", "internal-error", "cuda-error",
}


def test_catalogue_has_exactly_the_issue_ids() -> None:
    assert set(CATALOGUE) == REQUIRED


def test_entries_are_complete() -> None:
    for item in CATALOGUE.values():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", item.id)
        assert item.severity in ("error", "warning", "info")
        assert item.title and item.explanation and item.fix and item.recognised
        # every fix names something to run or set, not just advice
        assert re.search(r"ddpkit |export |=|docker |ulimit|--", item.fix), item.id


def test_priorities_are_distinct_so_ordering_is_deterministic() -> None:
    priorities = [item.priority for item in CATALOGUE.values()]
    assert len(priorities) == len(set(priorities))


def test_docs_findings_md_is_generated_from_the_catalogue() -> None:
    assert DOCS.read_text() == render_markdown(), (
        "docs/findings.md is stale: regenerate it with python -c \"from ddpkit.doctor.catalogue "
        "import render_markdown as r; open('docs/findings.md', 'w').write(r())\""
    )
    for finding_id in CATALOGUE:
        assert f"## {finding_id}\n" in DOCS.read_text()


def test_the_shm_fix_leads_with_what_a_container_renter_can_do() -> None:
    """Issue 35: a renter cannot pass --shm-size or remount the host's /dev/shm."""
    fix = CATALOGUE["shm"].fix
    first = fix.splitlines()[0]
    for step in ("NCCL_SHM_DISABLE=1", "DataLoader workers", "ask the provider"):
        assert step in first
    assert "--shm-size" not in first and "--shm-size" in fix
