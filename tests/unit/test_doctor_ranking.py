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


def _superseding(finding: Finding, supersedes: frozenset[str], yields: frozenset[str],
                 priority: int = 90) -> tuple[Finding, int, frozenset[str], frozenset[str], bool]:
    return (finding, priority, supersedes, yields | {finding.id}, False)


def test_a_rule_error_a_firing_cause_supersedes_no_longer_silences_another_cause() -> None:
    # a restart explains the loopback refusal (the rules' wrong-interface): the first attempt's
    # own failure, which yielded to that error, is named again
    rule = _finding("wrong-interface", "loopback refused")
    restart = _superseding(_finding("rendezvous-config", "a restart dialled the attempt before"),
                           frozenset({"wrong-interface"}), frozenset())
    own = _superseding(_finding("rank-failed", "rank 1 raised KeyError"), GENERIC,
                       frozenset({"wrong-interface"}), priority=50)
    shown = rank([(rule, 80)], [restart, own], True, [])
    assert sorted(f.id for f in shown) == ["rank-failed", "rendezvous-config"]


def test_a_cause_that_fires_only_so_adds_no_second_reading_of_an_id_already_given() -> None:
    rule = _finding("unexplained-failure", "a line no rule named")
    first = _superseding(_finding("cuda-error", "the error's meaning"),
                         frozenset({"unexplained-failure"}), frozenset(), priority=70)
    later = _superseding(_finding("cuda-error", "the general words"), frozenset(),
                         frozenset({"unexplained-failure"}), priority=95)
    shown = rank([(rule, 80)], [first, later], True, [])
    assert [f.explanation for f in shown] == ["the error's meaning"]


def test_a_cause_that_names_another_causes_id_explains_it() -> None:
    mismatch = _superseding(_finding("collective-timeout", "different collectives"),
                            GENERIC | {"invalid-usage"}, frozenset(), priority=80)
    raise_site = _superseding(_finding("invalid-usage", "torch refused the call's arguments"),
                              GENERIC, frozenset(), priority=84)
    shown = rank([], [mismatch, raise_site], True, [])
    assert [f.id for f in shown] == ["collective-timeout"]
