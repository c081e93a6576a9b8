"""Every kind of event the rules route by is a member of EventKind: a kind typed anew as a
string (a typo, a kind renamed in one place) is caught here, not by a silently dead rule."""

from __future__ import annotations

import re
from pathlib import Path

from ddpkit.doctor.log import anchor_words, patterns
from ddpkit.doctor.log.causes.registry import CAUSES
from ddpkit.doctor.log.kinds import EventKind
from ddpkit.doctor.log.rules.reading import FAILED_KINDS, SIMPLE
from ddpkit.doctor.log.rules.run_end import RUN_END_KINDS
from ddpkit.doctor.log.rules.shell_signals import SIGNAL_KINDS
from ddpkit.doctor.log.rules.unexplained import UNEXPLAINED_KINDS

KINDS = {k.value for k in EventKind}
LOG_SOURCES = Path(__file__).resolve().parents[2] / "src" / "ddpkit" / "doctor" / "log"
# "kind == "x"", "kind != "x"", "kind in ("x", "y")", "kind not in {...}"
_COMPARED = re.compile(r"kind (?:==|!=) \"([a-z0-9-]+)\"|kind (?:not )?in [({]([^)}]*)[)}]")


def test_every_pattern_makes_an_event_kind() -> None:
    assert all(isinstance(p.kind, EventKind) for p in patterns.PATTERNS)
    assert {p.kind.value for p in patterns.PATTERNS} <= KINDS


def test_the_sets_the_rules_route_by_hold_event_kinds_only() -> None:
    for kinds in (patterns.FAILURE_KINDS, anchor_words.TAIL_KINDS, {patterns.FACT_KIND},
                  UNEXPLAINED_KINDS, RUN_END_KINDS, SIGNAL_KINDS, FAILED_KINDS, set(SIMPLE),
                  *(cause.kinds for cause in CAUSES)):
        assert set(kinds) <= KINDS, set(kinds) - KINDS


def test_every_kind_compared_in_the_code_is_an_event_kind() -> None:
    compared: set[str] = set()
    for path in LOG_SOURCES.rglob("*.py"):
        for match in _COMPARED.finditer(path.read_text()):
            if match.group(1):
                compared.add(match.group(1))
            else:
                compared |= set(re.findall(r"\"([a-z0-9-]+)\"", match.group(2)))
    assert compared and compared <= KINDS, compared - KINDS


def test_a_kind_is_its_string() -> None:
    assert EventKind.NCCL_ENV == "nccl-env" and f"{EventKind.NCCL_ENV}" == "nccl-env"
    assert {"nccl-env": 1}[EventKind.NCCL_ENV] == 1
