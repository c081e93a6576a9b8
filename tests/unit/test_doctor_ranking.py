"""causes/registry.rank: a cause and the message catalogue's reading of a line. The catalogue
files a line's template under a finding in general words; a cause of its own words (specificity
above 0) that names the same finding reads the line more closely and is shown instead; but it
still gives way to the catalogue's reading under another id it yields to, and a cause of the
catalogue's words (specificity 0) gives way as before."""

from __future__ import annotations

from ddpkit.doctor.findings import Evidence, Finding
from ddpkit.doctor.log.causes.registry import rank

GENERIC = frozenset({"rank-failed", "unexplained-failure"})


def _finding(finding_id: str, words: str) -> Finding:
    return Finding(finding_id, "error", finding_id, words, "fix", (Evidence("r.log", 3, "x"),))


def _cause(finding: Finding, yields: frozenset[str], own_words: bool
           ) -> tuple[Finding, int, frozenset[str], frozenset[str], bool]:
    return (finding, 90, GENERIC, yields | {finding.id}, own_words)


def test_a_cause_of_its_own_words_is_shown_over_the_catalogues_reading_of_its_id() -> None:
    catalogue = _finding("invalid-usage", "the catalogue's general words")
    cause = _finding("invalid-usage", "DDP refused a module on the CPU")
    shown = rank([(catalogue, 80)], [_cause(cause, frozenset(), True)], True, [catalogue])
    assert [f.explanation for f in shown] == ["DDP refused a module on the CPU"]


def test_a_cause_of_the_catalogues_words_gives_way_to_it() -> None:
    catalogue = _finding("cuda-error", "`line` is the message ...")
    cause = _finding("cuda-error", " the catalogue's general words")
    shown = rank([(catalogue, 80)], [_cause(cause, frozenset(), False)], True, [catalogue])
    assert [f.explanation for f in shown] == ["`line` is the message ..."]


def test_a_cause_still_gives_way_to_the_catalogues_other_ids_it_yields_to() -> None:
    catalogue = _finding("out-of-memory", "CUDA out of memory, in the catalogue's words")
    cause = _finding("internal-error", "an internal assertion")
    shown = rank([(catalogue, 80)], [_cause(cause, frozenset({"out-of-memory"}), True)], True,
                 [catalogue])
    assert [f.id for f in shown] == ["out-of-memory"]


def test_another_rules_error_of_its_id_still_says_more() -> None:
    rule = _finding("invalid-usage", "a rule's own reading")
    cause = _finding("invalid-usage", "DDP refused a module on the CPU")
    shown = rank([(rule, 80)], [_cause(cause, frozenset(), True)], True, [])
    assert [f.explanation for f in shown] == ["a rule's own reading"]
