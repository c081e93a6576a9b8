"""The rule table (doctor/log/rules/order.RULES) and the causes (causes/registry.CAUSES) are the
only place `doctor --log` decides: every finding comes from an entry that declares its id or from
a cause, and an entry's conditions name only entries and ids above it (so the table's order is
the whole of the dependencies: no cycle, nothing decided by code order elsewhere)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ddpkit.doctor.catalogue import CATALOGUE, entry
from ddpkit.doctor.findings import Finding, Severity
from ddpkit.doctor.log.rules.entry import (
    CATALOGUED,
    AnyFound,
    Condition,
    Either,
    ErrorBefore,
    ErrorFound,
    Fired,
    IdFound,
    Rule,
    evaluate,
)
from ddpkit.doctor.log.rules.order import RULES
from ddpkit.doctor.log.rules.table import Diagnosis
from ddpkit.doctor.log.scan import scan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LOGS = sorted(p for d in ("logs", "real-logs") for p in (FIXTURES / d).rglob("*")
              if p.is_file() and p.suffix not in (".json", ".md"))


def _named(condition: Condition) -> list[Condition]:
    if isinstance(condition, Either):
        return [c for inner in condition.conditions for c in _named(inner)]
    return [condition]


def misplaced(rules: tuple[Rule, ...]) -> list[str]:
    """Every condition that names an entry or an id not above its own entry, and every name
    used twice."""
    problems: list[str] = []
    names: set[str] = set()
    ids: set[str] = set()
    for rule in rules:
        if rule.name in names:
            problems.append(f"{rule.name}: a second entry of that name")
        for condition in (c for group in (rule.when, rule.unless, rule.reads) for c in group):
            for named in _named(condition):
                if isinstance(named, Fired | ErrorBefore) and named.rule not in names:
                    problems.append(f"{rule.name}: names {named.rule}, not above it")
                if isinstance(named, IdFound) and named.finding_id not in ids:
                    problems.append(f"{rule.name}: reads {named.finding_id}, no entry above "
                                    "gives it")
        names.add(rule.name)
        ids |= rule.ids
    return problems


def test_every_condition_names_an_entry_or_id_above_it() -> None:
    assert misplaced(RULES) == []


def test_the_check_finds_a_dependency_on_an_entry_below() -> None:
    # the table reversed: rank-failed's dependants now come before it
    problems = misplaced(tuple(reversed(RULES)))
    assert any("names rank-failed, not above it" in p for p in problems)
    assert any("reads shm" in p for p in problems)
    assert misplaced((RULES[0], RULES[0])) == [f"{RULES[0].name}: a second entry of that name"]


def test_every_declared_id_is_the_catalogues() -> None:
    declared = {i for rule in RULES for i in rule.ids} - {CATALOGUED}
    assert declared <= set(CATALOGUE)


def _read(path: Path) -> Diagnosis:
    diagnosis = Diagnosis()
    with path.open("rb") as stream:
        for event in scan(stream, str(path)):
            diagnosis.feed(event)
    return diagnosis


def test_fixtures_are_there() -> None:
    assert len(LOGS) > 100


@pytest.mark.parametrize("path", LOGS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_finding_comes_from_an_entry_that_declares_it_or_from_a_cause(path: Path) -> None:
    diagnosis = _read(path)
    by_rule = {rule.name: rule for rule in RULES}
    hits = evaluate(RULES, diagnosis)
    for name, finding, _priority in hits:
        declared = by_rule[name].ids
        assert finding.id in declared or (CATALOGUED in declared and finding.id in CATALOGUE), (
            f"{name} gave {finding.id}, which it does not declare")
    made = {(f.id, f.explanation) for _n, f, _p in hits}
    made |= {(c[0].id, c[0].explanation)
             for c in diagnosis.cause_table.findings(diagnosis.context())}
    for finding in diagnosis.findings():
        assert (finding.id, finding.explanation) in made


def _finding(finding_id: str, severity: Severity) -> Finding:
    e = entry(finding_id)
    return Finding(e.id, severity, e.title, e.explanation, e.fix, ())


def test_conditions_read_only_what_the_entries_above_found() -> None:
    seen: list[tuple[bool, ...]] = []

    def reading(finding_id: str, severity: Severity) -> Callable[..., Finding]:
        def make(_r: object, read: tuple[bool, ...]) -> Finding:
            seen.append(read)
            return _finding(finding_id, severity)
        return make

    table = (
        Rule("a", frozenset({"p2p"}), reading("p2p", "warning"), reads=(ErrorFound(),)),
        Rule("b", frozenset({"shm"}), reading("shm", "error"), reads=(ErrorFound(), AnyFound())),
        Rule("c", frozenset({"firewall"}), reading("firewall", "error"),
             unless=(ErrorBefore("b"),)),  # nothing failed before b: asked
        Rule("d", frozenset({"no-result"}), reading("no-result", "warning"),
             unless=(ErrorBefore("c"),)),  # b's error came before c: not asked
        Rule("e", frozenset({"ib-error"}), reading("ib-error", "error"),
             when=(Fired("d"),)),  # d gave nothing: not asked
        Rule("f", frozenset({"out-of-memory"}), reading("out-of-memory", "error"),
             unless=(IdFound("p2p"),)),  # a gave p2p: not asked
        Rule("g", frozenset({"port-in-use"}), reading("port-in-use", "error"),
             when=(Fired("a"), Either((IdFound("shm"), IdFound("ib-error"))))),
    )
    hits = evaluate(table, Diagnosis())
    assert [(name, f.id) for name, f, _p in hits] == [
        ("a", "p2p"), ("b", "shm"), ("c", "firewall"), ("g", "port-in-use")]
    assert seen[:2] == [(False,), (False, True)]  # read before its own finding is in
    assert [p for _n, _f, p in hits] == [entry(i).priority for i in
                                         ("p2p", "shm", "firewall", "port-in-use")]
