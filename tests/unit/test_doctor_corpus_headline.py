"""benchmarks/doctor_corpus.py's headline (issue 30): the newest batch of at least 30 logs as it
was measured untouched, each newer, smaller batch after it, and those smaller batches pooled."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "doctor_corpus.py"


@pytest.fixture(scope="module")
def corpus_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("doctor_corpus_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("doctor_corpus_script", module)
    spec.loader.exec_module(module)
    return module


def _record(batch: int, right: int, shown: int, logs: int, silent: int) -> dict[str, object]:
    return {"when": f"batch {batch}, gathered by someone",
            f"batch {batch}, untouched": f"{right}/{logs} (dev 1/1, eval 0/0)",
            f"batch {batch}, failed runs whose lines show the cause: top finding right":
                f"{right}/{shown} ({100 * right // shown}%)",
            f"batch {batch}, no-failure on a visibly failed log": f"{silent}/{shown + 2}"}


def test_the_smaller_newer_batches_follow_the_headline_and_are_pooled(corpus_script: ModuleType
                                                                       ) -> None:
    measurements = [{"when": "the corpus, fitted"}, _record(7, 20, 30, 40, 1),
                    _record(8, 5, 8, 12, 0), _record(9, 6, 7, 15, 2)]
    lines = corpus_script.untouched_headline(measurements)
    assert lines[0].startswith("headline, the newest fresh batch measured untouched (batch 7")
    assert lines.index("newer, smaller than a fresh batch (15 logs < 30), also untouched:") < \
        lines.index("newer, smaller than a fresh batch (12 logs < 30), also untouched:")
    pooled = lines[lines.index("the newer batches pooled (8, 9; each untouched on the rules of "
                               "its day):") + 1:]
    assert pooled == ["  untouched: 11/27",
                      "  failed runs whose lines show the cause: top finding right: 11/15 (73%)",
                      "  no-failure on a visibly failed log: 2/19"]


def test_one_smaller_batch_is_not_pooled(corpus_script: ModuleType) -> None:
    lines = corpus_script.untouched_headline([_record(7, 20, 30, 40, 1), _record(8, 5, 8, 12, 0)])
    assert not any("pooled" in line for line in lines)
