"""An entry of the rule table, the conditions it states, and the table's evaluation.

An entry (:class:`Rule`) names the finding ids it may give, makes its findings from the
:class:`~ddpkit.doctor.log.rules.reading.Reading`, and states as data when it is asked:
``when`` (every condition holds), ``unless`` (none holds) and ``reads`` (conditions whose truth
it is handed, for its wording or severity). A condition reads either the facts (:class:`Fact`)
or what the entries above it in the table found (:class:`ErrorFound`, :class:`AnyFound`,
:class:`IdFound`, :class:`Fired`, :class:`ErrorBefore`): the table's order is the only order,
and an entry can depend only on entries above it (tests/unit/test_doctor_table.py checks it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ddpkit.doctor.catalogue import entry
from ddpkit.doctor.findings import Finding
from ddpkit.doctor.log.rules.reading import Reading

# An entry's findings: none, one, one with its own priority, or several (each of its id's)
Made = Finding | tuple[Finding, int] | list[Finding] | None
# The ids an entry gives when they are whatever the message catalogue files a line under
CATALOGUED = "(the message catalogue's)"


@dataclass(frozen=True)
class Found:
    """What the entries evaluated so far gave: (entry name, finding, priority), in order."""

    hits: list[tuple[str, Finding, int]] = field(default_factory=list)


@dataclass(frozen=True)
class Fact:
    """A fact of the reading, named (``what`` is how the docs and tests speak of it)."""

    what: str
    test: Callable[[Reading], bool]

    def holds(self, reading: Reading, found: Found) -> bool:
        return self.test(reading)


@dataclass(frozen=True)
class ErrorFound:
    """An entry above gave an error finding."""

    def holds(self, reading: Reading, found: Found) -> bool:
        return any(f.severity == "error" for _n, f, _p in found.hits)


@dataclass(frozen=True)
class AnyFound:
    """An entry above gave a finding."""

    def holds(self, reading: Reading, found: Found) -> bool:
        return bool(found.hits)


@dataclass(frozen=True)
class IdFound:
    """An entry above gave a finding of ``finding_id``."""

    finding_id: str

    def holds(self, reading: Reading, found: Found) -> bool:
        return any(f.id == self.finding_id for _n, f, _p in found.hits)


@dataclass(frozen=True)
class Fired:
    """The entry named ``rule`` (above) gave a finding."""

    rule: str

    def holds(self, reading: Reading, found: Found) -> bool:
        return any(name == self.rule for name, _f, _p in found.hits)


@dataclass(frozen=True)
class ErrorBefore:
    """An entry above the one named ``rule`` gave an error finding (what was known when
    ``rule`` was asked)."""

    rule: str

    def holds(self, reading: Reading, found: Found) -> bool:
        for name, finding, _p in found.hits:
            if name == self.rule:
                return False
            if finding.severity == "error":
                return True
        return False


@dataclass(frozen=True)
class Either:
    """Any of ``conditions`` holds."""

    conditions: tuple[Condition, ...]

    def holds(self, reading: Reading, found: Found) -> bool:
        return any(c.holds(reading, found) for c in self.conditions)


Condition = Fact | ErrorFound | AnyFound | IdFound | Fired | ErrorBefore | Either


@dataclass(frozen=True)
class Rule:
    """An entry of the table: ``make(reading, read)`` gives its findings, ``read`` the truth of
    ``reads`` in order; ``priority_of``: the catalogue id whose priority its findings rank by
    (default: their own id's; a priority ``make`` returns wins)."""

    name: str
    ids: frozenset[str]
    make: Callable[[Reading, tuple[bool, ...]], Made]
    when: tuple[Condition, ...] = ()
    unless: tuple[Condition, ...] = ()
    reads: tuple[Condition, ...] = ()
    priority_of: str | None = None


def evaluate(rules: Sequence[Rule], reading: Reading) -> list[tuple[str, Finding, int]]:
    """Every entry in the table's order, asked when its conditions hold: (entry name, finding,
    priority) of each finding."""
    found = Found()
    for rule in rules:
        if not all(c.holds(reading, found) for c in rule.when) or any(
                c.holds(reading, found) for c in rule.unless):
            continue
        made = rule.make(reading, tuple(c.holds(reading, found) for c in rule.reads))
        if made is None:
            continue
        if isinstance(made, Finding):
            found.hits.append((rule.name, made, _priority(rule, made)))
        elif isinstance(made, list):
            found.hits.extend((rule.name, f, _priority(rule, f)) for f in made)
        else:
            found.hits.append((rule.name, made[0], made[1]))
    return found.hits


def _priority(rule: Rule, finding: Finding) -> int:
    return entry(rule.priority_of or finding.id).priority
