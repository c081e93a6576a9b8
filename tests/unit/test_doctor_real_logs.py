"""doctor --log on logs people posted in public threads (tests/fixtures/real-logs/, issue 12).

Every log in corpus.json is a case: its top finding must be the cause its thread confirmed. A log
ddpkit still misses carries a ``known_miss`` reason and is a strict xfail, so the suite stays green
while the miss is recorded, and turns red the moment the miss is fixed without updating the record.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ddpkit.doctor.catalogue import CATALOGUE
from ddpkit.doctor.log.diagnose import diagnose

CORPUS_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "real-logs"
CORPUS: dict[str, Any] = json.loads((CORPUS_DIR / "corpus.json").read_text())
LOGS: list[dict[str, Any]] = CORPUS["logs"]


def _case(entry: dict[str, Any]) -> Any:
    marks = []
    if entry.get("known_miss"):
        marks.append(pytest.mark.xfail(strict=True, reason=entry["known_miss"]))
    return pytest.param(entry, id=entry["file"], marks=marks)


@pytest.mark.parametrize("entry", [_case(e) for e in LOGS])
def test_top_finding_is_the_confirmed_cause(entry: dict[str, Any]) -> None:
    findings = diagnose([str(CORPUS_DIR / entry["file"])])
    # ``answer``: what the log's own lines call for when that differs from the thread's cause
    # (issue 24: a working run's excerpt that stops before any end marker is no-result)
    assert findings[0].id == entry.get("answer", entry["cause"]), [f.id for f in findings]


def test_corpus_entries_are_complete_and_consistent() -> None:
    reserved = set(CORPUS["reserved"])
    names = [entry["file"] for entry in LOGS]
    assert len(names) == len(set(names))
    on_disk = {p.name for p in CORPUS_DIR.glob("*.log")}
    assert on_disk == set(names)
    for entry in LOGS:
        assert entry["source"] not in reserved, entry["file"]
        assert entry["cause"] in CATALOGUE, entry["file"]
        assert entry["split"] in ("dev", "eval"), entry["file"]
        assert entry["url"].startswith("https://github.com/"), entry["file"]
        assert entry["confirmed"], entry["file"]
        assert entry.get("batch", 1) in range(1, 51), entry["file"]
        assert set(entry["categories"]) <= {"hang", "pre-2.8", "torch-only",
                                            "multi-node-difference", "no-failure"}


def test_issue24_fields_are_recorded_from_batch_7_on() -> None:
    """From batch 7 on: whether the log's lines show the cause, and whether it visibly failed."""
    for entry in LOGS:
        if entry.get("batch", 1) < 7:
            continue
        assert isinstance(entry["cause_in_log"], bool), entry["file"]
        assert entry["cause_in_log_reason"], entry["file"]
        assert isinstance(entry["visibly_failed"], bool), entry["file"]
        assert not (entry["visibly_failed"] and entry["cause"] == "no-failure"), entry["file"]
        assert isinstance(entry.get("cause_fit", ""), str), entry["file"]


def test_eval_split_is_the_seeded_third() -> None:
    import importlib.util
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "corpus_split.py"
    spec = importlib.util.spec_from_file_location("corpus_split", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert CORPUS["split"]["seed"] == module.SEED
    assert CORPUS["split"]["batch_seeds"] == {str(b): s for b, s in module.BATCH_SEEDS.items()}
    chosen = module.eval_files_by_batch(LOGS)
    assert chosen == {entry["file"] for entry in LOGS if entry["split"] == "eval"}
    first_batch = [entry["file"] for entry in LOGS if entry.get("batch", 1) == 1]
    assert module.eval_files(first_batch, module.SEED) <= chosen  # batch 1 kept its split


def test_no_failure_logs_raise_no_alarm() -> None:
    for entry in LOGS:
        if entry["cause"] == "no-failure":
            findings = diagnose([str(CORPUS_DIR / entry["file"])])
            if entry.get("answer") == "no-result":  # stops before its end: a warning, no error
                assert [f.severity for f in findings] == ["warning"], entry["file"]
                assert entry["answer_reason"], entry["file"]
            elif entry.get("known_alarm"):  # a false alarm a fresh batch found, recorded
                assert "error" in [f.severity for f in findings], (entry["file"], "fixed? "
                                                                   "remove its known_alarm")
            elif entry.get("known_miss"):  # a miss (no-result where the run ended) is no alarm
                assert "error" not in [f.severity for f in findings], entry["file"]
            else:
                assert [f.severity for f in findings] == ["info"], entry["file"]


def test_every_docs_example_line_is_in_its_threads_corpus_log() -> None:
    from ddpkit.doctor.catalogue.real_examples import REAL_EXAMPLES

    by_source: dict[str, list[str]] = {}
    for entry in LOGS:
        by_source.setdefault(entry["source"], []).append(entry["file"])
    for finding_id, (line, source) in REAL_EXAMPLES.items():
        assert finding_id in CATALOGUE, finding_id
        texts = [(CORPUS_DIR / name).read_text() for name in by_source.get(source, [])]
        assert any(line in text for text in texts), (finding_id, source)
